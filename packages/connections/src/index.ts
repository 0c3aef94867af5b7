/**
 * Connected accounts for MCP servers: the user's own tokens at third-party providers, obtained through MCP URL-mode
 * elicitation and kept in an encrypted vault.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP URL-mode elicitation}
 * @module
 */

export * as KeyRing from "./KeyRing.js"
export * as Vault from "./Vault.js"
