/**
 * The rate limiter in the shared database (table `rate_limits`, one row per bucket), written once over the driver
 * port. A window request is one upsert statement (atomic on its own, one round trip on the hot path of the token
 * endpoint), and so is a request counted in several buckets at once; an attempt under growing delays is a transaction that locks the bucket's row and applies the same pure
 * step as the in-memory limiter ({@link attemptStep}).
 */
import { Effect } from "effect"
import {
  type AttemptDecision,
  attemptStep,
  type BucketState,
  type CombinedDecision,
  type Count,
  combine,
  type Decision,
  forgiveStep,
  type RateLimiterService,
} from "../../RateLimiter.js"
import type { StorageError } from "../Errors.js"
import { count, type Driver, type Row, row, rows, type Work } from "./sql.js"

const num = (r: Row, key: string): number => {
  const v = r[key]
  if (typeof v === "number") return v
  if ((typeof v === "string" && /^-?\d+$/.test(v)) || typeof v === "bigint") return Number(v)
  throw new Error(`column ${key}: expected integer`)
}

const state = (r: Row): BucketState => ({
  hits: num(r, "hits"),
  blockedUntil: num(r, "blocked_until"),
  expiresAt: num(r, "expires_at"),
})

/** The limiter over `driver`'s database. */
export const makeRateLimiter = (driver: Driver): RateLimiterService => {
  const t = driver.tables.rateLimits
  // A bucket past its expiry starts again at 1, as windowStep does; the statement is the whole decision's state change.
  const HIT = `INSERT INTO ${t} AS r (bucket, hits, blocked_until, expires_at) VALUES ($1, 1, 0, $3)
    ON CONFLICT (bucket) DO UPDATE SET
      hits = CASE WHEN r.expires_at <= $2 THEN 1 ELSE r.hits + 1 END,
      blocked_until = 0,
      expires_at = CASE WHEN r.expires_at <= $2 THEN $3 ELSE r.expires_at END
    RETURNING hits, expires_at`
  // Several buckets in one statement: a row of VALUES per bucket (its name, 1 to count or 0 to peek, its expiry if it
  // starts now). A peeked bucket that is not live gets no row and returns none (it would start empty); the others
  // return their state after the count. CAST types the numbers for PostgreSQL, which cannot infer them inside VALUES.
  const hitAllSql = new Map<number, string>()
  const HIT_ALL = (n: number): string => {
    const cached = hitAllSql.get(n)
    if (cached !== undefined) return cached
    const values = Array.from(
      { length: n },
      (_, i) => `($${3 * i + 2}, CAST($${3 * i + 3} AS BIGINT), CAST($${3 * i + 4} AS BIGINT))`,
    ).join(", ")
    const sql = `INSERT INTO ${t} AS r (bucket, hits, blocked_until, expires_at)
      SELECT v.column1, v.column2, 0, v.column3 FROM (VALUES ${values}) AS v
      WHERE v.column2 > 0 OR EXISTS (SELECT 1 FROM ${t} AS o WHERE o.bucket = v.column1 AND o.expires_at > $1)
      ON CONFLICT (bucket) DO UPDATE SET
        hits = CASE WHEN r.expires_at <= $1 THEN excluded.hits ELSE r.hits + excluded.hits END,
        blocked_until = 0,
        expires_at = CASE WHEN r.expires_at <= $1 THEN excluded.expires_at ELSE r.expires_at END
      RETURNING bucket, hits, expires_at`
    hitAllSql.set(n, sql)
    return sql
  }
  const hitAll = (counts: ReadonlyArray<Count>, now: number) =>
    driver.run("RateLimiter.hitAll", "autocommit", function* () {
      // In bucket order, so that concurrent statements lock the rows they share in the same order (no deadlock).
      const ordered = [...counts].sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0))
      const params = [now, ...ordered.flatMap((c) => [c.bucket, c.peek === true ? 0 : 1, now + c.rule.window])]
      const returned = yield* rows(HIT_ALL(ordered.length), params)
      const states = new Map(
        returned.map((r) => [String(r.bucket), { hits: num(r, "hits"), at: num(r, "expires_at") }]),
      )
      return combine(
        counts.map((c): Decision => {
          const s = states.get(c.bucket)
          // A peek judges the request as if counted: one more than the bucket holds.
          const hits = (s?.hits ?? 0) + (c.peek === true ? 1 : 0)
          return hits <= c.rule.max ? { allowed: true } : { allowed: false, retryAfter: (s?.at ?? now) - now }
        }),
      )
    })
  return {
    hitAll: (counts: ReadonlyArray<Count>, now: number): Effect.Effect<CombinedDecision, StorageError> =>
      counts.length === 0 ? Effect.succeed({ allowed: true }) : hitAll(counts, now),
    hit: (bucket, rule, now) =>
      driver
        .run("RateLimiter.hit", "autocommit", function* () {
          const r = yield* row(HIT, [bucket, now, now + rule.window])
          if (r === undefined) throw new Error("the upsert returned no row")
          return { hits: num(r, "hits"), expiresAt: num(r, "expires_at") }
        })
        .pipe(
          Effect.map(
            ({ hits, expiresAt }): Decision =>
              hits <= rule.max ? { allowed: true } : { allowed: false, retryAfter: expiresAt - now },
          ),
        ),
    attempt: (bucket, rule, now) =>
      driver.run("RateLimiter.attempt", "transaction", function* (): Work<AttemptDecision> {
        // The row exists before it is locked, so that two first attempts cannot both read "no row".
        yield* count(
          `INSERT INTO ${t} (bucket, hits, blocked_until, expires_at) VALUES ($1, 0, 0, 0) ON CONFLICT (bucket) DO NOTHING`,
          [bucket],
        )
        const r = yield* row(
          `SELECT hits, blocked_until, expires_at FROM ${t} WHERE bucket = $1 ${driver.lock("update")}`,
          [bucket],
        )
        const step = attemptStep(r === undefined ? undefined : state(r), rule, now)
        if (step.decision.allowed) {
          yield* count(`UPDATE ${t} SET hits = $2, blocked_until = $3, expires_at = $4 WHERE bucket = $1`, [
            bucket,
            step.state.hits,
            step.state.blockedUntil,
            step.state.expiresAt,
          ])
        }
        return step.decision
      }),
    forgive: (bucket, now) =>
      driver.run("RateLimiter.forgive", "transaction", function* () {
        const r = yield* row(
          `SELECT hits, blocked_until, expires_at FROM ${t} WHERE bucket = $1 ${driver.lock("update")}`,
          [bucket],
        )
        const next = forgiveStep(r === undefined ? undefined : state(r), now)
        if (next === undefined) return
        yield* count(`UPDATE ${t} SET hits = $2, blocked_until = $3 WHERE bucket = $1`, [
          bucket,
          next.hits,
          next.blockedUntil,
        ])
      }),
    reset: (bucket) =>
      driver.run("RateLimiter.reset", "autocommit", function* () {
        yield* count(`DELETE FROM ${t} WHERE bucket = $1`, [bucket])
      }),
    purgeExpired: (now) =>
      driver.run("RateLimiter.purgeExpired", "autocommit", function* () {
        return yield* count(`DELETE FROM ${t} WHERE expires_at <= $1`, [now])
      }),
  }
}
