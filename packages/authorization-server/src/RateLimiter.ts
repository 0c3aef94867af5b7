/**
 * Abuse limits: counters kept per bucket (an account, a client address, a client, a host) that refuse requests once a
 * limit is reached, answered with HTTP 429 and `Retry-After`. Two kinds of rule: a fixed window (at most `max`
 * requests in `window` seconds) and growing delays after failures (after `freeAttempts` failed attempts, each further
 * failure locks the bucket for a period that doubles up to `maxDelay`).
 *
 * The decisions are written once, as pure steps ({@link windowStep}, {@link attemptStep}); the in-memory limiter
 * ({@link RateLimiter.layerMemory}, one process) applies them to a map, and the SQL limiter that the SQLite and
 * PostgreSQL storage layers provide applies the same rules atomically in the shared database, so several instances
 * behind one issuer enforce one limit together.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4 (429 Too Many Requests)}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6 (brute-force and credential guessing)}
 * @module
 */
import { createHash } from "node:crypto"
import { Context, Effect, Layer, Schema } from "effect"
import type { StorageError } from "./storage/Errors.js"

/**
 * At most `max` requests per bucket in a fixed window of `window` seconds, starting with the bucket's first request.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export interface WindowRule {
  readonly max: number
  /** Seconds. */
  readonly window: number
}

/**
 * Growing delays after failures: the first `freeAttempts - 1` failures cost nothing; the failure that makes
 * `freeAttempts` locks the bucket for `delay` seconds, and each further failure (only possible once the lock is over)
 * for twice the previous lock, at most `maxDelay`. The count is forgotten `forgetAfter` seconds after the last
 * attempt.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6}
 */
export interface BackoffRule {
  readonly freeAttempts: number
  /** Seconds. */
  readonly delay: number
  /** Seconds. */
  readonly maxDelay: number
  /** Seconds. */
  readonly forgetAfter: number
}

/**
 * The answer to one request under a {@link WindowRule}: allowed, or refused for `retryAfter` more seconds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-10.2.3 | RFC 9110 §10.2.3 (Retry-After)}
 */
export type Decision = { readonly allowed: true } | { readonly allowed: false; readonly retryAfter: number }

/**
 * One bucket of a combined check ({@link RateLimiterService.hitAll}): the request is counted in `bucket` under `rule`,
 * or, with `peek`, only judged as if it were (the bucket is read, not changed).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export interface Count {
  readonly bucket: string
  readonly rule: WindowRule
  readonly peek?: boolean
}

/**
 * The answer to one request under several {@link Count}s: allowed when every bucket allows it; otherwise refused for
 * the longest wait among the buckets that refuse, `refusedBy` being the index of that bucket's count (the first one on
 * a tie), so that the answer can say which limit was reached.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-10.2.3 | RFC 9110 §10.2.3 (Retry-After)}
 */
export type CombinedDecision =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly retryAfter: number; readonly refusedBy: number }

/**
 * The decisions of one request's counts, in the order of its counts, as one {@link CombinedDecision}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export const combine = (decisions: ReadonlyArray<Decision>): CombinedDecision => {
  let refused: { retryAfter: number; refusedBy: number } | undefined
  decisions.forEach((decision, index) => {
    if (!decision.allowed && (refused === undefined || decision.retryAfter > refused.retryAfter)) {
      refused = { retryAfter: decision.retryAfter, refusedBy: index }
    }
  })
  return refused === undefined ? { allowed: true } : { allowed: false, ...refused }
}

/**
 * A request refused by an abuse limit, answered `429 Too Many Requests` with `Retry-After`: `limit` is the
 * configuration setting that changes it (`rateLimits.workload`), `description` the answer's `error_description`, which
 * says which limit was reached, names that setting, and says when to retry.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  limit: Schema.String,
  retryAfter: Schema.Number,
  description: Schema.String,
}) {}

/**
 * The answer to one attempt under a {@link BackoffRule}: refused while the bucket is locked; otherwise allowed and
 * counted, with `lockIfFailed` the lock (seconds, 0 for none) now in force should the attempt fail. A successful
 * attempt is given back with {@link RateLimiterService.forgive} or {@link RateLimiterService.reset}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6}
 */
export type AttemptDecision =
  | { readonly allowed: true; readonly lockIfFailed: number }
  | { readonly allowed: false; readonly retryAfter: number }

/**
 * One bucket's state: its count, the end of its lock (0 for none) and when it is forgotten (NumericDate seconds).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export interface BucketState {
  readonly hits: number
  readonly blockedUntil: number
  readonly expiresAt: number
}

/**
 * The lock after the `attempts`-th counted attempt under `rule`, in seconds (0 before `freeAttempts`).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6}
 */
export const lockFor = (rule: BackoffRule, attempts: number): number =>
  attempts < rule.freeAttempts
    ? 0
    : Math.min(rule.maxDelay, rule.delay * 2 ** Math.min(attempts - rule.freeAttempts, 40))

const live = (state: BucketState | undefined, now: number): BucketState | undefined =>
  state !== undefined && state.expiresAt > now ? state : undefined

/**
 * One request under a {@link WindowRule}: the bucket's next state and the decision. Refused requests count too.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export const windowStep = (
  state: BucketState | undefined,
  rule: WindowRule,
  now: number,
): { readonly state: BucketState; readonly decision: Decision } => {
  const current = live(state, now)
  const hits = (current?.hits ?? 0) + 1
  const expiresAt = current?.expiresAt ?? now + rule.window
  return {
    state: { hits, blockedUntil: 0, expiresAt },
    decision: hits <= rule.max ? { allowed: true } : { allowed: false, retryAfter: expiresAt - now },
  }
}

/**
 * One attempt under a {@link BackoffRule}: the bucket's next state and the decision. An attempt is counted before
 * its outcome is known, so that parallel attempts cannot all slip in before the first failure is recorded.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6}
 */
