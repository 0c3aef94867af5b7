/**
 * The `jti` values of proofs already seen (RFC 9449 §11.1), bounded in time (an entry lives until the proof's `iat`
 * falls out of the window) and in memory (beyond `maxEntries` the oldest entries go first; a proof whose entry was
 * evicted early is still refused by its `iat` once its time has passed).
 */
export interface ReplayCache {
  /** Records a `jti` until `expiresAt` (seconds); false when it was already recorded and has not expired. */
  readonly remember: (jti: string, expiresAt: number, now: number) => boolean
  /** The number of entries held. */
  readonly size: () => number
}

/** A replay cache in memory, insertion-ordered (a `Map`), swept lazily from its oldest entry. */
export const memoryReplayCache = (maxEntries: number): ReplayCache => {
  const entries = new Map<string, number>()
  return {
    remember: (jti, expiresAt, now) => {
      for (const [key, until] of entries) {
        if (until > now && entries.size < maxEntries) break
        entries.delete(key)
      }
      const until = entries.get(jti)
      if (until !== undefined && until > now) return false
      entries.set(jti, expiresAt)
      return true
    },
    size: () => entries.size,
  }
}
