/**
 * The protected MCP server: protected resource metadata, Bearer authentication of every request, 401/403
 * challenges and per-operation scopes. The Effect face is the {@link ProtectedResource} service; the plain face,
 * {@link createProtectedResource}, builds that service once and exposes it with Promise methods and Web handlers.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html | RFC 9728}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html | RFC 6750}
 */
import { CanonicalUri, Challenge, OAuthError, Scope, SecureUrl, WellKnown, Wire } from "@keyway/core"
import { Body, DEFAULT_MAX_BODY_BYTES, PayloadTooLarge } from "@keyway/http"
import { Context, Effect, Layer, ManagedRuntime, Result, Schema } from "effect"
import { type BearerCredentials, parseAuthorization } from "./internal/bearer.js"
import { ExpiringCache, tokenKey } from "./internal/cache.js"
import { errorBody, type OperationScan, type OperationScopes, scanOperations, scanParsed } from "./internal/jsonrpc.js"
import {
  descriptions,
  type InvalidVerifierOptions,
  type ResourceIdentity,
  TokenVerifier,
  type VerifierDefinition,
} from "./TokenVerifier.js"
import {
  InvalidToken,
  unavailableDescription,
  type VerificationError,
  type VerifiedToken,
  VerifierUnavailable,
} from "./VerifiedToken.js"

/**
 * Which scopes a 401/403 challenge names, as the MCP specification describes under "Runtime Insufficient Scope
 * Errors":
 * - `minimal`: the scopes the request needs (granted ones included when still needed);
 * - `recommended` (default): additionally every granted scope this server knows, so a step-up keeps them;
 * - `extended`: additionally the {@link ProtectedResourceOptions.relatedScopes} of the needed scopes.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#runtime-insufficient-scope-errors | MCP: Runtime Insufficient Scope Errors}
 */
export type ScopeStrategy = "minimal" | "recommended" | "extended"

/**
 * CORS for browser-based MCP clients. Bearer tokens are not ambient credentials, so allowing any origin is the
 * default; restrict it with a list.
 *
 * @see {@link https://fetch.spec.whatwg.org/#http-cors-protocol | Fetch: CORS protocol}
 */
export interface CorsOptions {
  /** `"*"` (default) or the exact origins allowed. */
  readonly origins?: "*" | ReadonlyArray<string>
}

/**
 * Configuration of a protected resource.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 */
export interface ProtectedResourceOptions {
  /** The canonical server URI (RFC 8707 §2), e.g. `https://mcp.example.com/mcp`. */
  readonly resource: string
  /** Issuer URLs of the authorization servers; at least one. */
  readonly authorizationServers: ReadonlyArray<string>
  /** How tokens are verified: {@link jwt}, {@link introspection} or {@link custom} from `TokenVerifier`. */
  readonly verifier: VerifierDefinition
  /** `scopes_supported`: the scopes needed for basic functionality. */
  readonly scopesSupported?: ReadonlyArray<string>
  /** Scopes every request needs. */
  readonly requiredScopes?: ReadonlyArray<string>
  /** Extra scopes per MCP JSON-RPC method, e.g. `{ "resources/read": ["files:read"] }`. */
  readonly methodScopes?: Readonly<Record<string, ReadonlyArray<string>>>
  /** Extra scopes per tool name for `tools/call`, e.g. `{ write_note: ["notes:write"] }`. */
  readonly toolScopes?: Readonly<Record<string, ReadonlyArray<string>>>
  /** Default `"recommended"`. */
  readonly scopeStrategy?: ScopeStrategy
  /** For the `extended` strategy: scopes commonly used together with a scope. */
  readonly relatedScopes?: Readonly<Record<string, ReadonlyArray<string>>>
  /** The metadata URL advertised in challenges; by default the path-specific well-known URL. */
  readonly resourceMetadataUrl?: string
  /** `resource_name`. */
  readonly resourceName?: string
  /** `resource_documentation`. */
  readonly resourceDocumentation?: string
  /** `resource_policy_uri`. */
  readonly resourcePolicyUri?: string
  /** `resource_tos_uri`. */
  readonly resourceTosUri?: string
  /** Further RFC 9728 §2 members (e.g. `resource_signing_alg_values_supported`). */
  readonly additionalMetadata?: Readonly<Record<string, unknown>>
  /** `realm` of the challenges (RFC 6750 §3). */
  readonly realm?: string
  /** `Cache-Control: max-age` of the metadata document. Default 3600. */
  readonly metadataMaxAgeSeconds?: number
  /** CORS; `false` turns it off. Default: any origin. */
  readonly cors?: CorsOptions | false
  /** Tolerance when re-checking `exp`. Default 30 s. */
  readonly clockSkewSeconds?: number
  /** The verified-token cache; `false` turns it off. */
  readonly cache?: false | { readonly maxEntries?: number; readonly maxTtlSeconds?: number }
  /** Allow `http:` authorization server URLs on non-loopback hosts (development only). Default false. */
  readonly allowInsecureAuthorizationServers?: boolean
  /**
   * Largest request body accepted from an authenticated caller, in bytes; a larger one is answered 413 before more
   * of it is read (a declared `Content-Length` at once, a chunked body when it grows past the limit). Default 4 MiB.
   */
  readonly maxBodyBytes?: number
}

