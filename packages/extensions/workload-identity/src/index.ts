/**
 * Workload identity federation for MCP (extension `io.modelcontextprotocol/auth/wif`): an autonomous MCP client
 * presents the JWT its workload platform issued it, with the JWT bearer grant of RFC 7523, and receives an access
 * token for one MCP server, without a client ID, registration or credentials of its own. The client side plugs into
 * `@keyway/client`, the authorization server side into `@keyway/authorization-server`; MCP servers need nothing new.
 * Token files (Kubernetes, SPIFFE) are read by `assertionFile` of the `@keyway/ext-workload-identity/node` entry.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 * @packageDocumentation
 */

/** The client's extension: the JWT bearer grant with the workload's JWT. */
export * as WorkloadIdentityClient from "./Client.js"
export { type AssertionContext, type AssertionSource, workloadIdentity } from "./Client.js"
/** The authorization server's extension: trusted issuers, claim rules, RFC 7523 §3 checks. */
export * as WorkloadIdentityServer from "./Server.js"
export { workloadIdentityGrant } from "./Server.js"
