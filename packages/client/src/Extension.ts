/**
 * The seams extensions plug into on the client side. How tokens are obtained for a server is a strategy: the
 * authorization code grant with PKCE by default; an extension supplies another (client credentials, the JWT bearer
 * grant, token exchange). Whatever the strategy, the client keeps doing discovery, `resource`, the issuer binding,
 * token storage, re-acquisition before expiry, and the 401 and 403 handling. Extensions depend on this module, never
 * the other way round.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 * @module
 */
import type { Challenge, Wire } from "@keyway/core"
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AuthError, Step } from "./AuthError.js"
import type { ClientInformation, FetchLike, PrivateKeyJwt } from "./ClientConfig.js"
import type { DiscoveredAuthorizationServer } from "./Discovery.js"
import type { TokenStore } from "./TokenStore.js"

/**
 * How a token request authenticates the client, when it does.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-2.4 | OAuth 2.1 §2.4}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 */
export interface TokenRequestOptions {
  /** The client to authenticate as, by its `token_endpoint_auth_method`; no client authentication when absent. */
  readonly client?: ClientInformation
  /** The key for `private_key_jwt`, instead of the client's configured `privateKeyJwt`. */
  readonly privateKey?: PrivateKeyJwt
  /**
   * The `aud` of a `private_key_jwt` assertion: `issuer` (the default; RFC 7523 §3 and the MCP extensions name the
   * authorization server's issuer) or `token_endpoint` for servers that want the endpoint's URL.
   */
  readonly assertionAudience?: "issuer" | "token_endpoint"
  /** The step errors are reported under; `token` by default. */
  readonly step?: Step
  /**
   * The protected resource metadata of the MCP server the token is for, handed to the extensions that decorate the
   * request (DPoP picks its algorithm from both metadata documents). The strategy's request carries it already.
   */
  readonly resourceMetadata?: Wire.ProtectedResourceMetadata
}

/**
 * What a strategy is given once discovery is done: the server, the resource, the selected scope, and the client's
 * own token request (https only, client authentication, typed OAuth errors, strict response validation).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-flow-steps | MCP authorization flow}
 */
export interface AcquireContext {
  /** The MCP server URL, canonical (the key tokens are stored under). */
  readonly serverUrl: string
  /** The resource identifier exactly as the protected resource metadata gives it: the `resource` to send. */
  readonly resource: string
  readonly resourceMetadata: Wire.ProtectedResourceMetadata | undefined
  /** The authorization server, its metadata validated against its issuer. */
  readonly server: DiscoveredAuthorizationServer
  /** The scope selected by the MCP rules (challenge, then `scopes_supported`), or undefined to send none. */
  readonly scope: string | undefined
  /** The Bearer challenge that started this acquisition, if any. */
  readonly challenge: Challenge.BearerParams | undefined
  /**
   * The client's configured `fetch`, for a strategy's requests to other parties (an identity provider's token
   * endpoint); redirects are the strategy's to refuse.
   */
  readonly fetch: FetchLike
  /**
   * The client to use with this server, for strategies that declare {@link TokenStrategy.grantTypes}: configured,
   * stored from an earlier registration for those grant types, the client ID metadata document, or registered now
   * (RFC 7591, declaring those grant types and no redirect URI), in the MCP order; a failure when there is none.
   */
  readonly client: Effect.Effect<ClientInformation, AuthError>
  /**
   * POSTs a form to another endpoint of the authorization server (https, or http on loopback only), authenticated as
   * `options.client` by its `token_endpoint_auth_method` as token requests are, and returns the status and the JSON
   * body (a body that is not JSON fails with `invalid-json`).
   */
  readonly formRequest: (
    url: string,
    body: URLSearchParams,
    options: { readonly client: ClientInformation; readonly step: Step },
  ) => Effect.Effect<{ readonly status: number; readonly body: unknown }, AuthError>
  /** POSTs a form to the token endpoint and returns the validated token response. */
  readonly tokenRequest: (
    body: URLSearchParams,
    options?: TokenRequestOptions,
  ) => Effect.Effect<Wire.TokenResponse, AuthError>
}

/**
 * What a strategy obtained.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-3.2.3 | OAuth 2.1 §3.2.3}
 */
export interface Acquired {
  readonly response: Wire.TokenResponse
  /** The client the tokens were issued to; absent when there was none (workload identity federation). */
  readonly clientId?: string
  /** The scope that was requested, taken as granted when the response names none (RFC 6749 §5.1). */
  readonly requestedScope?: string
}

/**
 * How tokens are obtained for a server.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 */
export interface TokenStrategy {
  /**
   * True when tokens can be obtained again without a person (client credentials, workload identity): the client then
   * obtains a new access token before the current one expires, as it would refresh one.
   */
  readonly unattended: boolean
  /**
   * Whether a 403 `insufficient_scope` is answered by obtaining a token for the union of the held and the challenged
   * scopes (within the step-up limit); when false it is the typed failure `step-up`/`insufficient-scope`.
   */
  readonly stepUp: boolean
  /**
   * The grant types the strategy uses with a client of the client's own (`context.client`), declared when that client
   * registers (RFC 7591 §2 `grant_types`) and in client ID metadata documents; `refresh_token` among them lets the
   * scope ask for `offline_access` as the authorization code flow does. Absent for strategies that bring their own
   * client or none.
   */
  readonly grantTypes?: ReadonlyArray<string>
  readonly acquire: (context: AcquireContext) => Effect.Effect<Acquired, AuthError>
}

