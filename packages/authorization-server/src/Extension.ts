/**
 * The seams extensions plug into: grant types and client-authentication methods are registered handlers, a
 * token-request hook may bind every token a request issues (DPoP's `cnf`), endpoints and pages are routed under the
 * issuer, and short-lived state lives in the server's record store. The token endpoint dispatches to them; the
 * metadata document lists what they add. Extensions depend on this module, never the other way round.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-8.3 | RFC 6749 §8.3 (defining new grant types)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 * @module
 */
import type { OAuthError } from "@keyway/core"
import { Context, type Effect, Layer, type Result, Schema } from "effect"
import type { z } from "zod"
import type { ResolvedConfig, Resource } from "./Config.js"
import type { Html } from "./internal/html.js"
import type { SecurityEvent } from "./Operations.js"
import type { Decision, RateLimited, WindowRule } from "./RateLimiter.js"
import type { StorageError } from "./storage/Errors.js"
import type { Client, RecordStore } from "./storage/Storage.js"

export type { Html } from "./internal/html.js"

/**
 * The services an extension's handlers may require: none. What a handler may do with the server's state is an
 * operation of its context ({@link GrantContext}, the token-request hook's, {@link ClientAuthenticationContext}).
 *
 * @deprecated Handlers require no service; this is `never`.
 */
export type HandlerServices = never

/**
 * What a grant issues: an access token for one resource (RFC 8707), with its subject, client and scope.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 */
export interface Issue {
  /** The `sub` claim: the user, the client (client credentials) or the workload. */
  readonly subject: string
  /** The `client_id` claim (RFC 9068 §2.2): the client, or the name a federated workload is known by. */
  readonly clientId: string
  /** The canonical URI of a configured resource (the `aud` claim). */
  readonly resource: string
  /** The granted scope, space-separated (may be empty). */
  readonly scope: string
  /**
   * Further claims of the access token, for example the `act` of a token exchange (RFC 8693 §4.1). The claims the
   * server sets itself (`iss`, `sub`, `aud`, `client_id`, `scope`, `jti`, `iat`, `exp`, `auth_time`) and those the
   * request's token-request hooks bind (`cnf`) cannot be replaced.
   */
  readonly claims?: Readonly<Record<string, unknown>>
  /**
   * The latest expiry (seconds since the epoch) the token may have: its `exp` is the earlier of this and now plus
   * the access-token lifetime, and the response's `expires_in` follows (a token exchanged from another never outlives
   * it).
   */
  readonly expiresAt?: number
  /**
   * The grant the token is recorded under before it is answered, so that revoking the grant (or a refresh-token reuse
   * that revokes it) revokes this token too; a grant revoked meanwhile is answered `invalid_grant`.
   */
  readonly grantId?: string
  /**
   * The `issued_token_type` of the response (RFC 8693 §2.2.1), for a grant that issues in answer to a token exchange.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.2.1 | RFC 8693 §2.2.1}
   */
  readonly issuedTokenType?: string
  /**
   * The resource of the token this one was obtained from (a token exchange's subject token `aud`), reported in the
   * `token_issued` security event as `source_resource`.
   */
  readonly source?: string
}

/**
 * One of this server's access tokens, verified: signed by a published key with header `typ` `at+jwt`, this issuer,
 * not expired, not revoked, and, when it was issued under a grant, that grant still live.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 */
export interface OwnAccessToken {
  /** Every claim of the token, `act`, `may_act` and `cnf` included. */
  readonly claims: Readonly<Record<string, unknown>>
  /** `sub`. */
  readonly subject: string
  /** `client_id`. */
  readonly clientId: string
  /** `aud`: the canonical URI of the resource it is for. */
  readonly resource: string
  /** `scope`, space-separated. */
  readonly scope: string
  readonly jti: string
  /** `exp`, in seconds since the epoch. */
  readonly expiresAt: number
  /**
   * The live grant the token was issued under, with the grant's whole scope and the resource the user authorized
   * (which is not the token's own for a token exchanged from another); undefined for a token issued under no grant
   * (client credentials).
   */
  readonly grant: { readonly id: string; readonly scope: string; readonly resource: string } | undefined
}