/**
 * Configuration that cannot work, refused when the protected resource is created.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 */
export class InvalidConfiguration extends Schema.TaggedError<InvalidConfiguration>()("InvalidConfiguration", {
  /** The option at fault. */
  field: Schema.String,
  /** What is wrong with it. */
  problem: Schema.String,
}) {
  override get message(): string {
    return `Invalid protected resource configuration: ${this.field} ${this.problem}`
  }
}

/**
 * A request the way the framework-neutral check sees it. Web `Request`s are adapted by
 * {@link Handle.authenticate}; framework integrations build it from their own request objects.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-2 | RFC 6750 §2}
 */
export interface InboundRequest {
  readonly method: string
  /** Absolute URL or origin-form path with query. */
  readonly url: string
  /** The Authorization value, or every Authorization line when the framework keeps them apart. */
  readonly authorization: string | ReadonlyArray<string> | null | undefined
  readonly contentType: string | null | undefined
  /** The Content-Length header, when present. */
  readonly contentLength?: string | null | undefined
  /** The Origin header, for CORS. */
  readonly origin?: string | null | undefined
  /** Reads the body as text without taking it from the handler. */
  readonly readBody?: () => Promise<string>
  /** A body the framework has already parsed as JSON; used instead of {@link InboundRequest.readBody}. */
  readonly parsedBody?: unknown
}

/**
 * A successful authentication: the verified token and the raw access token (for handing to SDKs that want it; it
 * must never be forwarded upstream).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export interface Authenticated {
  readonly token: VerifiedToken
  readonly accessToken: string
}

/**
 * A refusal, independent of any HTTP framework.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 */
export interface Rejection {
  /** 413 when the body is larger than `maxBodyBytes`. */
  readonly status: 400 | 401 | 403 | 413
  /** The OAuth error code, absent when no credentials were presented (RFC 6750 §3.1). */
  readonly error?: "invalid_request" | "invalid_token" | "insufficient_scope"
  readonly description?: string
  /** The `scope` of the challenge. */
  readonly scope?: string
  /** Response headers, lower-case names, including `www-authenticate` when the refusal carries a challenge. */
  readonly headers: Readonly<Record<string, string>>
  /** The response body (JSON), possibly empty. */
  readonly body: string
}

/**
 * Result of the framework-neutral check.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 */
export type Outcome = ({ readonly ok: true } & Authenticated) | { readonly ok: false; readonly rejection: Rejection }

/**
 * Result of {@link Handle.authenticate}: the verified token, or the ready 400/401/403 response.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 */
export type AuthResult = ({ readonly ok: true } & Authenticated) | { readonly ok: false; readonly response: Response }

/**
 * A Web handler that runs only for authenticated requests.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-2.1 | RFC 6750 §2.1}
 */
export type ProtectedHandler = (request: Request, auth: Authenticated) => Response | Promise<Response>

/**
 * The protected resource, plain face: Promise methods and Web-standard handlers.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html | RFC 9728}
 */
