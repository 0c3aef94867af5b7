/**
 * The protected MCP server side of MCP authorization: protected resource metadata (RFC 9728), Bearer token
 * authentication (RFC 6750) with audience binding (RFC 8707), 401/403 challenges, per-operation scopes, and a
 * client for upstream calls that never forwards the inbound token.
 *
 * This entry uses Web-standard APIs only (`fetch`, `Request`/`Response`, `URL`, Web Crypto): it runs on Node.js, Deno,
 * Bun, Cloudflare Workers (no `nodejs_compat` needed) and other Web-standard runtimes. The node:http server is in
 * `@keyway/resource-server/node`.
 *
 * @packageDocumentation
 */

/** Presentation schemes besides Bearer (DPoP), registered by extensions. */
export * as Presentation from "./Presentation.js"
/** The protected resource: the Effect service and the plain face. */
export * as ProtectedResource from "./ProtectedResource.js"
export { createProtectedResource, type ProtectedResourceService } from "./ProtectedResource.js"
/** Token verification: the service and its JWT, introspection and custom implementations. */
export * as TokenVerifier from "./TokenVerifier.js"
export { custom, introspection, jwt } from "./TokenVerifier.js"
/**
 * Upstream calls with the server's own token (no token passthrough).
 *
 * @deprecated Use {@link UpstreamApi}.
 */
export * as Upstream from "./Upstream.js"
/** Calls to upstream APIs with the server's own token (client credentials), never the inbound one. */
export * as UpstreamApi from "./UpstreamApi.js"
/** The verified token and the verification errors. */
export * as VerifiedToken from "./VerifiedToken.js"
