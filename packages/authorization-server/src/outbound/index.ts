/**
 * The SSRF guard for outbound fetches of client-named documents: address classification, the resolver service and
 * the guarded fetch.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6}
 * @module
 */

/** Special-purpose address ranges and their classification (RFC 6890). */
export * as Address from "./Address.js"
/** The guarded fetch: https only, pinned vetted addresses, re-checked redirects, size and time caps. */
export * as OutboundFetch from "./OutboundFetch.js"
/** Host-name resolution as a service (system resolver, or a fixed table in tests). */
export * as Resolver from "./Resolver.js"
