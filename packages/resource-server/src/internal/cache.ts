import { nodeCrypto } from "./native.js"
import { sha256Words } from "./sha256.js"

type NativeHash = (algorithm: string, data: string, encoding: "latin1") => string

/** SHA-256 of the empty string, one character per byte: a native hash must reproduce it before it is trusted. */
const EMPTY_SHA256 =
  "\xe3\xb0\xc4\x42\x98\xfc\x1c\x14\x9a\xfb\xf4\xc8\x99\x6f\xb9\x24\x27\xae\x41\xe4\x64\x9b\x93\x4c\xa4\x95\x99\x1b\x78\x52\xb8\x55"

/**
 * The one-shot native `hash` of `node:crypto` where the runtime has it; elsewhere undefined, and the cache hashes in
 * plain JavaScript. Measured on the cached path: native 0.4 µs, plain JavaScript 1.7 µs, Web Crypto 9 to 27 µs of CPU
 * per hash on Node.js (docs/benchmarks.md). The digest's bytes become the characters of the key as they are, the
 * cheapest string node:crypto makes of them.
 */
const nativeHash = ((): NativeHash | undefined => {
  try {
    const hash = (nodeCrypto as { hash?: NativeHash } | undefined)?.hash
    return typeof hash === "function" && hash("sha256", "", "latin1") === EMPTY_SHA256 ? hash : undefined
  } catch {
    return undefined
  }
})()

/** The key of a token when hashed in plain JavaScript: the digest's 16-bit halves as UTF-16 code units. */
const portableKey = (token: string): string => {
  const h = sha256Words(token)
  let key = ""
  for (let i = 0; i < 8; i++) key += String.fromCharCode((h[i] as number) >>> 16, (h[i] as number) & 0xffff)
  return key
}

/** The cache key of a token: its SHA-256, so the cache never holds a usable token. */
export const tokenKey: (token: string) => string =
  nativeHash === undefined ? portableKey : (token) => nativeHash("sha256", token, "latin1")

interface Entry<A> {
  readonly value: A
  readonly expiresAt: number
}

/** Entries the sweep looks at on each insertion (see {@link ExpiringCache}). */
const SWEEP_STEPS = 2

/**
 * A bounded map with per-entry expiry, read on the hot path without running an Effect; `now` is the owner's clock
 * (milliseconds). Eviction is oldest-inserted first: cheap, and a busy client's token is re-inserted soon after
 * eviction anyway. Each insertion also looks at the next two entries of a walk round the map and drops those that
 * have expired, so expired entries do not stay until the map is full: with entries inserted at a steady rate, it
 * holds at most about twice the entries still live (an expired one waits at most one walk round the map, which takes
 * half as many insertions as there are entries), not `maxEntries` of them.
 */
export class ExpiringCache<A> {
  readonly #entries = new Map<string, Entry<A>>()
  // Walks the keys in insertion order, one eviction after the other. A fresh `keys()` per eviction would skip every
  // entry deleted since the map was last rehashed, about 3.6 µs per insert at 10 000 entries (docs/benchmarks.md);
  // a live iterator keeps its place, and an entry set again moves behind it.
  #oldest: MapIterator<string> = this.#entries.keys()
  // The walk of the sweep, a live iterator as well, begun again at the first key when it reaches the last.
  #sweep: MapIterator<string> = this.#entries.keys()
  readonly #maxEntries: number
  readonly #now: () => number

  constructor(maxEntries: number, now: () => number) {
    this.#maxEntries = maxEntries
    this.#now = now
  }

  get size(): number {
    return this.#entries.size
  }

  /** The live value under `key`; `at` is the owner's clock read, when it read it already. */
  get(key: string, at?: number): A | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (entry.expiresAt <= (at ?? this.#now())) {
      this.#entries.delete(key)
      return undefined
    }
    return entry.value
  }

  set(key: string, value: A, expiresAt: number): void {
    const now = this.#now()
    if (this.#maxEntries <= 0 || expiresAt <= now) return
    this.#sweepSome(now)
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

  // A few steps of the walk, so that an insertion costs O(1): a full scan for expired entries would cost O(n).
  #sweepSome(now: number): void {
    for (let step = 0; step < SWEEP_STEPS; step++) {
      let next = this.#sweep.next()
      if (next.done === true) {
        this.#sweep = this.#entries.keys()
        next = this.#sweep.next()
        if (next.done === true) return
      }
      const entry = this.#entries.get(next.value)
      if (entry !== undefined && entry.expiresAt <= now) this.#entries.delete(next.value)
    }
  }

  // Drops the oldest entries only: a full scan for expired ones would cost O(n) per insert at capacity.
  #evict(): void {
    while (this.#entries.size >= this.#maxEntries) {
      let oldest = this.#oldest.next()
      if (oldest.done === true) {
        this.#oldest = this.#entries.keys()
        oldest = this.#oldest.next()
        if (oldest.done === true) break
      }
      this.#entries.delete(oldest.value)
    }
  }
}
