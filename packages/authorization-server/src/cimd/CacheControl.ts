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
 * Parses a `Cache-Control` value into lower-cased directive names and their (unquoted) values; the first occurrence
 * of a directive wins.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-5.2 | RFC 9111 §5.2}
 */
export const parseCacheControl = (value: string | null): ReadonlyMap<string, string | undefined> => {
  const directives = new Map<string, string | undefined>()
  if (value === null) return directives
  const pattern = /\s*([^\s=,]+)\s*(?:=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*)))?\s*(?:,|$)/gy
  for (const match of value.matchAll(pattern)) {
    const name = (match[1] ?? "").toLowerCase()
    if (directives.has(name)) continue
    const quoted = match[2]?.replace(/\\(.)/g, "$1")
    directives.set(name, quoted ?? match[3])
  }
  return directives
}

const deltaSeconds = (value: string | undefined): number | undefined =>
  value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined

/**
 * The response's remaining freshness in seconds, or `undefined` when it states none.
 * `no-store` and `no-cache` give 0; `max-age` takes precedence over `Expires`; an invalid `Expires` means already
 * expired (0); `Age` is subtracted.
 *
 * @param now seconds since the epoch, used when the response has no valid `Date`.
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2.1 | RFC 9111 §4.2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2.3 | RFC 9111 §4.2.3 (age)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-5.3 | RFC 9111 §5.3 (Expires)}
 */
export const freshness = (headers: Headers, now: number): number | undefined => {
  const directives = parseCacheControl(headers.get("cache-control"))
  if (directives.has("no-store") || directives.has("no-cache")) return 0
  const age = deltaSeconds(headers.get("age")?.trim()) ?? 0
  if (directives.has("max-age")) {
    const maxAge = deltaSeconds(directives.get("max-age"))
    return maxAge === undefined ? 0 : Math.max(0, maxAge - age)
  }
  const expires = headers.get("expires")
  if (expires !== null) {
    const at = Date.parse(expires)
    if (Number.isNaN(at)) return 0
    const dateHeader = headers.get("date")
    const date = dateHeader === null || Number.isNaN(Date.parse(dateHeader)) ? now * 1000 : Date.parse(dateHeader)
    return Math.max(0, Math.floor((at - date) / 1000) - age)
  }
  return undefined
}

/**
 * How long to reuse the document: its {@link freshness} clamped to `bounds`; the lower bound when the response
 * states no freshness.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.2 | draft-ietf-oauth-client-id-metadata-document-02 §5.2}
 */
export const lifetime = (headers: Headers, now: number, bounds: Bounds = defaultBounds): number => {
  const seconds = freshness(headers, now) ?? bounds.minSeconds
  return Math.min(bounds.maxSeconds, Math.max(bounds.minSeconds, seconds))
}
