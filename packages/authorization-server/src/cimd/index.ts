/**
 * Client ID metadata documents: resolving URL client IDs, HTTP caching within bounds, and the trust policy.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html | draft-ietf-oauth-client-id-metadata-document-02}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 * @module
 */

/** Freshness of fetched documents per RFC 9111, clamped to the server's bounds. */
export * as CacheControl from "./CacheControl.js"
/** The resolver service: fetch through the SSRF guard, validate, cache. */
export * as ClientMetadataResolver from "./ClientMetadataResolver.js"
/** Which client ID hosts are accepted and which are verified. */
export * as TrustPolicy from "./TrustPolicy.js"
