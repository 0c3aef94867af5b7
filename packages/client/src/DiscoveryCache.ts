/**
 * A cache of discovery documents (protected resource metadata, authorization server metadata) that honours their
 * freshness (`Cache-Control`, `Expires`, `Date` and `Age` by core's rule; `no-store`/`no-cache` skip caching), a
 * configured default when a response states none.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2 | RFC 9111 §4.2 (freshness)}
 * @module
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

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
  /** An in-memory cache; entries age by Effect's `Clock`. */
  static readonly layerMemory: Layer.Layer<DiscoveryCache> = Layer.sync(DiscoveryCache, () => memory())
}

/** A cached document with the moment (milliseconds since the epoch) it stops being fresh. */
interface Entry {
  readonly value: unknown
  readonly freshUntil: number
}

/**
 * An in-memory cache, as a service value (the plain face builds its services without layers); entries age by
 * Effect's `Clock` and last as long as the process.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9111.html#section-4.2 | RFC 9111 §4.2}
 */
export const memory = (): DiscoveryCache["Service"] => {
  const entries = new Map<string, Entry>()
  return DiscoveryCache.of({
    get: (url) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = entries.get(url)
        if (entry === undefined) return undefined
        if (entry.freshUntil <= now) {
          entries.delete(url)
          return undefined
        }
        return entry.value
      }),
    set: (url, value, freshForSeconds) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (freshForSeconds > 0) entries.set(url, { value, freshUntil: now + freshForSeconds * 1000 })
      }),
    invalidate: (url) =>
      Effect.sync(() => {
        entries.delete(url)
      }),
  })
}