export interface Handle {
  /** The canonical server URI. */
  readonly resource: CanonicalUri.CanonicalUri
  /** The protected resource metadata document. */
  readonly metadata: Wire.ProtectedResourceMetadata
  /** The metadata URL advertised in challenges. */
  readonly resourceMetadataUrl: string
  /** Paths at which the metadata is served (path-specific, root, advertised). */
  readonly metadataPaths: ReadonlyArray<string>
  /** The largest request body accepted, in bytes (`maxBodyBytes`); integrations reading bodies themselves apply it. */
  readonly maxBodyBytes: number
  /** The metadata response when `request` targets a metadata path, otherwise undefined. */
  readonly handleMetadata: (request: Request) => Response | undefined
  /** A Web handler for the metadata paths only (404 elsewhere). */
  readonly metadataHandler: (request: Request) => Promise<Response>
  /** Authenticates a Web request; `scopes` are needed in addition to the configured ones. */
  readonly authenticate: (request: Request, scopes?: ReadonlyArray<string>) => Promise<AuthResult>
  /** The framework-neutral form of {@link Handle.authenticate}. */
  readonly check: (request: InboundRequest, scopes?: ReadonlyArray<string>) => Promise<Outcome>
  /**
   * Wraps a Web handler: serves the metadata and CORS preflights, authenticates everything else and calls `handler`
   * only for authenticated requests with enough scope.
   */
  readonly protect: (
    handler: ProtectedHandler,
    scopes?: ReadonlyArray<string>,
  ) => (request: Request) => Promise<Response>
  /** A 403 `insufficient_scope` refusal for a check made at run time inside a handler. */
  readonly insufficientScope: (token: VerifiedToken, required: ReadonlyArray<string>, description?: string) => Rejection
  /** The CORS headers for a response to a request from `origin` (empty when CORS is off or the origin is not allowed). */
  readonly corsHeaders: (origin: string | null | undefined) => Readonly<Record<string, string>>
  /** The CORS preflight answer for `request`, or undefined when it is not a preflight (or CORS is off). */
  readonly preflight: (request: Request) => Response | undefined
  /** Turns a {@link Rejection} into a Web `Response`. */
  readonly toResponse: (rejection: Rejection) => Response
  /** Empties the verified-token cache. */
  readonly clearCache: () => void
  /** Releases the resources of the plain face (no-op for layer-built services). */
  readonly close: () => Promise<void>
}

/**
 * The protected resource as an Effect service. Build it with {@link ProtectedResource.layer} on top of a
 * {@link TokenVerifier} layer.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html | RFC 9728}
 */
export class ProtectedResource extends Context.Service<
  ProtectedResource,
  Handle & {
    /** Effect form of {@link Handle.check}: fails with {@link Unauthorized}. */
    readonly authenticateEffect: (
      request: InboundRequest,
      scopes?: ReadonlyArray<string>,
    ) => Effect.Effect<Authenticated, Unauthorized>
  }
>()("@keyway/resource-server/ProtectedResource") {
  /**
   * The service from its options (the `verifier` option is ignored: the {@link TokenVerifier} in context is used).
   * Fails with {@link InvalidConfiguration}.
   */
  static readonly layer = (
    options: Omit<ProtectedResourceOptions, "verifier">,
  ): Layer.Layer<ProtectedResource, InvalidConfiguration, TokenVerifier> =>
    Layer.effect(
      ProtectedResource,
      Effect.gen(function* () {
        const config = yield* Effect.fromResult(resolve(options))
        const verifier = yield* TokenVerifier
        const verify = (token: string): Promise<Result.Result<VerifiedToken, VerificationError>> =>
          Effect.runPromise(Effect.result(verifier.verify(token)))
        const handle = makeHandle(config, verify)
        return ProtectedResource.of({
          ...handle,
          authenticateEffect: (request, scopes) =>
            Effect.flatMap(
              Effect.promise(() => handle.check(request, scopes)),
              (outcome) =>
                outcome.ok
                  ? Effect.succeed({ token: outcome.token, accessToken: outcome.accessToken })
                  : Effect.fail(new Unauthorized({ rejection: outcome.rejection })),
            ),
        })
      }),
    )
}

/**
 * The Effect-face failure of authentication, carrying the refusal to send.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  rejection: Schema.Struct({
    status: Schema.Literals([400, 401, 403, 413]),
    error: Schema.optionalKey(Schema.Literals(["invalid_request", "invalid_token", "insufficient_scope"])),
    description: Schema.optionalKey(Schema.String),
    scope: Schema.optionalKey(Schema.String),
    headers: Schema.Record(Schema.String, Schema.String),
    body: Schema.String,
  }),
}) {
  override get message(): string {
    const r: Rejection = this.rejection
    return `${r.status} ${r.error ?? "unauthorized"}${r.description === undefined ? "" : `: ${r.description}`}`
  }
}

/**
 * Creates a protected resource (plain face). Throws {@link InvalidConfiguration} for unusable options, e.g. no
 * authorization server, and the verifier's {@link InvalidVerifierOptions} for unusable verifier options. The Effect
 * runtime behind it is built once, here.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-server-location | MCP: Authorization Server Location}
 */
