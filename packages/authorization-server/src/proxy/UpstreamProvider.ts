/**
 * Proxy mode's upstream identity provider: the authorization server fronts a third-party ("upstream") authorization
 * server with one static client ID, so users sign in with an identity provider they already have. Keyway stays the
 * authorization server of the MCP servers: it asks the user's consent for each MCP client itself, before any
 * redirect upstream (the confused-deputy defence), signs the user in upstream with standard OAuth 2.1 / OpenID
 * Connect, keeps only the user's subject, and issues its own codes and tokens, bound to the MCP resource. The
 * upstream's tokens never reach the MCP client and are not stored.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#confused-deputy-problem | MCP 2025-11-25 Security Best Practices: Confused Deputy Problem}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 * @module
 */
import type { z } from "zod"
import type { upstreamSchema } from "../Config.js"

/**
 * The upstream token response, as the identity function sees it.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-3.2.3 | OAuth 2.1 §3.2.3}
 */
export interface UpstreamTokenResponse {
  readonly access_token: string
  readonly token_type: string
  readonly id_token?: string
  readonly scope?: string
  readonly expires_in?: number
  readonly [member: string]: unknown
}

/**
 * Who signed in upstream: `subject` becomes the `sub` of Keyway's tokens.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2 (sub)}
 */
export interface UpstreamIdentity {
  readonly subject: string
  /** Seconds since the epoch; the time of the callback when absent. */
  readonly authTime?: number
}

/**
 * Establishes the user's identity from the upstream token response, for upstreams whose tokens Keyway cannot verify
 * itself (opaque access tokens without an ID token: call the userinfo endpoint here). Return `undefined` to refuse.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#UserInfo | OpenID Connect Core 1.0 §5.3}
 */
export type UpstreamIdentityFunction = (tokens: UpstreamTokenResponse) => Promise<UpstreamIdentity | undefined>

/**
 * Where the user's subject comes from:
 * - `id_token`: the OpenID Connect ID token (signature via the upstream `jwks_uri`; `iss`, `aud` = `clientId`,
 *   `nonce`, `exp` checked); needs `openid` in `scope`;
 * - `access_token`: the upstream access token as a JWT (RFC 9068) verified with the upstream `jwks_uri`, with `iss` =
 *   the upstream issuer and `aud` = `resource`; needs `resource`;
 * - a function, for anything else.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#IDTokenValidation | OpenID Connect Core 1.0 §3.1.3.7}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-4 | RFC 9068 §4}
 */
export type SubjectSource = "id_token" | "access_token" | UpstreamIdentityFunction

/**
 * The upstream authorization server and Keyway's one static client there. Keyway's redirect URI at the upstream is
 * `<issuer>/upstream/callback`: register exactly that. Declared by its schema, `Config.upstreamSchema`.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#confused-deputy-problem | MCP 2025-11-25 Security Best Practices: Confused Deputy Problem}
 * @interface
 */
export type UpstreamOptions = Readonly<z.input<typeof upstreamSchema>>

/**
 * {@link UpstreamOptions} after validation and defaults.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export interface ResolvedUpstream {
  readonly issuer: string
  readonly issuerUrl: URL
  readonly clientId: string
  readonly clientSecret: string | undefined
  readonly scope: string | undefined
  readonly resource: string | undefined
  readonly subjectFrom: SubjectSource
  readonly name: string
  readonly timeoutMs: number
  readonly consentSeconds: number
}
