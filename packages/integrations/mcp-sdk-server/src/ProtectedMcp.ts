/**
 * Puts `@keyway/resource-server` in front of an MCP SDK v2 HTTP handler (`createMcpHandler`, or a
 * `WebStandardStreamableHTTPServerTransport`) and hands the verified token to the SDK as its `AuthInfo`.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP: Authorization}
 */
import type { ProtectedResource, ProtectedResourceService, VerifiedToken } from "@keyway/resource-server"
import type { AuthInfo } from "@modelcontextprotocol/server"

/**
 * What the integration can serve: the `{ fetch }` object of `createMcpHandler`, or a function such as
 * `(request, { authInfo }) => transport.handleRequest(request, { authInfo })`.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http | MCP: Streamable HTTP}
 */
export type McpRequestHandler =
  | { readonly fetch: (request: Request, options?: { authInfo?: AuthInfo }) => Promise<Response> }
  | ((request: Request, options: { readonly authInfo: AuthInfo }) => Promise<Response>)

/**
 * Options of {@link protectMcp}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export interface ProtectMcpOptions {
  /** Scopes every request needs in addition to the protected resource's requirements. */
  readonly scopes?: ReadonlyArray<string>
}

/**
 * The SDK's `AuthInfo` for a verified token. Subject, issuer, claims, the actors of a delegated token and the
 * authentication itself (for {@link authenticatedOf}) go into `extra`; `clientId` is empty when the token names no
 * client.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 */
export const toAuthInfo = (auth: ProtectedResource.Authenticated, resource: string): AuthInfo => {
  const token = auth.token
  const info: AuthInfo = {
    token: auth.accessToken,
    clientId: token.clientId ?? "",
    scopes: [...token.scopes],
    resource: new URL(resource),
    extra: {
      ...(token.subject === undefined ? {} : { subject: token.subject }),
      ...(token.issuer === undefined ? {} : { issuer: token.issuer }),
      claims: token.claims,
      ...(token.actors === undefined ? {} : { actors: token.actors }),
      authenticated: auth,
    },
  }
  if (token.expiresAt !== undefined) info.expiresAt = token.expiresAt
  return info
}

/**
 * A Web handler for the MCP endpoint and the protected resource metadata: metadata and CORS preflights are served,
 * every other request is authenticated (with the per-method and per-tool scopes of the protected resource) and passed to the SDK
 * with its `AuthInfo`.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#access-token-usage | MCP: Access Token Usage}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 */
export const protectMcp = (
  protectedResource: ProtectedResourceService,
  handler: McpRequestHandler,
  options: ProtectMcpOptions = {},
): ((request: Request) => Promise<Response>) => {
  const serve =
    typeof handler === "function"
      ? handler
      : (request: Request, init: { readonly authInfo: AuthInfo }) => handler.fetch(request, { authInfo: init.authInfo })
  return protectedResource.protect(
    (request, auth) => serve(request, { authInfo: toAuthInfo(auth, protectedResource.resource) }),
    options.scopes,
  )
}

/**
 * Who is calling, as a tool handler sees it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 */
export interface Caller {
  readonly subject?: string
  readonly clientId: string
  readonly scopes: ReadonlyArray<string>
  readonly issuer?: string
  readonly expiresAt?: number
  readonly claims: Readonly<Record<string, unknown>>
  /**
   * Who acts for the subject when the token is delegated (RFC 8693 `act`, current actor first), as the protected
   * resource's `delegation` option accepted it; absent otherwise.
   */
  readonly actors?: NonNullable<VerifiedToken.VerifiedToken["actors"]>
}

/**
 * The caller of an MCP request from a handler's context (`ctx`) or from an `AuthInfo`; undefined when the request
 * was not authenticated by Keyway.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 */
export const callerOf = (
  source: { readonly http?: { readonly authInfo?: AuthInfo } } | AuthInfo | undefined,
): Caller | undefined => {
  const info = source === undefined ? undefined : "token" in source ? source : source.http?.authInfo
  if (info === undefined) return undefined
  const extra = (info.extra ?? {}) as { subject?: unknown; issuer?: unknown; claims?: unknown; actors?: unknown }
  const caller: { -readonly [K in keyof Caller]: Caller[K] } = {
    clientId: info.clientId,
    scopes: info.scopes,
    claims: typeof extra.claims === "object" && extra.claims !== null ? (extra.claims as Record<string, unknown>) : {},
  }
  if (typeof extra.subject === "string") caller.subject = extra.subject
  if (typeof extra.issuer === "string") caller.issuer = extra.issuer
  if (info.expiresAt !== undefined) caller.expiresAt = info.expiresAt
  if (Array.isArray(extra.actors)) caller.actors = extra.actors as NonNullable<VerifiedToken.VerifiedToken["actors"]>
  return caller
}

/**
 * The resource server's authentication of an MCP request (the verified token and the access token as presented) from
 * a handler's context (`ctx`) or from an `AuthInfo` made by {@link toAuthInfo}; undefined when the request was not
 * authenticated by Keyway. What a tool hands to code that acts for the caller, such as an on-behalf-of token
 * exchange (`@keyway/ext-token-exchange/resource-server`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-1.1 | RFC 8693 §1.1 (delegation)}
 */
export const authenticatedOf = (
  source: { readonly http?: { readonly authInfo?: AuthInfo } } | AuthInfo | undefined,
): ProtectedResource.Authenticated | undefined => {
  const info = source === undefined ? undefined : "token" in source ? source : source.http?.authInfo
  const auth = (info?.extra as { authenticated?: unknown } | undefined)?.authenticated
  if (typeof auth !== "object" || auth === null) return undefined
  const { token, accessToken } = auth as Partial<ProtectedResource.Authenticated>
  // Only the authentication this AuthInfo was made for: the SDK's token and Keyway's must be the same.
  return accessToken === info?.token && typeof token === "object" && token !== null
    ? (auth as ProtectedResource.Authenticated)
    : undefined
}

/**
 * Whether the caller's token grants every one of `scopes`, for checks a tool makes at run time.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const hasScopes = (
  source: { readonly http?: { readonly authInfo?: AuthInfo } } | AuthInfo | undefined,
  ...scopes: ReadonlyArray<string>
): boolean => {
  const caller = callerOf(source)
  return caller !== undefined && scopes.every((scope) => caller.scopes.includes(scope))
}