export const createProtectedResource = (options: ProtectedResourceOptions): Handle => {
  const config = Result.getOrThrow(resolve(options))
  const layer = ProtectedResource.layer(options).pipe(Layer.provide(options.verifier.layer(config.identity)))
  const runtime = ManagedRuntime.make(layer)
  const service = runtime.runSync(Effect.service(ProtectedResource))
  return { ...service, close: () => runtime.dispose() }
}

interface Config {
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
  readonly cors: { readonly any: boolean; readonly origins: ReadonlySet<string> } | undefined
  readonly skewMs: number
  readonly cacheMax: number
  readonly cacheTtlMs: number
  readonly maxBodyBytes: number
}

const resolve = (options: Omit<ProtectedResourceOptions, "verifier">): Result.Result<Config, InvalidConfiguration> => {
  const fail = (field: string, problem: string) => Result.fail(new InvalidConfiguration({ field, problem }))
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
  const metadataInput: Record<string, unknown> = {
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
  if (!Number.isFinite(skew) || skew < 0 || skew > 300) return fail("clockSkewSeconds", "must be between 0 and 300")
  const cors = options.cors === false ? undefined : options.cors?.origins
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 0) {
    return fail("maxBodyBytes", "must be a non-negative integer")
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
  })
}

const CORS_ALLOW_HEADERS = "Authorization, Content-Type, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
const CORS_EXPOSE_HEADERS = "WWW-Authenticate, Mcp-Session-Id"

type Verify = (token: string) => Promise<Result.Result<VerifiedToken, VerificationError>>

