/**
 * Connected accounts for MCP servers: the user's own tokens at third-party providers, obtained through MCP URL-mode
 * elicitation and kept in an encrypted vault.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP URL-mode elicitation}
 * @module
 */

export * as Connections from "./Connections.js"
export {
  type CompletionListener,
  ConnectionRequired,
  type ConnectionsClient,
  ConnectionsError,
  type ConnectionsOptions,
  createConnections,
  type ProviderFetch,
  type RunningConnections,
  toClient,
  type User,
} from "./Connections.js"
export * as KeyRing from "./KeyRing.js"
export * as Provider from "./Provider.js"
export { InvalidConnectionsConfig, type ProviderConfig } from "./Provider.js"
export * as Vault from "./Vault.js"
