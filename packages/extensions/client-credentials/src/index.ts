/**
 * The MCP OAuth client credentials extension (SEP-1046): machine-to-machine access tokens obtained with
 * pre-registered client credentials, without a user. The client side is `@keyway/ext-client-credentials/client`, the
 * authorization server side `@keyway/ext-client-credentials/authorization-server`; MCP servers need nothing new.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 * @packageDocumentation
 */
import { Grant } from "@keyway/core"

/**
 * The extension identifier, as clients declare it in their capabilities.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 */
export const EXTENSION_ID: typeof Grant.extensions.clientCredentials = Grant.extensions.clientCredentials
