/**
 * The client side of the MCP DPoP extension: a key per authorization server and a fresh proof on every token request
 * and every MCP request, tokens presented with the `DPoP` scheme, server nonces answered with one retry.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-4 | RFC 9449 §4}
 * @module
 */
export { type DPoPClientOptions, type DPoPKey, type DPoPKeyStore, dpop } from "./internal/client.js"
