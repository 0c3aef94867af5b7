/**
 * The MCP DPoP extension (SEP-1932, RFC 9449): access tokens bound to a key the client holds, so a stolen token is
 * worthless without the key. The client side is `@keyway/ext-dpop/client`, the authorization server side
 * `@keyway/ext-dpop/authorization-server`, the resource server side `@keyway/ext-dpop/resource-server`.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html | RFC 9449}
 * @packageDocumentation
 */
import { Grant } from "@keyway/core"

/**
 * The extension identifier, as clients declare it in their capabilities.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 */
export const EXTENSION_ID: typeof Grant.extensions.dpop = Grant.extensions.dpop
