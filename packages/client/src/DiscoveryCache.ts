/**
 * A cache of discovery documents (protected resource metadata, authorization server metadata) that honours their
 * freshness (`Cache-Control`, `Expires`, `Date` and `Age` by core's rule; `no-store`/`no-cache` skip caching), a
 * configured default when a response states none.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2 | RFC 9111 §4.2 (freshness)}
 * @module
 */
import { HttpCache } from "@keyway/core"
import { Context, Effect, Layer } from "effect"

/**
 * A cached document with the moment it stops being fresh.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2 | RFC 9111 §4.2}
 */
export interface Entry {
  readonly value: unknown
  /** Milliseconds since the epoch. */
  readonly freshUntil: number
}

/**
 * The discovery cache as an Effect service.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2 | RFC 9111 §4.2}
 */
export class DiscoveryCache extends Context.Service<
  DiscoveryCache,
  {
    /** The fresh entry for a URL, if any. */
    readonly get: (url: string) => Effect.Effect<unknown>
    readonly set: (url: string, value: unknown, freshForSeconds: number) => Effect.Effect<void>
    readonly invalidate: (url: string) => Effect.Effect<void>
  }
>()("@keyway/client/DiscoveryCache") {
  /** An in-memory cache. */
  static readonly layerMemory: Layer.Layer<DiscoveryCache> = Layer.sync(DiscoveryCache, () => memory())
}

/** An in-memory discovery cache; `now` is injectable for tests of freshness. */
export const memory = (now: () => number = Date.now): DiscoveryCache["Service"] => {
  const entries = new Map<string, Entry>()
  return DiscoveryCache.of({
    get: (url) =>
      Effect.sync(() => {
        const entry = entries.get(url)
        if (entry === undefined) return undefined
        if (entry.freshUntil <= now()) {
          entries.delete(url)
          return undefined
        }
        return entry.value
      }),
    set: (url, value, freshForSeconds) =>
      Effect.sync(() => {
        if (freshForSeconds > 0) entries.set(url, { value, freshUntil: now() + freshForSeconds * 1000 })
      }),
    invalidate: (url) =>
      Effect.sync(() => {
        entries.delete(url)
      }),
  })
}

/**
 * How long a response may be reused: its remaining freshness by core's {@link HttpCache.freshness} (`no-store` and
 * `no-cache` give 0; `max-age`, else `Expires` less `Date`; less `Age`), the default when it states none.
 *
 * @param now - seconds since the epoch; the clock by default.
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2.1 | RFC 9111 §4.2.1}
 */
export const freshness = (headers: Headers, defaultSeconds: number, now: number = Date.now() / 1000): number =>
  HttpCache.freshness(headers, now) ?? defaultSeconds