/**
 * A request the client is about to send with an access token or to the token endpoint, which an extension may
 * decorate (DPoP adds its proof, and presents the token with its own scheme).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-4 | RFC 9449 §4}
 */
export interface OutgoingRequest {
  /** `token`: a token endpoint request; `resource`: a request to an MCP server. */
  readonly kind: "token" | "resource"
  readonly method: string
  readonly url: string
  /** The request's headers, to change in place. */
  readonly headers: Headers
  /** The access token the request carries (`resource` requests with a token). */
  readonly accessToken?: string
  /**
   * The authorization server: the one the token endpoint belongs to (`token` requests), or the issuer of the access
   * token (`resource` requests); a key per authorization server hangs off it (RFC 9449 §4).
   */
  readonly issuer?: string
  /** The `token_type` the access token was issued with (`resource` requests with a token): `Bearer`, `DPoP`, ... */
  readonly tokenType?: string
  /** The authorization server's validated metadata (`token` requests). */
  readonly metadata?: Wire.AuthorizationServerMetadata
  /** The protected resource metadata of the MCP server the token is for, when known (`token` requests). */
  readonly resourceMetadata?: Wire.ProtectedResourceMetadata
}

/**
 * A JSON value, as extension settings are declared in the MCP client capabilities.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8259.html#section-3 | RFC 8259 §3}
 */
export type Json = string | number | boolean | null | Json[] | { [member: string]: Json }

/**
 * One extension of the client.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 */
export interface ClientExtension {
  /** The extension identifier, for example `io.modelcontextprotocol/oauth-client-credentials`. */
  readonly id: string
  /** Replaces the authorization code flow (at most one extension may give a strategy). */
  readonly strategy?: TokenStrategy
  /**
   * Decorates every token-endpoint request and every request carrying an access token, just before it is sent. It may
   * keep what it needs across restarts in the client's {@link TokenStore} (DPoP keeps its keys there).
   */
  readonly decorate?: (request: OutgoingRequest) => Effect.Effect<void, AuthError, TokenStore>
  /**
   * Sees the response to every request it decorated; true asks for the request to be sent once more, decorated again
   * (DPoP answers a `use_dpop_nonce` challenge with a proof carrying the new nonce, RFC 9449 §8 and §9). A request is
   * sent again at most once.
   */
  readonly response?: (response: Response, request: OutgoingRequest) => Effect.Effect<boolean, AuthError>
  /**
   * Judges the `token_type` of a token response to a request it decorated: true accepts it (DPoP accepts `DPoP`),
   * false leaves it to the client, which accepts `Bearer` only; a failure refuses the response (DPoP, having asked for
   * a bound token, refuses `Bearer` unless configured otherwise).
   */
  readonly tokenType?: (tokenType: string, request: OutgoingRequest) => Effect.Effect<boolean, AuthError>
  /**
   * The authorization schemes it presents tokens with besides Bearer (`DPoP`): a 401 or 403 challenging with one of
   * them is answered as a Bearer challenge would be (RFC 9449 §7.1).
   */
  readonly schemes?: ReadonlyArray<string>
  /**
   * Parameters added to every authorization request to this server (DPoP's `dpop_jkt`, RFC 9449 §10); they never
   * replace the client's own.
   */
  readonly authorizationParameters?: (
    server: DiscoveredAuthorizationServer,
    resourceMetadata: Wire.ProtectedResourceMetadata | undefined,
  ) => Effect.Effect<Readonly<Record<string, string>>, AuthError, TokenStore>
  /**
   * Client metadata added to dynamic registration requests (DPoP's `dpop_bound_access_tokens`, RFC 9449 §5.2); it
   * never replaces the client's own fields.
   */
  readonly clientMetadata?: { readonly [member: string]: Json }
  /** The settings declared for it in the MCP client capabilities (`capabilities.extensions[id]`); `{}` by default. */
  readonly settings?: { [member: string]: Json }
  /**
   * Whether it is an MCP extension, declared to MCP servers in the client capabilities: true by default. False for a
   * mechanism of the client alone that MCP servers have no say in (the device authorization grant, RFC 8628): its `id`
   * then only names it in messages.
   */
  readonly declared?: boolean
}

/**
 * The extensions of the Effect face, added to the `extensions` option of the client's configuration.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 */
export class Extensions extends Context.Service<Extensions, ReadonlyArray<ClientExtension>>()(
  "@keyway/client/Extensions",
) {
  /** A layer with these extensions. */
  static readonly layer = (extensions: ReadonlyArray<ClientExtension>): Layer.Layer<Extensions> =>
    Layer.succeed(Extensions, extensions)
}

/**
 * The MCP client capabilities that declare these extensions (`{ extensions: { [id]: settings } }`), to merge into
 * the capabilities an MCP client sends: in `initialize`, or on the 2026-07-28 wire with every request. Extensions
 * with `declared: false` are not MCP extensions and are left out.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/lifecycle | MCP 2026-07-28 capabilities}
 */
export const capabilities = (
  extensions: ReadonlyArray<ClientExtension>,
): { extensions: { [id: string]: { [member: string]: Json } } } => ({
  extensions: Object.fromEntries(extensions.filter((e) => e.declared !== false).map((e) => [e.id, e.settings ?? {}])),
})
