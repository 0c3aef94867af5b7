import { CanonicalUri, Revision } from "@keyway/core"

/**
 * The 2025-03-26 authorization base URL of an MCP server: core's {@link Revision.legacyEndpoints}, for a URL that
 * must be a canonical server URI (anything else throws, as the client never records one).
 */
export const authorizationBaseUrl = (serverUrl: string): string =>
  Revision.legacyEndpoints(CanonicalUri.parse(serverUrl)).baseUrl