/**
 * Everything a grant handler gets: the request, its form, the authenticated client (when there is one), and the
 * server's own operations, so a handler never signs, stores or answers by itself.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-3.2 | OAuth 2.1 §3.2}
 */
export interface GrantContext {
  readonly config: ResolvedConfig
  readonly request: Request
  /** The form parameters (none repeated). */
  readonly form: ReadonlyMap<string, string>
  /** The authenticated client; `undefined` only for a grant whose `clientAuthentication` is `optional`. */
  readonly client: Client | undefined
  /** Seconds since the epoch, from Effect's `Clock`. */
  readonly now: number
  /**
   * What the request's token-request hooks bound the tokens it issues to ({@link TokenBinding}): {@link GrantContext.issue}
   * applies it; a grant that redeems something bound (a code, a refresh token) compares its `confirmation`.
   */
  readonly binding: TokenBinding
  /**
   * The configured resource a `resource` parameter names (RFC 8707 §2); fails `invalid_target` for a malformed or
   * unknown one, `invalid_request` when the parameter is missing and the server has no default resource.
   */
  readonly resource: (value: string | undefined) => Effect.Effect<Resource, OAuthError.OAuthError>
  /**
   * Signs an access token and answers the token response (`Cache-Control: no-store`, no refresh token), with what
   * the request's token hooks add (for example DPoP's `cnf` and `token_type`).
   */
  readonly issue: (issue: Issue) => Effect.Effect<Response, OAuthError.OAuthError | StorageError>
  /**
   * Records a JWT ID as used until `expiresAt` (seconds); false when it was already recorded in `namespace`. For the
   * single use of assertions (RFC 7523 §3 item 7), shared by every instance on one store.
   */
  readonly rememberJti: (namespace: string, jti: string, expiresAt: number) => Effect.Effect<boolean, StorageError>
  /**
   * Signs a JWT with the server's current signing key and this header `typ`, for grants that issue other tokens than
   * access tokens (an identity provider's identity assertions). The claims are the caller's, `iss` included.
   */
  readonly sign: (
    claims: Readonly<Record<string, unknown>>,
    typ: string,
  ) => Effect.Effect<string, OAuthError.OAuthError | StorageError>
  /**
   * Verifies a JWT this server signed and a client presents back (an ID token as a token exchange's subject token):
   * signature by a published key, `iss` = this issuer, header `typ` when given, not expired at `now`. Its claims, or
   * undefined for anything else.
   */
  readonly verifyOwn: (
    token: string,
    options?: { readonly typ?: string },
  ) => Effect.Effect<Readonly<Record<string, unknown>> | undefined, StorageError>
  /**
   * Verifies one of this server's access tokens a client presents back (a token exchange's subject or actor token):
   * see {@link OwnAccessToken}. Undefined for anything else, alike for an expired, revoked, foreign or malformed
   * token.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
   */
  readonly verifyAccessToken: (token: string) => Effect.Effect<OwnAccessToken | undefined, StorageError>
  /**
   * Counts this request under the server's limit per identity an assertion proved (`rateLimits.workload`, keyed on
   * the assertion's `issuer` and `subject`), and fails with `RateLimited` (answered 429 with `Retry-After`) past it.
   * Call it once the assertion's signature is verified and its `jti` found unused (see {@link GrantContext.rememberJti}), so that
   * nobody spends another identity's allowance with a forged or replayed assertion. The server itself counts the
   * requests of public clients and of grants without a client per client address, before the handler runs.
   */
  readonly limitIdentity: (issuer: string, subject: string) => Effect.Effect<void, RateLimited | StorageError>
  /** The extensions' records in the server's store (see {@link RecordStore}), shared by every instance on it. */
  readonly records: RecordStore["Service"]
  /**
   * Issues for an authorization a user gave the authenticated client outside the authorization endpoint (the device
   * flow's approval, RFC 8628 §3.5) exactly as the code flow does: the consent remembered, the one live grant of the
   * user, client and resource opened or widened, an access token for the resource (bound as the request's hooks
   * ask), a refresh token when the client may refresh (rotated at every use for a public client), an ID token for
   * `openid`; the grant visible and revocable on the account page and by the administration. Answers the token
   * response, reported as `token_issued` under the request's grant type.
   *
   * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.3 | OAuth 2.1 §4.1.3}
   */
  readonly issueAuthorized: (
    authorization: UserAuthorization,
  ) => Effect.Effect<Response, OAuthError.OAuthError | StorageError>
}

