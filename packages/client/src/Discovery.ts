/**
 * Discovery: from an MCP server URL (and the challenge of its 401) to validated protected resource metadata, the
 * chosen authorization server, and that server's validated metadata.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-server-discovery | MCP authorization server discovery}
 * @module
 */
import { CanonicalUri, type Challenge, Metadata, Revision, WellKnown, type Wire } from "@keyway/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { AuthError, type Step } from "./AuthError.js"
import { ClientConfig } from "./ClientConfig.js"
import { DiscoveryCache } from "./DiscoveryCache.js"
import { discard, readJson, send, ttlOf } from "./internal/http.js"
import { authorizationBaseUrl } from "./internal/legacy.js"

/**
 * What discovery learnt about the protected resource (named apart from `@keyway/resource-server`'s
 * `ProtectedResource`, which is the server side).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 */
export interface DiscoveredResource {
  /** The URL the client is accessing. */
  readonly serverUrl: string
  /** The `resource` to send in authorization and token requests, exactly as published. */
  readonly resource: string
  /** The validated document; undefined in the 2025-03-26 fallback, where the server publishes none. */
  readonly metadata: Wire.ProtectedResourceMetadata | undefined
  /** Where the document came from ("configured" for pre-configured values). */
  readonly metadataUrl: string | undefined
  /** The issuer of the chosen authorization server. */
  readonly issuer: string
  /** True when the server publishes no protected resource metadata and the 2025-03-26 fallback applies. */
  readonly legacy: boolean
}

/**
 * An authorization server as discovery found it: its issuer and validated metadata (named apart from
 * `@keyway/authorization-server`'s `AuthorizationServer`, which is the server itself).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3 | RFC 8414 §3.3}
 */
export interface DiscoveredAuthorizationServer {
  readonly issuer: string
  readonly metadata: Wire.AuthorizationServerMetadata
  /** Where the metadata came from; undefined when the 2025-03-26 default endpoints are used. */
  readonly metadataUrl: string | undefined
}

const PRM: Step = "protected-resource-metadata"
const ASM: Step = "authorization-server-metadata"

type Fetched =
  | { readonly kind: "found"; readonly json: unknown; readonly ttl: number | undefined }
  | { readonly kind: "absent"; readonly status: number }

/** GETs a JSON document through the cache; 2xx is found, 5xx fails, anything else is absent. */
const fetchDocument = Effect.fnUntraced(function* (step: Step, url: string, force: boolean) {
  const config = yield* ClientConfig
  const cache = yield* DiscoveryCache
  if (!force) {
    const cached = yield* cache.get(url)
    if (cached !== undefined) return { kind: "found", json: cached, ttl: undefined } as Fetched
  }
  const response = yield* send(config.fetch, step, url, { headers: { accept: "application/json" } })
  if (response.status >= 500) {
    discard(response)
    return yield* new AuthError({
      step,
      reason: "http-error",
      url,
      status: response.status,
      message: `${url} answered HTTP ${response.status} during discovery; the server is failing, try again later or check its logs`,
    })
  }
  if (response.status < 200 || response.status > 299) {
    discard(response)
    return { kind: "absent", status: response.status } as Fetched
  }
  const json = yield* readJson(step, url, response)
  const now = (yield* Clock.currentTimeMillis) / 1000
  return { kind: "found", json, ttl: ttlOf(response.headers, config.discoveryTtlSeconds, now) } as Fetched
})

const remember = Effect.fnUntraced(function* (url: string, ttl: number | undefined, value: unknown) {
  const cache = yield* DiscoveryCache
  if (ttl !== undefined) yield* cache.set(url, value, ttl)
})

/** Core's checks of protected resource metadata, failing with the client's error vocabulary. */
const validatePrm = (serverUrl: string, url: string, json: unknown) =>
  Effect.fromResult(Metadata.processProtectedResourceMetadata(serverUrl, url, json)).pipe(
    Effect.mapError((problem) => toAuthError(PRM, problem)),
  )

const toAuthError = (step: Step, problem: Metadata.MetadataProblem): AuthError =>
  new AuthError({ step, reason: problem.reason, url: problem.url, message: problem.message })

const choose = Effect.fnUntraced(function* (serverUrl: string, url: string, metadata: Wire.ProtectedResourceMetadata) {
  const config = yield* ClientConfig
  const servers = metadata.authorization_servers ?? []
  const chosen = yield* Effect.promise(async () => config.chooseAuthorizationServer(servers, { serverUrl, metadata }))
  if (!servers.includes(chosen)) {
    return yield* new AuthError({
      step: PRM,
      reason: "invalid-input",
      url,
      message: `the authorization server chooser returned "${chosen}", which is not one of ${servers.join(", ")}`,
    })
  }
  return chosen
})

/**
 * Finds and validates the protected resource metadata of a server and chooses its authorization server: the
 * challenge's `resource_metadata` URL when present, else the path-specific then the root well-known URL; then
 * pre-configured metadata; then (when enabled) the 2025-03-26 fallback to the server's origin.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#protected-resource-metadata-discovery-requirements | MCP PRM discovery}
 */
