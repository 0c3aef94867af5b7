/**
 * The protected MCP server: protected resource metadata, Bearer authentication of every request, 401/403
 * challenges and per-operation scopes. Both faces are one object, the {@link ProtectedResourceService}: the Effect
 * face is the {@link ProtectedResource} service, the plain face {@link createProtectedResource} builds that service
 * once and returns it. Both run the same authentication pipeline.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html | RFC 9728}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html | RFC 6750}
 */
import type { CanonicalUri, Wire } from "@keyway/core"
import { Scope } from "@keyway/core"
import { Clock, Context, Effect, Layer, ManagedRuntime, Result, Schema } from "effect"
import { insufficientDescription, makeRefusals, toResponse } from "./internal/challenge.js"
import { type Config, resolve } from "./internal/config.js"
import { makeCors } from "./internal/cors.js"
import { directOf } from "./internal/direct.js"
import { makeMetadataServer } from "./internal/metadata.js"
import { makePipeline, type Verify } from "./internal/pipeline.js"
import { makeWebFace } from "./internal/web.js"
import type { PresentationScheme } from "./Presentation.js"
import { type InvalidVerifierOptions, TokenVerifier, type VerifierDefinition } from "./TokenVerifier.js"
import type { VerifiedToken } from "./VerifiedToken.js"

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
 * Which delegated tokens a protected resource accepts: tokens obtained by token exchange for someone acting for the
 * user carry the actors in an `act` claim, nested for a chain (`{ sub: "b", act: { sub: "a" } }`: b acts now, a
 * before). Every actor of the chain must be one of `actors`, and the chain at most `maxChain` long.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.1 | RFC 8693 §4.1}
 */
export interface DelegationOptions {
  /** The actors (`act.sub`, a client ID for Keyway's authorization server) trusted to act for users; at least one. */
  readonly actors: ReadonlyArray<string>
  /** The longest chain of actors accepted: an integer from 1 (default) to core's `TokenExchange.MAX_CHAIN`. */
  readonly maxChain?: number
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
  /**
   * Ways to present a token besides `Authorization: Bearer`, registered by extensions (DPoP); each adds its
   * challenge to every 401 and its fields to the metadata (see `Presentation`).
   */
  readonly presentationSchemes?: ReadonlyArray<PresentationScheme>
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
  /**
   * Accept delegated tokens (with an `act` claim, RFC 8693 §4.1) from these actors. Without it a delegated token is
   * refused with 401 `invalid_token`; an accepted one has its chain in {@link VerifiedToken.actors}.
   */
  readonly delegation?: DelegationOptions
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
 * {@link ProtectedResourceService.authenticate}; framework integrations build it from their own request objects.
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
  /** Any other request header (a presentation scheme's, such as `DPoP`); `null` or undefined when absent. */
  readonly header?: (name: string) => string | null | undefined
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
  /**
   * The OAuth error code, absent when no credentials were presented (RFC 6750 §3.1); a presentation scheme may refuse
   * with a code of its own (DPoP's `invalid_dpop_proof`, `use_dpop_nonce`).
   */
  readonly error?: "invalid_request" | "invalid_token" | "insufficient_scope" | (string & {})
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
 * Result of {@link ProtectedResourceService.authenticate}: the verified token, or the ready 400/401/403 response.
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
 * The protected resource: what {@link createProtectedResource} returns and what the {@link ProtectedResource} service
 * provides, one object for both faces. Promise methods and Web-standard handlers for plain code,
 * {@link ProtectedResourceService.authenticateEffect} for Effect code.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html | RFC 9728}
 */
export interface ProtectedResourceService {
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
  /** The framework-neutral form of {@link ProtectedResourceService.authenticate}. */
  readonly check: (request: InboundRequest, scopes?: ReadonlyArray<string>) => Promise<Outcome>
  /**
   * {@link ProtectedResourceService.check} without the promise when none is needed: the outcome itself when the check
   * needs no I/O (a token verified before, no body to inspect), a promise of it otherwise. For integrations on a hot
   * path, which then spend no promise or microtask on a cached token.
   */
  readonly checkNow: (request: InboundRequest, scopes?: ReadonlyArray<string>) => Outcome | Promise<Outcome>
  /** Effect form of {@link ProtectedResourceService.check}: fails with {@link Unauthorized}. */
  readonly authenticateEffect: (
    request: InboundRequest,
    scopes?: ReadonlyArray<string>,
  ) => Effect.Effect<Authenticated, Unauthorized>
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
  /**
   * The 413 refusal (a JSON-RPC error, the connection closed after it) of a body larger than `maxBodyBytes`, for
   * integrations that read an authenticated caller's body themselves; `origin` for the CORS headers.
   */
  readonly payloadTooLarge: (origin: string | null | undefined) => Rejection
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
 * The protected resource, plain face.
 *
 * @deprecated Use {@link ProtectedResourceService}, the same object under the name of its concept.
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html | RFC 9728}
 */
export type Handle = ProtectedResourceService

