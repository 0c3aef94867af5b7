/**
 * The former name of {@link UpstreamApi}, kept for existing imports.
 *
 * @deprecated Use the `UpstreamApi` module: the authorization server's `Upstream` is its proxy's upstream identity
 * provider, a different thing.
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 */
import { createUpstreamApiClient, type UpstreamApiClient, type UpstreamApiClientOptions } from "./UpstreamApi.js"

export { TokenPassthroughRefused, UpstreamTokenError } from "./UpstreamApi.js"

/**
 * @deprecated Use {@link UpstreamApiClientOptions}.
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4 | RFC 6749 §4.4}
 */
export type UpstreamClientOptions = UpstreamApiClientOptions

/**
 * @deprecated Use {@link UpstreamApiClient}.
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#access-token-privilege-restriction | MCP: Access Token Privilege Restriction}
 */
export type UpstreamClient = UpstreamApiClient

/**
 * @deprecated Use {@link createUpstreamApiClient}.
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4 | RFC 6749 §4.4}
 */
export const createUpstreamClient: (options: UpstreamApiClientOptions) => UpstreamApiClient = createUpstreamApiClient