const makeHandle = (config: Config, verify: Verify): Omit<Handle, "close"> & { close: () => Promise<void> } => {
  const cache = new ExpiringCache<VerifiedToken>(config.cacheMax)
  const inflight = new Map<string, Promise<Result.Result<VerifiedToken, VerificationError>>>()

  const corsHeaders = (origin: string | null | undefined, into: Record<string, string>): void => {
    const cors = config.cors
    if (cors === undefined) return
    if (cors.any) {
      into["access-control-allow-origin"] = "*"
    } else if (origin !== null && origin !== undefined && cors.origins.has(origin)) {
      into["access-control-allow-origin"] = origin
      into.vary = "Origin"
    } else {
      return
    }
    into["access-control-expose-headers"] = CORS_EXPOSE_HEADERS
  }

  const challengeScopes = (required: ReadonlyArray<string>, granted: ReadonlyArray<string>): ReadonlyArray<string> => {
    if (config.strategy === "minimal") return required
    const kept = granted.filter((s) => config.known.has(s))
    const recommended = Scope.union(kept, required)
    if (config.strategy === "recommended") return recommended
    const related: Array<string> = []
    for (const scope of required) for (const r of config.related.get(scope) ?? []) related.push(r)
    return Scope.union(recommended, related)
  }

  const reject = (
    origin: string | null | undefined,
    error: Rejection["error"],
    description: string | undefined,
    scopes: ReadonlyArray<string> | undefined,
  ): Rejection => {
    // The status follows from the error code (OAuthError.statusOf); no code means no token was presented: 401.
    const status = (error === undefined ? 401 : OAuthError.statusOf(error)) as Rejection["status"]
    const scope = scopes === undefined || scopes.length === 0 ? undefined : Scope.format(scopes)
    const params: Challenge.BearerParams = {
      ...(config.realm === undefined ? {} : { realm: config.realm }),
      resource_metadata: config.resourceMetadataUrl,
      ...(scope === undefined ? {} : { scope }),
      ...(error === undefined ? {} : { error }),
      ...(description === undefined ? {} : { error_description: description }),
    }
    const headers: Record<string, string> = {
      "www-authenticate": Challenge.formatBearer(params),
      "cache-control": "no-store",
    }
    let body = ""
    if (error !== undefined) {
      headers["content-type"] = "application/json"
      body = JSON.stringify(description === undefined ? { error } : { error, error_description: description })
    }
    corsHeaders(origin, headers)
    return {
      status,
      ...(error === undefined ? {} : { error }),
      ...(description === undefined ? {} : { description }),
      ...(scope === undefined ? {} : { scope }),
      headers,
      body,
    }
  }

  const badJsonRpc = (
    scan: Exclude<OperationScan, { _tag: "Operations" }>,
    origin: string | null | undefined,
  ): Rejection => {
    const headers: Record<string, string> = { "content-type": "application/json", "cache-control": "no-store" }
    corsHeaders(origin, headers)
    return { status: 400, headers, body: errorBody(scan) }
  }

  const tooLong = (contentLength: string): boolean =>
    /^\d+$/.test(contentLength) && Number(contentLength) > config.maxBodyBytes

  const tooLarge = (origin: string | null | undefined): Rejection => {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "cache-control": "no-store",
      connection: "close",
    }
    corsHeaders(origin, headers)
    const message = new PayloadTooLarge({ limit: config.maxBodyBytes }).message
    return {
      status: 413,
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message } }),
    }
  }

  const verifyCached = (token: string): Promise<Result.Result<VerifiedToken, VerificationError>> | VerifiedToken => {
    const key = tokenKey(token)
    const hit = cache.get(key)
    if (hit !== undefined) return hit
    const pending = inflight.get(key)
    if (pending !== undefined) return pending
    const promise = verify(token)
      .catch(
        (error: unknown): Result.Result<VerifiedToken, VerificationError> =>
          Result.fail(new VerifierUnavailable({ source: "verifier", detail: String(error) })),
      )
      .then((result) => {
        inflight.delete(key)
        if (Result.isFailure(result)) return result
        const token = result.success
        const now = Date.now()
        if (token.expiresAt !== undefined && token.expiresAt * 1000 + config.skewMs <= now) {
          return Result.fail(new InvalidToken({ reason: "expired", description: descriptions.expired }))
        }
        if (!token.audience.some((a) => a === config.resource || CanonicalUri.equals(a, config.resource))) {
          return Result.fail(
            new InvalidToken({ reason: "wrong-audience", description: descriptions["wrong-audience"] }),
          )
        }
        const until = Math.min(
          token.expiresAt === undefined ? Number.POSITIVE_INFINITY : token.expiresAt * 1000,
          token.reuseUntil ?? Number.POSITIVE_INFINITY,
          now + config.cacheTtlMs,
        )
        cache.set(key, token, until)
        return result
      })
    inflight.set(key, promise)
    return promise
  }

  const requiredFor = async (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
  ): Promise<ReadonlyArray<string> | Exclude<OperationScan, { _tag: "Operations" }>> => {
    let required = config.baseScopes
    if (extra !== undefined && extra.length > 0) required = Scope.union(required, extra)
    const operations = config.operations
    if (operations !== undefined && request.method === "POST") {
      let scan: OperationScan
      if (request.parsedBody !== undefined) {
        scan = scanParsed(request.parsedBody, operations)
      } else if (request.readBody !== undefined) {
        scan = scanOperations(await request.readBody(), operations)
      } else {
        scan = { _tag: "Operations", scopes: [] }
      }
      if (scan._tag !== "Operations") return scan
      if (scan.scopes.length > 0) required = Scope.union(required, scan.scopes)
    }
    return required
  }

  // For requests that are not (yet) authenticated the body is read only when it is small and declared so: the
  // challenge's scope is a hint, not worth buffering an anonymous caller's large body for.
  const challengeHint = async (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
  ): Promise<ReadonlyArray<string>> => {
    const base = extra === undefined || extra.length === 0 ? config.baseScopes : Scope.union(config.baseScopes, extra)
    if (config.operations === undefined || request.method !== "POST") return base
    if (request.parsedBody === undefined) {
      const length = Number(request.contentLength ?? Number.NaN)
      if (!(length >= 0 && length <= maxAnonymousBodyBytes)) return base
    }
    const required = await requiredFor(request, extra).catch((error: unknown) => {
      if (error instanceof PayloadTooLarge) return base
      throw error
    })
    return Array.isArray(required) ? (required as ReadonlyArray<string>) : base
  }

  // The check runs synchronously as long as nothing needs I/O (a cached token, no body to inspect): the common path
  // then costs no promise or microtask of its own.
  const check = (request: InboundRequest, extra?: ReadonlyArray<string>): Outcome | Promise<Outcome> => {
    const url = request.url
    const q = url.indexOf("?")
    if (q !== -1 && new URLSearchParams(url.slice(q + 1)).has("access_token")) {
      return { ok: false, rejection: reject(request.origin, "invalid_request", queryTokenDescription, undefined) }
    }
    // Fast path for a token verified before: its cache entry proves the syntax was checked then, so the full header
    // parse is skipped. Anything unusual (other spacing, several values, a form body) takes the full path below.
    const authorization = request.authorization
    if (
      typeof authorization === "string" &&
      authorization.length > 7 &&
      authorization.charCodeAt(6) === 32 &&
      (authorization.startsWith("Bearer") || authorization.slice(0, 6).toLowerCase() === "bearer") &&
      (request.method === "GET" || !isForm(request.contentType))
    ) {
      const accessToken = authorization.slice(7)
      const hit = cache.get(tokenKey(accessToken))
      if (hit !== undefined && (hit.expiresAt === undefined || hit.expiresAt * 1000 + config.skewMs > Date.now())) {
        return authorize(request, extra, hit, accessToken)
      }
    }
    const credentials: BearerCredentials = parseAuthorization(authorization)
    if (credentials._tag === "Malformed") {
      return { ok: false, rejection: reject(request.origin, "invalid_request", credentials.description, undefined) }
    }
    // A token in a form body is refused (RFC 6750 §2.2 is not supported), for bodies small enough to inspect; larger
    // ones are not buffered here, and a body token is never used in any case.
    if (
      isForm(request.contentType) &&
      request.readBody !== undefined &&
      Number(request.contentLength ?? Number.NaN) <= maxAnonymousBodyBytes
    ) {
      return request.readBody().then(
        (body) =>
          new URLSearchParams(body).has("access_token")
            ? { ok: false, rejection: reject(request.origin, "invalid_request", bodyTokenDescription, undefined) }
            : afterCredentials(request, extra, credentials),
        (error: unknown) => {
          if (error instanceof PayloadTooLarge) return { ok: false, rejection: tooLarge(request.origin) }
          throw error
        },
      )
    }
    return afterCredentials(request, extra, credentials)
  }

  const isForm = (contentType: string | null | undefined): boolean =>
    contentType?.toLowerCase().startsWith("application/x-www-form-urlencoded") === true

  const isSimple = (extra: ReadonlyArray<string> | undefined): boolean =>
    config.operations === undefined && (extra === undefined || extra.length === 0)

  const unauthorized = (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
    error: "invalid_token" | undefined,
    description: string | undefined,
  ): Outcome | Promise<Outcome> => {
    const answer = (needed: ReadonlyArray<string>): Outcome => ({
      ok: false,
      rejection: reject(
        request.origin,
        error,
        description,
        needed.length > 0 ? challengeScopes(needed, []) : config.scopesSupported,
      ),
    })
    return isSimple(extra) ? answer(config.baseScopes) : challengeHint(request, extra).then(answer)
  }

  const afterCredentials = (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
    credentials: BearerCredentials,
  ): Outcome | Promise<Outcome> => {
    // No credentials: a challenge without error code (RFC 6750 §3.1), naming the scopes the request needs.
    if (credentials._tag !== "Token") return unauthorized(request, extra, undefined, undefined)
    const accessToken = credentials.token
    const verified = verifyCached(accessToken)
    if (verified instanceof Promise) {
      return verified.then((result) => {
        if (Result.isSuccess(result)) return authorize(request, extra, result.success, accessToken)
        const error = result.failure
        const description = error instanceof InvalidToken ? error.description : unavailableDescription
        return unauthorized(request, extra, "invalid_token", description)
      })
    }
    if (verified.expiresAt !== undefined && verified.expiresAt * 1000 + config.skewMs <= Date.now()) {
      return unauthorized(request, extra, "invalid_token", descriptions.expired)
    }
    return authorize(request, extra, verified, accessToken)
  }

  // Authenticated: now the body may be read in full (the handler reads it anyway).
  const authorize = (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
    token: VerifiedToken,
    accessToken: string,
  ): Outcome | Promise<Outcome> => {
    const decide = (required: ReadonlyArray<string> | Exclude<OperationScan, { _tag: "Operations" }>): Outcome => {
      if (!Array.isArray(required)) {
        return {
          ok: false,
          rejection: badJsonRpc(required as Exclude<OperationScan, { _tag: "Operations" }>, request.origin),
        }
      }
      const needed = required as ReadonlyArray<string>
      if (needed.length > 0 && !Scope.containsAll(token.scopes, needed)) {
        return {
          ok: false,
          rejection: reject(
            request.origin,
            "insufficient_scope",
            insufficientDescription,
            challengeScopes(needed, token.scopes),
          ),
        }
      }
      return { ok: true, token, accessToken }
    }
    // An authenticated caller's body is about to be read (here or by the handler): a declared length over the limit
    // is refused before any of it is.
    if (request.method !== "GET" && request.contentLength != null && tooLong(request.contentLength)) {
      return { ok: false, rejection: tooLarge(request.origin) }
    }
    if (isSimple(extra)) return decide(config.baseScopes)
    return requiredFor(request, extra).then(decide, (error: unknown) => {
      if (error instanceof PayloadTooLarge) return { ok: false, rejection: tooLarge(request.origin) }
      throw error
    })
  }

  const toResponse = (rejection: Rejection): Response =>
    new Response(rejection.body === "" ? null : rejection.body, {
      status: rejection.status,
      headers: rejection.headers,
    })

  const fromRequest = (request: Request, url: string = request.url): InboundRequest =>
    new WebInbound(request, url, request.method, request.headers.get("authorization"), config.maxBodyBytes)

  const authenticate = async (request: Request, scopes?: ReadonlyArray<string>): Promise<AuthResult> => {
    const outcome = await check(fromRequest(request), scopes)
    return outcome.ok ? outcome : { ok: false, response: toResponse(outcome.rejection) }
  }

  const metadataHeaders = (): Record<string, string> => {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "cache-control": `public, max-age=${config.metadataMaxAge}`,
    }
    if (config.cors !== undefined) headers["access-control-allow-origin"] = "*"
    return headers
  }

  const handleMetadata = (request: Request, url: string = request.url): Response | undefined => {
    const start = url.indexOf("/", url.indexOf("//") + 2)
    const end = url.indexOf("?", start)
    const path = start === -1 ? "/" : url.slice(start, end === -1 ? undefined : end)
    if (!config.metadataPaths.has(path)) return undefined
    const method = request.method
    if (method === "GET" || method === "HEAD") {
      return new Response(method === "HEAD" ? null : config.metadataBody, { status: 200, headers: metadataHeaders() })
    }
    if (method === "OPTIONS") {
      const headers: Record<string, string> = { allow: "GET, HEAD, OPTIONS" }
      if (config.cors !== undefined) {
        headers["access-control-allow-origin"] = "*"
        headers["access-control-allow-methods"] = "GET, HEAD, OPTIONS"
        headers["access-control-allow-headers"] = request.headers.get("access-control-request-headers") ?? "*"
        headers["access-control-max-age"] = "86400"
      }
      return new Response(null, { status: 204, headers })
    }
    return new Response(null, { status: 405, headers: { allow: "GET, HEAD, OPTIONS" } })
  }

  const preflight = (request: Request): Response | undefined => {
    if (config.cors === undefined || request.method !== "OPTIONS") return undefined
    if (!request.headers.has("access-control-request-method")) return undefined
    const origin = request.headers.get("origin")
    const headers: Record<string, string> = {}
    corsHeaders(origin, headers)
    if (headers["access-control-allow-origin"] === undefined) return new Response(null, { status: 403 })
    headers["access-control-allow-methods"] = "GET, POST, DELETE, OPTIONS"
    headers["access-control-allow-headers"] =
      request.headers.get("access-control-request-headers") ?? CORS_ALLOW_HEADERS
    headers["access-control-max-age"] = "86400"
    return new Response(null, { status: 204, headers })
  }

  const withCors = (request: Request, response: Response): Response => {
    const origin = request.headers.get("origin")
    if (config.cors === undefined || origin === null || response.headers.has("access-control-allow-origin")) {
      return response
    }
    const extra: Record<string, string> = {}
    corsHeaders(origin, extra)
    const headers = new Headers(response.headers)
    for (const [name, value] of Object.entries(extra)) headers.set(name, value)
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers })
  }

  const protect = (handler: ProtectedHandler, scopes?: ReadonlyArray<string>) => {
    const finish = (request: Request, outcome: Outcome): Response | Promise<Response> => {
      if (!outcome.ok) return toResponse(outcome.rejection)
      // The handler reads the body itself: a declared length over the limit is refused now, and a chunked body that
      // grows past it fails its reader and is answered 413 whatever the handler made of that.
      let exceeded = false
      let limited: Request
      try {
        limited =
          request.body === null
            ? request
            : Body.limitRequest(request, config.maxBodyBytes, () => {
                exceeded = true
              })
      } catch (error) {
        if (error instanceof PayloadTooLarge) return toResponse(tooLarge(request.headers.get("origin")))
        throw error
      }
      const answered = handler(limited, outcome)
      const response =
        limited === request
          ? answered
          : Promise.resolve(answered).then(
              (r) => (exceeded ? toResponse(tooLarge(request.headers.get("origin"))) : r),
              (error: unknown) => {
                if (exceeded) return toResponse(tooLarge(request.headers.get("origin")))
                throw error
              },
            )
      if (config.cors === undefined) return response
      return response instanceof Promise ? response.then((r) => withCors(request, r)) : withCors(request, response)
    }
    return (request: Request): Promise<Response> => {
      const url = request.url
      const metadata = handleMetadata(request, url)
      if (metadata !== undefined) return Promise.resolve(metadata)
      const pre = preflight(request)
      if (pre !== undefined) return Promise.resolve(pre)
      try {
        const outcome = check(fromRequest(request, url), scopes)
        return Promise.resolve(
          outcome instanceof Promise ? outcome.then((o) => finish(request, o)) : finish(request, outcome),
        )
      } catch (error) {
        return Promise.reject(error)
      }
    }
  }

  return {
    resource: config.resource,
    metadata: config.metadata,
    resourceMetadataUrl: config.resourceMetadataUrl,
    metadataPaths: [...config.metadataPaths],
    maxBodyBytes: config.maxBodyBytes,
    handleMetadata,
    metadataHandler: async (request) => handleMetadata(request) ?? new Response(null, { status: 404 }),
    authenticate,
    check: async (request, scopes) => check(request, scopes),
    protect,
    insufficientScope: (token, required, description) =>
      reject(
        null,
        "insufficient_scope",
        description ?? insufficientDescription,
        challengeScopes(Scope.dedupe(required), token.scopes),
      ),
    corsHeaders: (origin) => {
      const headers: Record<string, string> = {}
      if (origin !== null && origin !== undefined) corsHeaders(origin, headers)
      return headers
    },
    preflight,
    toResponse,
    clearCache: () => cache.clear(),
    close: async () => {},
  }
}

