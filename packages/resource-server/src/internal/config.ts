/**
 * The protected resource's options checked once and turned into the resolved form every request reads: the metadata
 * document (RFC 9728 §2) already serialised, scope tables, CORS and cache settings.
 */
import { CanonicalUri, Challenge, Scope, SecureUrl, TokenExchange, WellKnown, Wire } from "@keyway/core"
import { DEFAULT_MAX_BODY_BYTES } from "@keyway/http"
import { Result } from "effect"
import type { PresentationScheme } from "../Presentation.js"
import type { ProtectedResourceOptions, ScopeStrategy } from "../ProtectedResource.js"
import { maxClockSkewSeconds, type ResourceIdentity } from "../TokenVerifier.js"
import type { DelegationConfig } from "./delegation.js"
import type { OperationScopes } from "./jsonrpc.js"

/** The allowed origins; `undefined` when CORS is off. */
export type CorsConfig = { readonly any: boolean; readonly origins: ReadonlySet<string> } | undefined

export interface Config {
  readonly identity: ResourceIdentity
  readonly resource: CanonicalUri.CanonicalUri
  readonly metadata: Wire.ProtectedResourceMetadata
  readonly metadataBody: string
  readonly metadataMaxAge: number
  readonly resourceMetadataUrl: string
  readonly metadataPaths: ReadonlySet<string>
  readonly realm: string | undefined
  readonly baseScopes: ReadonlyArray<string>
  readonly scopesSupported: ReadonlyArray<string>
  readonly operations: OperationScopes | undefined
  readonly strategy: ScopeStrategy
  readonly related: ReadonlyMap<string, ReadonlyArray<string>>
  readonly known: ReadonlySet<string>
  readonly cors: CorsConfig
  readonly skewMs: number
  readonly cacheMax: number
  readonly cacheTtlMs: number
  readonly maxBodyBytes: number
  /** Presentation schemes besides Bearer (see `Presentation`). */
  readonly schemes: ReadonlyArray<PresentationScheme>
  /** The delegated tokens accepted; undefined: none. */
  readonly delegation: DelegationConfig | undefined
}

/** What is wrong with the options: the public face turns it into `InvalidConfiguration`. */
export interface ConfigProblem {
  readonly field: string
  readonly problem: string
}

