/**
 * Workload identity federation for MCP (extension `io.modelcontextprotocol/auth/wif`): an autonomous MCP client
 * presents the JWT its workload platform issued it, with the JWT bearer grant of RFC 7523, and receives an access
 * token for one MCP server, without a client ID, registration or credentials of its own. The client side
 * (`@keyway/ext-workload-identity/client`) plugs into `@keyway/client`, the authorization server side
 * (`@keyway/ext-workload-identity/authorization-server`) into `@keyway/authorization-server`; MCP servers need nothing
 * new.
 * Token files (Kubernetes, SPIFFE) are read by `assertionFile` of the `@keyway/ext-workload-identity/node` entry.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 * @packageDocumentation
 */

import { Grant } from "@keyway/core"

/**
 * The extension identifier, as clients declare it in their capabilities.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 */
export const EXTENSION_ID: typeof Grant.extensions.workloadIdentity = Grant.extensions.workloadIdentity