/**
 * The protected resource as an Effect service. Build it with {@link ProtectedResource.layer} on top of a
 * {@link TokenVerifier} layer; it reads time from the `Clock` of the context it is built in.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html | RFC 9728}
 */
export class ProtectedResource extends Context.Service<ProtectedResource, ProtectedResourceService>()(
  "@keyway/resource-server/ProtectedResource",
) {
  /**
   * The service from its options (the `verifier` option is ignored: the {@link TokenVerifier} in context is used).
   * Fails with {@link InvalidConfiguration}.
   */
  static readonly layer = (
    options: Omit<ProtectedResourceOptions, "verifier">,
  ): Layer.Layer<ProtectedResource, InvalidConfiguration, TokenVerifier> =>
    Layer.effect(
      ProtectedResource,
      Effect.flatMap(
        Effect.suspend(() => Effect.fromResult(configure(options))),
        build,
      ),
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
    error: Schema.optionalKey(Schema.String),
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
 * runtime behind it is built once, here; requests run the same pipeline as the {@link ProtectedResource} service.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-server-location | MCP: Authorization Server Location}
 */
export const createProtectedResource = (options: ProtectedResourceOptions): ProtectedResourceService => {
  const config = Result.getOrThrow(configure(options))
  const layer = Layer.effect(ProtectedResource, build(config)).pipe(
    Layer.provide(options.verifier.layer(config.identity)),
  )
  const runtime = ManagedRuntime.make(layer)
  const service = runtime.runSync(Effect.service(ProtectedResource))
  return { ...service, close: () => runtime.dispose() }
}

const configure = (options: Omit<ProtectedResourceOptions, "verifier">): Result.Result<Config, InvalidConfiguration> =>
  Result.mapError(resolve(options), (problem) => new InvalidConfiguration(problem))

// The one place both faces get their service: the verifier in context runs with the context the service was built in,
// and the pipeline reads that context's Clock.
const build = (config: Config): Effect.Effect<ProtectedResourceService, never, TokenVerifier> =>
  Effect.gen(function* () {
    const verifier = yield* TokenVerifier
    const clock = yield* Clock.Clock
    const run = Effect.runPromiseWith(yield* Effect.context<never>())
    const now = () => clock.currentTimeMillisUnsafe()
    const viaEffect: Verify = (token) => run(Effect.result(verifier.verify(token)))
    // A verifier of this package runs directly, on the same clock, when it can (see internal/direct.ts).
    const direct = directOf(verifier.verify)
    const verify: Verify = direct === undefined ? viaEffect : (token) => direct(token, now()) ?? viaEffect(token)
    return make(config, verify, now)
  })

const make = (config: Config, verify: Verify, now: () => number): ProtectedResourceService => {
  const cors = makeCors(config.cors)
  const refusals = makeRefusals(config, cors)
  const pipeline = makePipeline(config, refusals, verify, now)
  const serveMetadata = makeMetadataServer(config)
  const web = makeWebFace(config, pipeline, refusals, cors, serveMetadata)
  const settle = (outcome: Outcome): Effect.Effect<Authenticated, Unauthorized> =>
    outcome.ok
      ? Effect.succeed({ token: outcome.token, accessToken: outcome.accessToken })
      : Effect.fail(new Unauthorized({ rejection: outcome.rejection }))
  return {
    resource: config.resource,
    metadata: config.metadata,
    resourceMetadataUrl: config.resourceMetadataUrl,
    metadataPaths: [...config.metadataPaths],
    maxBodyBytes: config.maxBodyBytes,
    handleMetadata: (request) => serveMetadata(request),
    metadataHandler: async (request) => serveMetadata(request) ?? new Response(null, { status: 404 }),
    authenticate: web.authenticate,
    // No async function: a promise returned from one is adopted through two more turns of the microtask queue.
    check: (request, scopes) => {
      try {
        return Promise.resolve(pipeline.check(request, scopes))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    checkNow: (request, scopes) => pipeline.check(request, scopes),
    // A settled outcome (a cached token) is answered without waiting for a promise.
    authenticateEffect: (request, scopes) =>
      Effect.suspend(() => {
        const outcome = pipeline.check(request, scopes)
        return outcome instanceof Promise
          ? Effect.flatMap(
              Effect.promise(() => outcome),
              settle,
            )
          : settle(outcome)
      }),
    protect: web.protect,
    insufficientScope: (token, required, description) =>
      refusals.reject(
        null,
        "insufficient_scope",
        description ?? insufficientDescription,
        refusals.challengeScopes(Scope.dedupe(required), token.scopes),
      ),
    payloadTooLarge: (origin) => refusals.tooLarge(origin),
    corsHeaders: (origin) => {
      const headers: Record<string, string> = {}
      if (origin !== null && origin !== undefined) cors.headers(origin, headers)
      return headers
    },
    preflight: cors.preflight,
    toResponse,
    clearCache: pipeline.clearCache,
    close: async () => {},
  }
}
