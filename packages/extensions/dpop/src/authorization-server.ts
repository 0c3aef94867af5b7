/**
 * The authorization server side of the MCP DPoP extension: proofs checked at the token endpoint, access tokens bound
 * to the proof's key (`cnf.jkt`), server nonces, `dpop_signing_alg_values_supported` in the metadata.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-5 | RFC 9449 §5}
 * @module
 */
export { type DPoPServerOptions, dpopAuthorizationServer, optionsSchema } from "./internal/server.js"