export const attemptStep = (
  state: BucketState | undefined,
  rule: BackoffRule,
  now: number,
): { readonly state: BucketState; readonly decision: AttemptDecision } => {
  const current = live(state, now)
  if (current !== undefined && current.blockedUntil > now) {
    return { state: current, decision: { allowed: false, retryAfter: current.blockedUntil - now } }
  }
  const hits = (current?.hits ?? 0) + 1
  const lock = lockFor(rule, hits)
  return {
    state: { hits, blockedUntil: lock > 0 ? now + lock : 0, expiresAt: now + Math.max(rule.forgetAfter, lock) },
    decision: { allowed: true, lockIfFailed: lock },
  }
}

/**
 * A successful attempt given back: one attempt less, and no lock (the lock this attempt set, if any).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6}
 */
export const forgiveStep = (state: BucketState | undefined, now: number): BucketState | undefined => {
  const current = live(state, now)
  return current === undefined ? undefined : { ...current, hits: Math.max(0, current.hits - 1), blockedUntil: 0 }
}

/**
 * The bucket name for `value` (an account name, an address, a client ID, a host) under `kind`: the value is hashed
 * (SHA-256, base64url), so the store keeps no user names or addresses and every bucket name has the same length.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6234.html | RFC 6234 (SHA-256)}
 */
export const bucket = (kind: string, value: string): string =>
  `${kind}:${createHash("sha256").update(value, "utf8").digest("base64url")}`

/**
 * The shape of the {@link RateLimiter} service. Times are NumericDate seconds from the caller's clock.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export interface RateLimiterService {
  /** Counts one request in `bucket` under a {@link WindowRule}. */
  readonly hit: (bucket: string, rule: WindowRule, now: number) => Effect.Effect<Decision, StorageError>
  /**
   * Counts one request in each bucket of `counts` (distinct buckets) and judges it under every one, at once (one
   * statement in the database): the combined check of a request limited under several keys.
   */
  readonly hitAll: (counts: ReadonlyArray<Count>, now: number) => Effect.Effect<CombinedDecision, StorageError>
  /** Counts one attempt in `bucket` under a {@link BackoffRule}, or refuses it while the bucket is locked. */
  readonly attempt: (bucket: string, rule: BackoffRule, now: number) => Effect.Effect<AttemptDecision, StorageError>
  /** Gives back one successful attempt (see {@link forgiveStep}). */
  readonly forgive: (bucket: string, now: number) => Effect.Effect<void, StorageError>
  /** Forgets `bucket` (a successful login resets its account's count). */
  readonly reset: (bucket: string) => Effect.Effect<void, StorageError>
  /** Deletes the buckets forgotten at `now`; returns how many. */
  readonly purgeExpired: (now: number) => Effect.Effect<number, StorageError>
}

/** Most buckets the in-memory limiter keeps; forgotten ones go first, then the oldest. */
const MAX_MEMORY_BUCKETS = 100_000

/**
 * The in-memory limiter over a map: one process only. Bounded to `maxBuckets` buckets (100 000 by default), so a
 * flood of made-up names cannot grow it without end.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export const makeMemory = (maxBuckets: number = MAX_MEMORY_BUCKETS): RateLimiterService => {
  const buckets = new Map<string, BucketState>()
  const purge = (now: number): number => {
    let removed = 0
    for (const [name, state] of buckets) {
      if (state.expiresAt <= now) {
        buckets.delete(name)
        removed++
      }
    }
    return removed
  }
  const store = (name: string, state: BucketState, now: number) => {
    buckets.delete(name)
    if (buckets.size >= maxBuckets) purge(now)
    while (buckets.size >= maxBuckets) {
      const oldest = buckets.keys().next()
      if (oldest.done === true) break
      buckets.delete(oldest.value)
    }
    buckets.set(name, state)
  }
  return {
    hit: (name, rule, now) =>
      Effect.sync(() => {
        const { state, decision } = windowStep(buckets.get(name), rule, now)
        store(name, state, now)
        return decision
      }),
    hitAll: (counts, now) =>
      Effect.sync(() =>
        combine(
          counts.map((count) => {
            const { state, decision } = windowStep(buckets.get(count.bucket), count.rule, now)
            if (count.peek !== true) store(count.bucket, state, now)
            return decision
          }),
        ),
      ),
    attempt: (name, rule, now) =>
      Effect.sync(() => {
        const { state, decision } = attemptStep(buckets.get(name), rule, now)
        if (decision.allowed) store(name, state, now)
        return decision
      }),
    forgive: (name, now) =>
      Effect.sync(() => {
        const state = forgiveStep(buckets.get(name), now)
        if (state === undefined) buckets.delete(name)
        else buckets.set(name, state)
      }),
    reset: (name) => Effect.sync(() => void buckets.delete(name)),
    purgeExpired: (now) => Effect.sync(() => purge(now)),
  }
}

/**
 * The counters behind the abuse limits. `Storage.layerMemory` provides the in-memory limiter, `Storage.layerSqlite`
 * and `Storage.layerPostgres` one in the database (table `rate_limits`, changed atomically, so every instance sharing
 * the database counts in the same buckets); the server uses {@link RateLimiter.layerMemory} when its storage provides
 * none. The purge job deletes forgotten buckets.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export class RateLimiter extends Context.Service<RateLimiter, RateLimiterService>()(
  "@keyway/authorization-server/RateLimiter",
) {
  /**
   * A fresh in-memory limiter (one process).
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
   */
  static readonly layerMemory: Layer.Layer<RateLimiter> = Layer.sync(RateLimiter, () => RateLimiter.of(makeMemory()))
}
