/**
 * Where the `jti` values of proofs already seen are kept (RFC 9449 §11.1): one atomic "insert if absent" per accepted
 * proof. An entry lives until the proof's `iat` falls out of the window, so a proof is refused while it could still be
 * accepted. Instances behind one resource must share the store for a proof used at one to be refused at another: the
 * memory cache serves one process; `@keyway/ext-dpop/node` has SQLite (processes on one machine) and PostgreSQL
 * (machines) stores.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 */
export interface ReplayCache {
  /**
   * Records `key` (a proof's `jti`) until `expiresAt`, atomically across everything sharing the store: true when it was
   * absent (or held with an expiry at or before `now`, all in seconds since the epoch), false when it is held and
   * unexpired. Of several concurrent calls with one key, exactly one gets true. A synchronous answer costs the
   * request nothing more; a promise that rejects fails the request (a 500, never an acceptance).
   */
  readonly remember: (key: string, expiresAt: number, now: number) => boolean | Promise<boolean>
}

/**
 * The in-memory {@link ReplayCache}: synchronous, one process only, at most `maxEntries` entries.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 */
export interface MemoryReplayCache extends ReplayCache {
  readonly remember: (key: string, expiresAt: number, now: number) => boolean
  /** The number of entries held. */
  readonly size: () => number
}

/**
 * A replay cache in this process's memory, insertion-ordered (a `Map`), swept from its oldest entry as entries are
 * added: bounded in time (expired entries go as new ones come) and in memory (beyond `maxEntries` the oldest go first;
 * a proof whose entry was evicted early is refused again by its `iat` once its time has passed). Keys are `jti` values,
 * at most 256 characters each (longer proofs are refused before they reach the cache).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 */
export const memoryReplayCache = (maxEntries: number): MemoryReplayCache => {
  const entries = new Map<string, number>()
  return {
    remember: (key, expiresAt, now) => {
      // Looked up before the sweep, which would otherwise evict a held key from a full cache and let it in again.
      const until = entries.get(key)
      if (until !== undefined) {
        if (until > now) return false
        // Moved to the end, so the sweep keeps finding entries in the order they were recorded.
        entries.delete(key)
      }
      for (const [held, heldUntil] of entries) {
        if (heldUntil > now && entries.size < maxEntries) break
        entries.delete(held)
      }
      entries.set(key, expiresAt)
      return true
    },
    size: () => entries.size,
  }
}
