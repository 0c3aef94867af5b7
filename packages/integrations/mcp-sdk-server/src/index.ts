/**
 * Keyway's resource server for the official MCP SDK v2 server (`@modelcontextprotocol/server`): the MCP endpoint is
 * authenticated before the SDK sees a request, and tool handlers find the caller and its scopes in
 * `ctx.http.authInfo`.
 *
 * @packageDocumentation
 */

/** The integration. */
export * as ProtectedMcp from "./ProtectedMcp.js"

export { authenticatedOf, type Caller, callerOf, hasScopes, protectMcp, toAuthInfo } from "./ProtectedMcp.js"