/**
 * What a user authorized a client to do, for {@link GrantContext.issueAuthorized}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export interface UserAuthorization {
  /** The user (`sub`). */
  readonly subject: string
  /** When the user authenticated (`auth_time`, seconds since the epoch). */
  readonly authTime: number
  /** The canonical URI of a configured resource. */
  readonly resource: string
  /** The scope granted, space-separated (may be empty). */
  readonly scope: string
}

/**
 * A browser session of the server's pages, as an extension's page sees it.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.4 | OAuth 2.1 §7.4}
 */
export interface PageSession {
  /** An opaque value that identifies the session (for a limit per session); never the cookie itself. */
  readonly key: string
  /** The signed-in user, absent before the login. */
  readonly subject?: string
  readonly displayName?: string
  /** When the user signed in, in seconds since the epoch. */
  readonly authTime?: number
}

/**
 * The server's page machinery for an extension's page: the layout, styles and security headers of every page
 * (`Content-Security-Policy` with `frame-ancestors 'none'`, `X-Frame-Options: DENY`, `Cache-Control: no-store`), the
 * session cookie, CSRF tokens, and the login with its limits (`rateLimits.login`).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.5 | OAuth 2.1 §7.5 (clickjacking)}
 */
export interface Pages {
  /** Tagged template escaping every value that is not already {@link Html}. */
  readonly html: (strings: TemplateStringsArray, ...values: ReadonlyArray<unknown>) => Html
  /** A page in the server's layout. */
  readonly render: (
    title: string,
    body: Html,
    options?: { readonly status?: number; readonly headers?: Readonly<Record<string, string>> },
  ) => Response
  /** The error page: `error` and its description. */
  readonly error: (
    status: number,
    error: string,
    description: string,
    headers?: Readonly<Record<string, string>>,
  ) => Response
  /** The request's session, if its cookie is genuine and current. */
  readonly session: Effect.Effect<PageSession | undefined>
  /**
   * The CSRF token for the forms of this page, and the headers to answer with: a new session's cookie when the request
   * had none.
   */
  readonly csrf: Effect.Effect<{ readonly token: string; readonly headers: Readonly<Record<string, string>> }>
  /** Whether a POSTed form comes from this server's page: same origin and the session's CSRF token. */
  readonly verify: (form: ReadonlyMap<string, string> | undefined) => Effect.Effect<boolean>
  /** The answer to a form that failed {@link Pages.verify} (403). */
  readonly refused: () => Response
  /** A wait in the reader's terms, rounded up ("42 seconds", "2 minutes", "3 hours"), as the server's own pages say it. */
  readonly waitText: (seconds: number) => string
  /**
   * The login form, posting `username`, `password`, `csrf_token` and `request` (carrying `carry` unchanged) to
   * `action`; it sets a session cookie when the request had none.
   */
  readonly login: (args: {
    readonly action: string
    readonly carry: string
    readonly clientName: string
  }) => Effect.Effect<Response>
  /**
   * Signs the user in from a verified login form (see {@link Pages.login}) within `rateLimits.login`: a 303 to
   * `returnTo` with the new session's cookie, or the login form again with the error (401, or 429 with `Retry-After`
   * when locked). Reported as `login_succeeded` or `login_failed`.
   */
  readonly signIn: (args: {
    readonly form: ReadonlyMap<string, string>
    readonly action: string
    readonly clientName: string
    readonly returnTo: string
    readonly about?: { readonly client_id?: string; readonly resource?: string; readonly scope?: string }
  }) => Effect.Effect<Response, StorageError>
}

