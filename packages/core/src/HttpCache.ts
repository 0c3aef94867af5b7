/**
 * HTTP caching as a private cache that does not revalidate: the `Cache-Control` directives and how long a response
 * stays fresh.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html | RFC 9111}
 * @module
 */

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

/** A delta-seconds value (RFC 9111 §1.2.2), or undefined when it is not one. */
const deltaSeconds = (value: string | undefined): number | undefined =>
  value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined

/**
 * A response's remaining freshness in seconds (freshness lifetime less current age), or `undefined` when it states
 * none (the caller picks a heuristic or default).
 *
 * - `no-store` and `no-cache` give 0: a cache that never revalidates may not reuse such a response.
 * - The freshness lifetime is `max-age` (an invalid value means stale, 0), else `Expires` less `Date` (an invalid
 *   `Expires` means already expired, 0; without a valid `Date` the caller's `now` stands in). `s-maxage` is for
 *   shared caches and `private` does not concern a private cache, so both are ignored.
 * - The current age is the `Age` value. The apparent age (`now` less `Date`) is left out, so a skewed origin clock
 *   cannot shorten or erase the freshness.
 *
 * @param now - seconds since the epoch: when the response was received.
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2.1 | RFC 9111 §4.2.1 (freshness lifetime)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2.3 | RFC 9111 §4.2.3 (age)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-5.3 | RFC 9111 §5.3 (Expires)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-5.2.2.4 | RFC 9111 §5.2.2.4 (no-cache)}
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