// A Web request as the check sees it. A class, so the per-request object carries no closures; Content-Type, Origin
// and Content-Length are read only when a check needs them, and the body is read from a clone at most once.
class WebInbound implements InboundRequest {
  #body: Promise<string> | undefined
  constructor(
    readonly request: Request,
    readonly url: string,
    readonly method: string,
    readonly authorization: string | null,
    readonly limit: number,
  ) {}
  get contentType(): string | null {
    return this.request.headers.get("content-type")
  }
  get contentLength(): string | null {
    return this.request.headers.get("content-length")
  }
  get origin(): string | null {
    return this.request.headers.get("origin")
  }
  readBody(): Promise<string> {
    this.#body ??= this.request.body === null ? Promise.resolve("") : Body.readText(this.request.clone(), this.limit)
    return this.#body
  }
}

/**
 * Largest body (declared by Content-Length) read from a request without a valid token to name the scopes of its
 * operations in the 401 challenge; larger or undeclared bodies get the base scopes.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#protected-resource-metadata-discovery-requirements | MCP: scope in the 401 challenge}
 */
export const maxAnonymousBodyBytes = 64 * 1024

/**
 * `error_description` of a request whose access token is in the URI query.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-2.3 | RFC 6750 §2.3}
 */
export const queryTokenDescription = "Access tokens are accepted only in the Authorization header, not in the URI query"

/**
 * `error_description` of a request whose access token is in a form-encoded body.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-2.2 | RFC 6750 §2.2}
 */
export const bodyTokenDescription =
  "Access tokens are accepted only in the Authorization header, not in the request body"

/**
 * `error_description` of 403 `insufficient_scope` answers.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export const insufficientDescription = "The access token does not grant the scopes this request needs"