/**
 * Everything an extension endpoint's handler gets: the request and its form, and the server's own checks, so that an
 * endpoint never authenticates, validates, limits or stores by itself.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export interface EndpointContext {
  readonly config: ResolvedConfig
  readonly request: Request
  /**
   * The form of a POST (`application/x-www-form-urlencoded`, at most `maxBodyBytes`, no parameter repeated). An API
   * endpoint's POST never reaches its handler without one; a page gets `undefined` for a body that is not such a form.
   */
  readonly form: ReadonlyMap<string, string> | undefined
  /** Seconds since the epoch, from Effect's `Clock`. */
  readonly now: number
  /** The client address the abuse limits count by; undefined when unknown. */
  readonly address: string | undefined
  /**
   * Authenticates the client as the token endpoint does (public clients by `client_id`, client secrets,
   * `private_key_jwt`, client ID metadata documents; one method), within the token endpoint's limits
   * (`rateLimits.token` per client, per address for a public client; `rateLimits.clientAuthentication`).
   */
  readonly authenticateClient: Effect.Effect<Client, ClientAuthFailure | RateLimited | StorageError>
  /**
   * The configured resource the request's `resource` parameter names, checked as at the authorization endpoint
   * (RFC 8707 §2: `invalid_target`); the default resource when it is absent.
   */
  readonly resource: (values: ReadonlyArray<string>) => Effect.Effect<Resource, OAuthError.OAuthError>
  /**
   * The scopes `scope` (as sent; `undefined` when absent) asks of `resource` for `client`, checked as at the
   * authorization endpoint (`invalid_scope`); all the client may have when absent.
   */
  readonly scopes: (
    client: Client,
    resource: Resource,
    scope: string | undefined,
  ) => Effect.Effect<ReadonlyArray<string>, OAuthError.OAuthError>
  /** Reports a security event to the server's `onSecurityEvent`. */
  readonly emit: (event: SecurityEvent) => Effect.Effect<void>
  /** The extensions' records (see {@link RecordStore}). */
  readonly records: RecordStore["Service"]
  /**
   * Counts the request in the server's limiter (shared through the database), in the bucket of `kind` and `key` of
   * each limit, or with `peek` only judges it; refused when any refuses. Kinds should begin with the extension's id.
   */
  readonly limit: (
    counts: ReadonlyArray<{
      readonly kind: string
      readonly key: string
      readonly rule: WindowRule
      readonly peek?: boolean
    }>,
  ) => Effect.Effect<Decision, StorageError>
  /** The page machinery (see {@link Pages}). */
  readonly pages: Pages
}

/**
 * An endpoint an extension adds under the issuer. `api`: a back-channel endpoint for clients (CORS, `OPTIONS`
 * preflight, form bodies as at the token endpoint, failures answered as OAuth error responses: RFC 6749 §5.2, 401
 * with a Basic challenge for `invalid_client`, 413, 429 with `Retry-After`). `page`: a browser page (failures answered
 * as the error page). Another method is answered 405 with `Allow`; `HEAD` is answered as `GET`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.5.6 | RFC 9110 §15.5.6 (405)}
 */
export interface ExtensionEndpoint {
  /** The path below the issuer's, beginning with `/` (`/device_authorization`); never a built-in endpoint's. */
  readonly path: string
  readonly kind: "api" | "page"
  readonly methods: ReadonlyArray<"GET" | "POST">
  readonly handle: (
    context: EndpointContext,
  ) => Effect.Effect<Response, OAuthError.OAuthError | ClientAuthFailure | RateLimited | StorageError>
}

/**
 * A grant type the token endpoint dispatches to by `grant_type`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.5 | RFC 6749 §4.5 (extension grants)}
 */
