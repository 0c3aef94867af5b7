/**
 * The resource server side of the MCP DPoP extension: the `DPoP` presentation scheme, its challenge and its protected
 * resource metadata fields.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7 | RFC 9449 §7}
 * @module
 */

export { type MemoryReplayCache, memoryReplayCache, type ReplayCache } from "./internal/replay.js"
export { type DPoPSchemeOptions, dpopScheme } from "./internal/resource.js"
