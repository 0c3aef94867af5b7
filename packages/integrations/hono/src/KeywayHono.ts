/**
 * Hono middleware over the plain face of `@keyway/resource-server`. Hono hands out Web `Request`s, so the
 * middleware uses the Web face directly.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-2.1 | RFC 6750 §2.1}
 */
import type { ProtectedResource, ProtectedResourceService } from "@keyway/resource-server"
import type { MiddlewareHandler } from "hono"

/**
 * The context variables set by {@link requireAuth}: `c.get("keyway")` is the verified token.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export interface KeywayVariables {
  readonly keyway: ProtectedResource.Authenticated
}

/**
 * Serves the protected resource metadata at its well-known paths and the advertised URL; passes other requests on.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 */
export const metadata =
  (protectedResource: ProtectedResourceService): MiddlewareHandler =>
  async (c, next) => {
    const response = protectedResource.handleMetadata(c.req.raw)
    if (response !== undefined) return response
    await next()
  }

/**
 * Options of {@link requireAuth}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export interface RequireAuthOptions {
  /** Scopes this route needs in addition to the protected resource's own requirements. */
  readonly scopes?: ReadonlyArray<string>
}

/**
 * Authenticates the request; answers 400/401/403 with the specified challenge, or runs the next handler with the
 * verified token in `c.get("keyway")`. The JSON-RPC body is inspected on a clone, so handlers still read it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#access-token-usage | MCP: Access Token Usage}
 */
export const requireAuth =
  (
    protectedResource: ProtectedResourceService,
    options: RequireAuthOptions = {},
  ): MiddlewareHandler<{ Variables: KeywayVariables }> =>
  async (c, next) => {
    const pre = protectedResource.preflight(c.req.raw)
    if (pre !== undefined) return pre
    const result = await protectedResource.authenticate(c.req.raw, options.scopes)
    if (!result.ok) return result.response
    c.set("keyway", { token: result.token, accessToken: result.accessToken })
    await next()
    const cors = Object.entries(protectedResource.corsHeaders(c.req.header("origin")))
    if (cors.length === 0 || c.res.headers.has("access-control-allow-origin")) return
    // Responses passed through from fetch() have immutable headers: copy them into a new response.
    const headers = new Headers(c.res.headers)
    for (const [name, value] of cors) headers.set(name, value)
    c.res = new Response(c.res.body, { status: c.res.status, statusText: c.res.statusText, headers })
  }
