import { Cause, Deferred, Effect, type Exit, Result } from "effect"

/** A fetched value and its lifetime, in seconds since the epoch (the caller's `now`). */
export interface Fetched<A> {
  readonly value: A
  readonly expiresAt: number
}

/** A value the cache holds until it expires. */
interface Ok<A> {
  readonly _tag: "ok"
  readonly value: A
  readonly fetchedAt: number
  readonly expiresAt: number
}

/** A failure the cache repeats until its back-off ends. */
interface Failed<E> {
  readonly _tag: "failed"
  readonly error: E
  readonly until: number
}

/** What the cache holds for a key: a value until it expires, or a failure repeated until its back-off ends. */
export type Entry<A, E> = Ok<A> | Failed<E>

/** Bounds of a {@link FetchCache}. */
export interface CacheSettings {
  /**
   * Most keys kept. Failures go as soon as their back-off is over; when the cache is full, expired values go, then
   * the oldest failures, then the oldest values.
   */
  readonly maxEntries: number
  /** How long a failure is repeated without fetching again; 0 keeps no failure. */
  readonly failureBackoffSeconds: number
}

/**
 * The cache in front of every fetch of a client-named URL (metadata documents, `jwks_uri` key sets): one fetch per
 * key at a time, a lifetime per value (HTTP freshness, decided by the caller), a short back-off after a failure so a
 * request flood cannot make the server hammer a host, and a bound on the number of keys. Times are the caller's
 * `now`, in seconds, so expiry follows the same clock as the records built from the values.
 */
export interface FetchCache<A, E> {
  /** The entry still in force for `key` at `now`, if any. */
  readonly current: (key: string, now: number) => Entry<A, E> | undefined
  /** Runs `fetch` for `key` (or joins the one already running) and keeps its outcome. */
  readonly load: (key: string, now: number, fetch: Effect.Effect<Fetched<A>, E>) => Effect.Effect<A, E>
  /** Drops the entry for `key`. */
  readonly forget: (key: string) => void
  /** How many keys it holds (values and failures). */
  readonly size: () => number
}

const endOf = <A, E>(entry: Entry<A, E>): number => (entry._tag === "ok" ? entry.expiresAt : entry.until)

/** A {@link FetchCache} within `settings`. */
export const make = <A, E>(settings: CacheSettings): FetchCache<A, E> => {
  const values = new Map<string, Ok<A>>()
  // Failures apart, in the order they were kept: every one lasts the same back-off, so they end in that order too and
  // go as soon as it is over. Kept with the values until the cache is full, each held an error (and what its stack
  // trace refers to) long after it stopped mattering, for every distinct URL a caller ever made up.
  const failures = new Map<string, Failed<E>>()
  const inflight = new Map<string, Deferred.Deferred<A, E>>()

  const oldest = (map: Map<string, unknown>) => {
    const first = map.keys().next()
    if (first.done !== true) map.delete(first.value)
  }
  const remember = (key: string, entry: Entry<A, E>, now: number) => {
    values.delete(key)
    failures.delete(key)
    for (const [other, e] of failures) {
      if (e.until > now) break
      failures.delete(other)
    }
    if (values.size + failures.size >= settings.maxEntries) {
      for (const [other, e] of values) if (e.expiresAt <= now) values.delete(other)
    }
    while (values.size + failures.size >= settings.maxEntries && values.size + failures.size > 0) {
      oldest(failures.size > 0 ? failures : values)
    }
    if (entry._tag === "ok") values.set(key, entry)
    else failures.set(key, entry)
  }

  const current = (key: string, now: number): Entry<A, E> | undefined => {
    const entry = values.get(key) ?? failures.get(key)
    return entry !== undefined && now < endOf(entry) ? entry : undefined
  }

  // The fetch runs detached so that a caller giving up (a closed browser tab) does not cancel it for the others;
  // the SSRF guard's time cap bounds it.
  const load = (key: string, now: number, fetch: Effect.Effect<Fetched<A>, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const running = inflight.get(key)
      if (running !== undefined) return Deferred.await(running)
      const deferred = Deferred.makeUnsafe<A, E>()
      inflight.set(key, deferred)
      const settle = (exit: Exit.Exit<Fetched<A>, E>) =>
        Effect.suspend(() => {
          inflight.delete(key)
          if (exit._tag === "Success") {
            const { value, expiresAt } = exit.value
            remember(key, { _tag: "ok", value, fetchedAt: now, expiresAt }, now)
            return Deferred.succeed(deferred, value)
          }
          if (settings.failureBackoffSeconds > 0) {
            const error = Cause.findError(exit.cause)
            if (Result.isSuccess(error)) {
              remember(key, { _tag: "failed", error: error.success, until: now + settings.failureBackoffSeconds }, now)
            }
          }
          return Deferred.failCause(deferred, exit.cause)
        })
      return fetch.pipe(
        Effect.exit,
        Effect.flatMap(settle),
        Effect.forkDetach,
        Effect.andThen(Deferred.await(deferred)),
      )
    })

  return {
    current,
    load,
    forget: (key) => {
      values.delete(key)
      failures.delete(key)
    },
    size: () => values.size + failures.size,
  }
}