export const resolve = (options: Omit<ProtectedResourceOptions, "verifier">): Result.Result<Config, ConfigProblem> => {
  const fail = (field: string, problem: string) => Result.fail({ field, problem })
  const resource = CanonicalUri.validate(options.resource)
  if (Result.isFailure(resource)) return fail("resource", `is not a canonical server URI: ${resource.failure.message}`)
  const servers = options.authorizationServers
  if (!Array.isArray(servers) || servers.length === 0) {
    return fail("authorizationServers", "must name at least one authorization server")
  }
  for (const server of servers) {
    if (typeof server !== "string" || !URL.canParse(server))
      return fail("authorizationServers", `has a non-URL: ${server}`)
    const url = new URL(server)
    if (url.hash !== "" || url.search !== "" || server.includes("#") || server.includes("?")) {
      return fail("authorizationServers", `has an issuer with a query or fragment: ${server}`)
    }
    if (
      !SecureUrl.isAllowed(url, { httpLoopback: true, httpAnyHost: options.allowInsecureAuthorizationServers === true })
    ) {
      return fail("authorizationServers", `must use https: ${server}`)
    }
  }
  const scopeLists: Array<[string, ReadonlyArray<string> | undefined]> = [
    ["scopesSupported", options.scopesSupported],
    ["requiredScopes", options.requiredScopes],
    ...Object.entries(options.methodScopes ?? {}).map(([k, v]): [string, ReadonlyArray<string>] => [
      `methodScopes.${k}`,
      v,
    ]),
    ...Object.entries(options.toolScopes ?? {}).map(([k, v]): [string, ReadonlyArray<string>] => [
      `toolScopes.${k}`,
      v,
    ]),
    ...Object.entries(options.relatedScopes ?? {}).map(([k, v]): [string, ReadonlyArray<string>] => [
      `relatedScopes.${k}`,
      v,
    ]),
  ]
  const known = new Set<string>()
  for (const [field, list] of scopeLists) {
    for (const scope of list ?? []) {
      if (!Scope.isScopeToken(scope)) return fail(field, `has an invalid scope token: ${JSON.stringify(scope)}`)
      known.add(scope)
    }
  }
  const strategy = options.scopeStrategy ?? "recommended"
  if (strategy !== "minimal" && strategy !== "recommended" && strategy !== "extended") {
    return fail("scopeStrategy", `must be minimal, recommended or extended, not ${String(strategy)}`)
  }
  const canonical = resource.success
  const wellKnown = WellKnown.protectedResourceMetadataUrls(canonical)
  const resourceMetadataUrl = options.resourceMetadataUrl ?? wellKnown[0]!
  if (!URL.canParse(resourceMetadataUrl)) return fail("resourceMetadataUrl", "is not a URL")
  const metadataPaths = new Set([...wellKnown, resourceMetadataUrl].map((u) => new URL(u).pathname))
  const schemes = options.presentationSchemes ?? []
  for (const [i, scheme] of schemes.entries()) {
    if (!Challenge.isToken(scheme.scheme) || scheme.scheme.toLowerCase() === "bearer") {
      return fail(`presentationSchemes[${i}]`, `has an unusable scheme name: ${JSON.stringify(scheme.scheme)}`)
    }
  }
  const metadataInput: Record<string, unknown> = {
    ...Object.assign({}, ...schemes.map((scheme) => scheme.metadata ?? {})),
    ...options.additionalMetadata,
    resource: canonical,
    authorization_servers: [...servers],
    ...(options.scopesSupported === undefined ? {} : { scopes_supported: Scope.dedupe(options.scopesSupported) }),
    bearer_methods_supported: ["header"],
    ...(options.resourceName === undefined ? {} : { resource_name: options.resourceName }),
    ...(options.resourceDocumentation === undefined ? {} : { resource_documentation: options.resourceDocumentation }),
    ...(options.resourcePolicyUri === undefined ? {} : { resource_policy_uri: options.resourcePolicyUri }),
    ...(options.resourceTosUri === undefined ? {} : { resource_tos_uri: options.resourceTosUri }),
  }
  const metadata = Wire.validate(Wire.ProtectedResourceMetadata, metadataInput, "protected resource metadata")
  if (Result.isFailure(metadata)) return fail("metadata", metadata.failure.message)
  const methods = new Map(Object.entries(options.methodScopes ?? {}))
  const tools = new Map(Object.entries(options.toolScopes ?? {}))
  const skew = options.clockSkewSeconds ?? 30
  if (!Number.isFinite(skew) || skew < 0 || skew > maxClockSkewSeconds) {
    return fail("clockSkewSeconds", `must be between 0 and ${maxClockSkewSeconds}`)
  }
  const cors = options.cors === false ? undefined : options.cors?.origins
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 0) {
    return fail("maxBodyBytes", "must be a non-negative integer")
  }
  let delegation: DelegationConfig | undefined
  if (options.delegation !== undefined) {
    const { actors, maxChain = 1 } = options.delegation
    if (!Array.isArray(actors) || actors.length === 0) return fail("delegation.actors", "must name at least one actor")
    for (const actor of actors) {
      if (typeof actor !== "string" || actor === "") {
        return fail("delegation.actors", `has an actor that is not a non-empty string: ${JSON.stringify(actor)}`)
      }
    }
    if (!Number.isInteger(maxChain) || maxChain < 1 || maxChain > TokenExchange.MAX_CHAIN) {
      return fail("delegation.maxChain", `must be an integer from 1 to ${TokenExchange.MAX_CHAIN}, not ${maxChain}`)
    }
    delegation = { actors: new Set(actors), maxChain }
  }
  return Result.succeed({
    identity: { resource: canonical, authorizationServers: [...servers] },
    resource: canonical,
    metadata: metadata.success,
    metadataBody: JSON.stringify(metadata.success),
    metadataMaxAge: options.metadataMaxAgeSeconds ?? 3600,
    resourceMetadataUrl,
    metadataPaths,
    realm: options.realm,
    baseScopes: Scope.dedupe(options.requiredScopes ?? []),
    scopesSupported: Scope.dedupe(options.scopesSupported ?? []),
    operations: methods.size + tools.size === 0 ? undefined : { methods, tools },
    strategy,
    related: new Map(Object.entries(options.relatedScopes ?? {})),
    known,
    cors:
      options.cors === false
        ? undefined
        : { any: cors === undefined || cors === "*", origins: new Set(cors === undefined || cors === "*" ? [] : cors) },
    skewMs: skew * 1000,
    cacheMax: options.cache === false ? 0 : (options.cache?.maxEntries ?? 10_000),
    cacheTtlMs: options.cache === false ? 0 : (options.cache?.maxTtlSeconds ?? 3600) * 1000,
    maxBodyBytes,
    schemes,
    delegation,
  })
}
