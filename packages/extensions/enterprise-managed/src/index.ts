/**
 * The MCP enterprise-managed authorization extension (SEP-990): an enterprise signs its employees in to an MCP client
 * once, with its identity provider, and the identity provider decides which MCP servers the client may reach. The
 * client exchanges the user's ID token at the identity provider for an identity assertion (ID-JAG, RFC 8693) and
 * presents it at the MCP server's authorization server with the JWT bearer grant (RFC 7523). The client side is
 * `@keyway/ext-enterprise-managed/client`; the authorization server side (both the MCP authorization server that
 * accepts assertions and the identity provider that issues them) `@keyway/ext-enterprise-managed/authorization-server`.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 * @packageDocumentation
 */
import { Grant } from "@keyway/core"

/**
 * The extension identifier, as clients declare it in their capabilities.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 */
export const EXTENSION_ID: typeof Grant.extensions.enterpriseManaged = Grant.extensions.enterpriseManaged