export interface GrantHandler {
  /** The `grant_type` value, listed in `grant_types_supported`. */
  readonly grantType: string
  /**
   * `required`: the client authenticates as for any grant and must have this grant type among its `grant_types`
   * (`unauthorized_client` otherwise). `optional`: a request without client authentication reaches the handler with
   * no client (workload identity federation); one with client authentication is still checked.
   */
  readonly clientAuthentication: "required" | "optional"
  /**
   * Whether a client may ask for this grant type when it registers itself (RFC 7591 §2 `grant_types`, dynamic
   * registration); false by default, since most extension grants are for clients an operator registers and vouches
   * for (client credentials, assertions). The device authorization grant allows it: a command-line client without a
   * browser registers as any public client does.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
   */
  readonly dynamicRegistration?: boolean
  /**
   * Several handlers may share a grant type (the JWT bearer grant carries workload assertions and identity
   * assertions): the first whose `accepts` is true for the form takes the request; one without `accepts` takes any.
   */
  readonly accepts?: (form: ReadonlyMap<string, string>) => boolean
  /**
   * Checks the request and issues, through {@link GrantContext.issue}, or fails with the OAuth error to answer (or the
   * refusal of {@link GrantContext.limitIdentity}).
   */
  readonly handle: (
    context: GrantContext,
  ) => Effect.Effect<Response, OAuthError.OAuthError | RateLimited | StorageError>
}

/**
 * What a client-authentication method finds in a request.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-2.4 | OAuth 2.1 §2.4}
 */
export interface ClientAuthenticationContext {
  readonly config: ResolvedConfig
  readonly request: Request
  readonly form: ReadonlyMap<string, string>
  readonly now: number
  /** The audiences an assertion may name: the issuer and the endpoint's URL. */
  readonly audiences: ReadonlyArray<string>
  /** The client with this ID (stored, or resolved from its metadata document); fails `invalid_client` when unknown. */
  readonly lookup: (clientId: string) => Effect.Effect<Client, ClientAuthFailure | StorageError>
}

/**
 * Why client authentication failed: `invalid_client` (answered 401 with a Basic challenge) or `invalid_request`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export class ClientAuthFailure extends Schema.TaggedError<ClientAuthFailure>()("ClientAuthFailure", {
  code: Schema.Literals(["invalid_client", "invalid_request"]),
  description: Schema.String,
  /** Set when the client's document or key set may not be fetched yet (the per-host limit): answered 429. */
  retryAfter: Schema.optionalKey(Schema.Number),
}) {}

/**
 * A client-authentication method (a `token_endpoint_auth_method` value). The built-in ones are `none`,
 * `client_secret_basic`, `client_secret_post` and `private_key_jwt`; an extension may register another.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2 (token_endpoint_auth_method)}
 */
export interface ClientAuthenticationMethod {
  /** The `token_endpoint_auth_method` value, listed in `token_endpoint_auth_methods_supported`. */
  readonly name: string
  /** Whether the request carries this method's credentials (exactly one method may be present). */
  readonly present: (request: Request, form: ReadonlyMap<string, string>) => boolean
  /** Authenticates; the client must be registered with this method. */
  readonly authenticate: (
    context: ClientAuthenticationContext,
  ) => Effect.Effect<Client, ClientAuthFailure | StorageError>
}

/**
 * What a token-request hook binds to every access token the request issues, whatever the grant.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-6 | RFC 9449 §6 (cnf confirmation)}
 */
export interface TokenBinding {
  /** Claims added to the access token (for example `cnf`). */
  readonly claims?: Readonly<Record<string, unknown>>
  /** The `token_type` of the response; `Bearer` by default. */
  readonly tokenType?: string
  /** Headers added to the token response (for example a fresh `DPoP-Nonce`). */
  readonly headers?: Readonly<Record<string, string>>
  /**
   * What this request proves possession of (DPoP: the proof key's JWK thumbprint). A code whose authorization request
   * was bound (see {@link AuthorizationServerExtension.authorizationRequest}) is redeemed only by a request proving the
   * same, and so is a refresh token of a bound family; the server answers `invalid_grant` otherwise.
   */
  readonly confirmation?: string
  /**
   * Binds the refresh tokens a code redemption issues to {@link confirmation}: every later refresh of the family must
   * prove it (RFC 9449 §5: the refresh tokens of public clients).
   */
  readonly bindRefreshTokens?: boolean
}

/**
 * Runs on every token request after client authentication and before the grant; fails with the OAuth error to
 * answer, or binds what the request issues.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-5 | RFC 9449 §5}
 */
