import { hash } from "node:crypto"

/** The cache key of a token: its SHA-256, so the cache never holds a usable token. One-shot `hash` is the fast path. */
export const tokenKey = (token: string): string => hash("sha256", token, "base64url")

interface Entry<A> {
  readonly value: A
  readonly expiresAt: number
}

/**
 * A bounded map with per-entry expiry, read on the hot path without running an Effect; `now` is the owner's clock
 * (milliseconds). Eviction is oldest-inserted first: cheap, and a busy client's token is re-inserted soon after
 * eviction anyway.
 */
export class ExpiringCache<A> {
  readonly #entries = new Map<string, Entry<A>>()
  readonly #maxEntries: number
  readonly #now: () => number

  constructor(maxEntries: number, now: () => number) {
    this.#maxEntries = maxEntries
    this.#now = now
  }

  get size(): number {
    return this.#entries.size
  }

  get(key: string): A | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(key)
      return undefined
    }
    return entry.value
  }

  set(key: string, value: A, expiresAt: number): void {
    if (this.#maxEntries <= 0 || expiresAt <= this.#now()) return
    this.#entries.delete(key)
    if (this.#entries.size >= this.#maxEntries) this.#evict()
    this.#entries.set(key, { value, expiresAt })
  }

  delete(key: string): void {
    this.#entries.delete(key)
  }

  clear(): void {
    this.#entries.clear()
  }

  // Drops the oldest entries only: a full scan for expired ones would cost O(n) per insert at capacity.
  #evict(): void {
    while (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next()
      if (oldest.done === true) break
      this.#entries.delete(oldest.value)
    }
  }
}
