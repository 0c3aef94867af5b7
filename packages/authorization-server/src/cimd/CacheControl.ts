/**
 * How long a fetched client ID metadata document may be reused: its HTTP freshness lifetime (`Cache-Control`
 * `max-age`, `no-store`, `no-cache`, or `Expires` against `Date`, less `Age`), clamped between the server's bounds.
 *
 * The authorization server keeps the document for its own use only, so `private` does not forbid caching and
 * `s-maxage` (for shared caches) is ignored. It does not revalidate, so `no-cache` counts like `no-store`: fresh for
 * zero seconds, which the lower bound then raises.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2.1 | RFC 9111 §4.2.1 (freshness lifetime)}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.2 | draft-ietf-oauth-client-id-metadata-document-02 §5.2 (metadata caching)}
 * @module
 */
import { HttpCache } from "@keyway/core"

/**
 * Lower and upper bounds on how long a document is reused, in seconds.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.2 | draft-ietf-oauth-client-id-metadata-document-02 §5.2}
 */
export interface Bounds {
  readonly minSeconds: number
  readonly maxSeconds: number
}

/**
 * Default bounds: at least 5 minutes (a client cannot make the server fetch on every request), at most 24 hours
 * (changes to the document are seen within a day).
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.2 | draft-ietf-oauth-client-id-metadata-document-02 §5.2}
 */
export const defaultBounds: Bounds = { minSeconds: 300, maxSeconds: 86_400 }

/**
 * How long to reuse the document: its freshness (core's `HttpCache.freshness`) clamped to `bounds`; the lower bound when the response
 * states no freshness.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.2 | draft-ietf-oauth-client-id-metadata-document-02 §5.2}
 */
export const lifetime = (headers: Headers, now: number, bounds: Bounds = defaultBounds): number => {
  const seconds = HttpCache.freshness(headers, now) ?? bounds.minSeconds
  return Math.min(bounds.maxSeconds, Math.max(bounds.minSeconds, seconds))
}
