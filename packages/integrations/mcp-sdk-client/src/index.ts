/**
 * Keyway's MCP authorization client for the official MCP SDK v2 client (`@modelcontextprotocol/client`): hand the
 * transport Keyway's `fetch`, or an `authProvider` backed by Keyway.
 *
 * @packageDocumentation
 */
import type { AuthClient } from "@keyway/client"
import {
  type AuthProvider,
  type FetchLike,
  StreamableHTTPClientTransport,
  type StreamableHTTPClientTransportOptions,
} from "@modelcontextprotocol/client"

/**
 * The part of Keyway's plain client this package needs (what `createAuthClient` returns).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export type KeywayClient = Pick<AuthClient.PlainAuthClient, "fetch" | "accessToken" | "unauthorized">

/**
 * Keyway's drop-in fetch in the SDK's `FetchLike` shape. Given to a transport as `fetch`, it adds the Bearer token
 * to every request and handles 401 (discovery, registration, authorization, refresh) and 403 `insufficient_scope`
 * (step-up within the retry limit) before the SDK sees the response.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#access-token-usage | MCP access token usage}
 */
export const keywayFetch =
  (client: KeywayClient): FetchLike =>
  (url, init) =>
    client.fetch(url, init)

/**
 * An SDK `AuthProvider` backed by Keyway, for callers that want the transport to manage the `Authorization` header:
 * `token()` returns the held token (refreshed shortly before expiry), and `onUnauthorized()` refreshes it or runs
 * Keyway's authorization flow with the 401's challenge before the transport retries.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-flow-steps | MCP authorization flow}
 */
export const keywayAuthProvider = (client: KeywayClient, serverUrl: string | URL): AuthProvider => {
  const server = String(serverUrl)
  return {
    token: () => client.accessToken(server),
    onUnauthorized: async ({ response }) => {
      await client.unauthorized(server, response)
    },
  }
}

/**
 * Options for {@link createTransport}: the SDK transport's own options, minus `fetch` and `authProvider`, which
 * Keyway supplies.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http | MCP Streamable HTTP}
 */
export type TransportOptions = Omit<StreamableHTTPClientTransportOptions, "fetch" | "authProvider"> & {
  /** "fetch" (default) hands the transport Keyway's fetch; "authProvider" hands it {@link keywayAuthProvider}. */
  readonly mode?: "fetch" | "authProvider"
}

/**
 * A Streamable HTTP client transport for an MCP server, authorized by Keyway.
 *
 * @example
 * ```ts
 * const auth = createAuthClient({ clientName: "my-agent" })
 * const client = new Client({ name: "my-agent", version: "1.0.0" })
 * await client.connect(createTransport("https://mcp.example.com/mcp", auth))
 * ```
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http | MCP Streamable HTTP}
 */
export const createTransport = (
  serverUrl: string | URL,
  client: KeywayClient,
  options: TransportOptions = {},
): StreamableHTTPClientTransport => {
  const { mode, ...rest } = options
  return new StreamableHTTPClientTransport(
    new URL(serverUrl),
    mode === "authProvider"
      ? { ...rest, authProvider: keywayAuthProvider(client, serverUrl) }
      : { ...rest, fetch: keywayFetch(client) },
  )
}

export {
  UrlElicitationFailed,
  type UrlElicitationHandle,
  type UrlElicitationOptions,
  urlElicitation,
} from "./urlElicitation.js"
