/**
 * The rate limiter in the shared database (table `rate_limits`, one row per bucket), written once over the driver
 * port. A window request is one upsert statement (atomic on its own, one round trip on the hot path of the token
 * endpoint); an attempt under growing delays is a transaction that locks the bucket's row and applies the same pure
 * step as the in-memory limiter ({@link attemptStep}).
 */
import { Effect } from "effect"
import {
  type AttemptDecision,
  attemptStep,
  type BucketState,
  type Decision,
  forgiveStep,
  type RateLimiterService,
} from "../../RateLimiter.js"
import { count, type Driver, type Row, row, type Work } from "./sql.js"

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
  return {
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