export type TokenRequestHook = (context: {
  readonly config: ResolvedConfig
  readonly request: Request
  readonly form: ReadonlyMap<string, string>
  readonly client: Client | undefined
  readonly now: number
  /**
   * Records a JWT ID as used until `expiresAt` (seconds); false when it was already recorded in `namespace`. For the
   * single use of a proof or assertion the request carries (RFC 7519 §4.1.7), shared by every instance on one store.
   */
  readonly rememberJti: (namespace: string, jti: string, expiresAt: number) => Effect.Effect<boolean, StorageError>
}) => Effect.Effect<TokenBinding | undefined, OAuthError.OAuthError | StorageError>

/**
 * One extension of the authorization server: its identifier, what it registers, and the metadata fields it adds.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 */
export interface AuthorizationServerExtension {
  /** The extension identifier, for example `io.modelcontextprotocol/oauth-client-credentials`. */
  readonly id: string
  readonly grants?: ReadonlyArray<GrantHandler>
  /** Endpoints the server routes to (see {@link ExtensionEndpoint}). */
  readonly endpoints?: ReadonlyArray<ExtensionEndpoint>
  readonly clientAuthenticationMethods?: ReadonlyArray<ClientAuthenticationMethod>
  readonly tokenRequest?: TokenRequestHook
  /**
   * Client metadata fields (RFC 7591 §2) this extension gives meaning to, each with the schema of its value. Dynamic
   * registration and client ID metadata documents keep exactly the fields some extension declares (an invalid value
   * is refused, naming the field), registration echoes them back, and the client record carries them in
   * `extension_metadata`. Only one extension may declare a field, and never one the server defines itself.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
   */
  readonly clientMetadata?: Readonly<Record<string, z.ZodType>>
  /**
   * The confirmation members (RFC 7800 §3.1, in an access token's `cnf` claim) this extension binds tokens with, and
   * the token type each means: introspection answers that `token_type` for a token confirmed by the member, `Bearer`
   * for a token no extension's member confirms. Only one extension may declare a member.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2.2 | RFC 7662 §2.2 (token_type)}
   */
  readonly confirmations?: Readonly<Record<string, string>>
  /**
   * Reads its parameters of an authorization request: the confirmation its code must be redeemed with (DPoP's
   * `dpop_jkt`, RFC 9449 §10), undefined for none, or a failure describing the malformed parameter (answered
   * `invalid_request` at the client's redirect URI).
   */
  readonly authorizationRequest?: (params: URLSearchParams) => Result.Result<string | undefined, string>
  /**
   * Fields added to the metadata document (RFC 8414 §2). Arrays are merged with the server's own values (union, in
   * order); other values are set when the server has none.
   */
  readonly metadata?: (config: ResolvedConfig) => Readonly<Record<string, unknown>>
  /**
   * Checks the configuration at start-up (for example that a client allowed the grant can authenticate); returns a
   * message for a `ConfigError`, or undefined.
   */
  readonly validate?: (config: ResolvedConfig) => string | undefined
}

/**
 * The extensions of the Effect face, added to the `extensions` option of the server's layer.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 */
export class Extensions extends Context.Service<Extensions, ReadonlyArray<AuthorizationServerExtension>>()(
  "@keyway/authorization-server/Extensions",
) {
  /** A layer with these extensions. */
  static readonly layer = (extensions: ReadonlyArray<AuthorizationServerExtension>): Layer.Layer<Extensions> =>
    Layer.succeed(Extensions, extensions)
}

/**
 * Merges an extension's metadata fields into the document: arrays are united in order, other fields are set only when
 * absent (an extension never replaces what the server says about itself).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export const mergeMetadata = (
  document: Record<string, unknown>,
  fields: Readonly<Record<string, unknown>>,
): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...document }
  for (const [name, value] of Object.entries(fields)) {
    const current = out[name]
    if (Array.isArray(current) && Array.isArray(value)) out[name] = [...new Set([...current, ...value])]
    else if (current === undefined) out[name] = value
  }
  return out
}