export const discoverProtectedResource = Effect.fn("Discovery.discoverProtectedResource")(function* (
  serverUrl: string,
  challenge: Challenge.BearerParams | undefined,
  options: { readonly force?: boolean } = {},
) {
  const config = yield* ClientConfig
  const force = options.force ?? false
  const fromChallenge = challenge?.resource_metadata
  const urls = fromChallenge !== undefined ? [fromChallenge] : WellKnown.protectedResourceMetadataUrls(serverUrl)
  const tried: Array<string> = []
  for (const url of urls) {
    if (URL.parse(url) === null) {
      return yield* new AuthError({
        step: PRM,
        reason: "invalid-input",
        url,
        message: `the resource_metadata URL "${url}" in the WWW-Authenticate challenge of ${serverUrl} is not an absolute URL`,
      })
    }
    tried.push(url)
    const fetched = yield* fetchDocument(PRM, url, force)
    if (fetched.kind === "absent") {
      if (fromChallenge !== undefined) {
        return yield* new AuthError({
          step: PRM,
          reason: "not-found",
          url,
          status: fetched.status,
          message: `the resource_metadata URL ${url} named in the challenge of ${serverUrl} answered HTTP ${fetched.status}; the MCP server must serve its protected resource metadata there`,
        })
      }
      continue
    }
    const metadata = yield* validatePrm(serverUrl, url, fetched.json)
    yield* remember(url, fetched.ttl, fetched.json)
    const issuer = yield* choose(serverUrl, url, metadata)
    return {
      serverUrl,
      resource: metadata.resource,
      metadata,
      metadataUrl: url,
      issuer,
      legacy: false,
    } as DiscoveredResource
  }
  const configured =
    config.protectedResourceMetadata[serverUrl] ??
    (CanonicalUri.isValid(serverUrl) ? config.protectedResourceMetadata[CanonicalUri.parse(serverUrl)] : undefined)
  if (configured !== undefined) {
    const metadata = yield* validatePrm(serverUrl, "configured", configured)
    const issuer = yield* choose(serverUrl, "configured", metadata)
    return {
      serverUrl,
      resource: metadata.resource,
      metadata,
      metadataUrl: "configured",
      issuer,
      legacy: false,
    } as DiscoveredResource
  }
  if (config.legacyFallback) {
    return {
      serverUrl,
      resource: CanonicalUri.parse(serverUrl),
      metadata: undefined,
      metadataUrl: undefined,
      issuer: authorizationBaseUrl(serverUrl),
      legacy: true,
    } as DiscoveredResource
  }
  return yield* new AuthError({
    step: PRM,
    reason: "not-found",
    url: tried[0] ?? serverUrl,
    message: `no protected resource metadata for ${serverUrl} (tried ${tried.join(", ")}); the MCP server must publish it, or configure protectedResourceMetadata for this server`,
  })
})

/** Core's checks of authorization server metadata (issuer, PKCE S256, the code flow's endpoints). */
const validateAsm = (issuer: string, url: string, json: unknown, legacy: boolean) =>
  Effect.fromResult(Metadata.processAuthorizationServerMetadata(issuer, url, json, { legacy })).pipe(
    Effect.mapError((problem) => toAuthError(ASM, problem)),
  )

/**
 * Fetches and validates an authorization server's metadata from the locations of the seed's order (RFC 8414 and
 * OpenID Connect Discovery), using the first that answers. The `issuer` must equal the expected one exactly and
 * `code_challenge_methods_supported` must contain S256.
 *
 * In the 2025-03-26 fallback (`legacy`), `issuer` is the MCP server's origin: the metadata found there may name
 * another issuer at that same origin (core's {@link Metadata.legacyIssuerAccepted}), and the result carries that
 * issuer. When no location answers, the default endpoints `/authorize`, `/token` and `/register` at the origin (core's
 * {@link Revision.legacyEndpoints}) are used.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3 | RFC 8414 §3}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderConfigurationValidation | OIDC Discovery §4.3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-03-26/basic/authorization#2-3-2-authorization-base-url | MCP 2025-03-26 fallbacks}
 */
export const discoverAuthorizationServer = Effect.fn("Discovery.discoverAuthorizationServer")(function* (
  issuer: string,
  options: { readonly legacy?: boolean; readonly force?: boolean } = {},
) {
  const locations = WellKnown.authorizationServerMetadataUrls(issuer)
  const tried: Array<string> = []
  for (const location of locations) {
    tried.push(location.url)
    const fetched = yield* fetchDocument(ASM, location.url, options.force ?? false)
    if (fetched.kind === "absent") continue
    const metadata = yield* validateAsm(issuer, location.url, fetched.json, options.legacy === true)
    yield* remember(location.url, fetched.ttl, fetched.json)
    return { issuer: metadata.issuer, metadata, metadataUrl: location.url } as DiscoveredAuthorizationServer
  }
  if (options.legacy === true) {
    const defaults = Revision.legacyEndpoints(issuer)
    const metadata = {
      issuer,
      authorization_endpoint: defaults.authorization_endpoint,
      token_endpoint: defaults.token_endpoint,
      registration_endpoint: defaults.registration_endpoint,
      // 2025-03-26 made PKCE mandatory for every server, so S256 is the one method to use.
      code_challenge_methods_supported: ["S256"],
      response_types_supported: ["code"],
    } as Wire.AuthorizationServerMetadata
    return { issuer, metadata, metadataUrl: undefined } as DiscoveredAuthorizationServer
  }
  return yield* new AuthError({
    step: ASM,
    reason: "not-found",
    url: tried[0] ?? issuer,
    message: `no authorization server metadata for issuer ${issuer} (tried ${tried.join(", ")}); the authorization server must publish RFC 8414 or OpenID Connect Discovery metadata`,
  })
})
