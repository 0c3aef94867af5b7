/**
 * The rate-limiter contract: the in-memory limiter and the SQL limiter (SQLite, PostgreSQL) run this same suite, so
 * both apply the same rules. Each test gets a fresh, empty limiter from the factory.
 */
import { Effect, type Layer } from "effect"
import { describe, expect, it } from "vitest"
import { type BackoffRule, RateLimiter } from "../../src/RateLimiter.js"
import type { StorageError } from "../../src/storage/index.js"
import { NOW } from "./contract.js"

/** Builds a fresh, empty limiter. */
export type LimiterFactory = () => Layer.Layer<RateLimiter, StorageError>

const backoff: BackoffRule = { freeAttempts: 3, delay: 10, maxDelay: 25, forgetAfter: 100 }

export const rateLimitContract = (name: string, factory: LimiterFactory): void => {
  const run = <A, E>(program: Effect.Effect<A, E, RateLimiter>): Promise<A> =>
    Effect.runPromise(Effect.provide(program, factory()))

  describe(`${name}: RateLimiter windows`, () => {
    it("allows max requests in a window, refuses the rest until the window ends, then starts a new one", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          const rule = { max: 3, window: 60 }
          for (let i = 0; i < 3; i++) expect(yield* limiter.hit("a", rule, NOW + i)).toEqual({ allowed: true })
          expect(yield* limiter.hit("a", rule, NOW + 3)).toEqual({ allowed: false, retryAfter: 57 })
          expect(yield* limiter.hit("a", rule, NOW + 59)).toEqual({ allowed: false, retryAfter: 1 })
          // Another bucket counts on its own.
          expect(yield* limiter.hit("b", rule, NOW + 59)).toEqual({ allowed: true })
          expect(yield* limiter.hit("a", rule, NOW + 60)).toEqual({ allowed: true })
          expect(yield* limiter.hit("a", rule, NOW + 61)).toEqual({ allowed: true })
          expect(yield* limiter.hit("a", rule, NOW + 62)).toEqual({ allowed: true })
          expect(yield* limiter.hit("a", rule, NOW + 63)).toEqual({ allowed: false, retryAfter: 57 })
        }),
      ))

    it("lets exactly max of many concurrent requests through", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          const decisions = yield* Effect.all(
            Array.from({ length: 20 }, () => limiter.hit("burst", { max: 5, window: 60 }, NOW)),
            { concurrency: "unbounded" },
          )
          expect(decisions.filter((d) => d.allowed)).toHaveLength(5)
          expect(decisions.filter((d) => !d.allowed)).toEqual(
            Array.from({ length: 15 }, () => ({ allowed: false, retryAfter: 60 })),
          )
        }),
      ))
  })

  describe(`${name}: RateLimiter combined checks`, () => {
    const a = { max: 2, window: 60 }
    const b = { max: 3, window: 30 }

    it("counts one request in every bucket at once; the refusal names the bucket with the longest wait", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          const both = [
            { bucket: "a", rule: a },
            { bucket: "b", rule: b },
          ]
          expect(yield* limiter.hitAll([], NOW)).toEqual({ allowed: true })
          expect(yield* limiter.hitAll(both, NOW)).toEqual({ allowed: true })
          expect(yield* limiter.hitAll(both, NOW)).toEqual({ allowed: true })
          expect(yield* limiter.hitAll(both, NOW + 1)).toEqual({ allowed: false, retryAfter: 59, refusedBy: 0 })
          // Both refuse: the longer wait (a's), whatever the order of the counts.
          expect(yield* limiter.hitAll([...both].reverse(), NOW + 2)).toEqual({
            allowed: false,
            retryAfter: 58,
            refusedBy: 1,
          })
          // The buckets are those of single hits: b has counted four requests.
          expect(yield* limiter.hit("b", b, NOW + 3)).toEqual({ allowed: false, retryAfter: 27 })
          // b's window ends first; a still refuses.
          expect(yield* limiter.hitAll(both, NOW + 30)).toEqual({ allowed: false, retryAfter: 30, refusedBy: 0 })
          expect(yield* limiter.hitAll([{ bucket: "b", rule: b }], NOW + 31)).toEqual({ allowed: true })
          expect(yield* limiter.hitAll(both, NOW + 60)).toEqual({ allowed: true })
        }),
      ))

    it("a peek judges the request as if counted, without counting it; a bucket that is not live is not created", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          const one = { max: 1, window: 60 }
          const peek = { bucket: "-peeked", rule: one, peek: true }
          for (let i = 0; i < 3; i++) expect(yield* limiter.hitAll([peek], NOW)).toEqual({ allowed: true })
          expect(yield* limiter.purgeExpired(NOW + 1000)).toBe(0)
          expect(yield* limiter.hit("-peeked", one, NOW)).toEqual({ allowed: true })
          // Full: a request counted now would be refused, so the peek refuses; the count is unchanged.
          expect(yield* limiter.hitAll([peek], NOW + 10)).toEqual({ allowed: false, retryAfter: 50, refusedBy: 0 })
          expect(yield* limiter.hitAll([{ bucket: "c", rule: a }, peek], NOW + 10)).toEqual({
            allowed: false,
            retryAfter: 50,
            refusedBy: 1,
          })
          // The counted bucket counted all the same: this is its second request, the next its third.
          expect(yield* limiter.hitAll([{ bucket: "c", rule: a }], NOW + 11)).toEqual({ allowed: true })
          expect(yield* limiter.hitAll([{ bucket: "c", rule: a }], NOW + 11)).toEqual({
            allowed: false,
            retryAfter: 59,
            refusedBy: 0,
          })
          expect(yield* limiter.hit("-peeked", { max: 2, window: 60 }, NOW + 12)).toEqual({ allowed: true })
          // Once the window is over, the peek allows again.
          expect(yield* limiter.hitAll([peek], NOW + 60)).toEqual({ allowed: true })
        }),
      ))

    it("lets exactly max of many concurrent combined requests through, and counts every one", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          const x = { bucket: "x", rule: { max: 5, window: 60 } }
          const y = { bucket: "y", rule: { max: 100, window: 60 } }
          const decisions = yield* Effect.all(
            // Half in each order: the buckets shared by concurrent statements must not deadlock.
            Array.from({ length: 20 }, (_, i) => limiter.hitAll(i % 2 === 0 ? [x, y] : [y, x], NOW)),
            { concurrency: "unbounded" },
          )
          expect(decisions.filter((d) => d.allowed)).toHaveLength(5)
          expect(decisions.filter((d) => !d.allowed).map((d) => (d.allowed ? 0 : d.retryAfter))).toEqual(
            Array.from({ length: 15 }, () => 60),
          )
          expect(yield* limiter.hit("y", { max: 21, window: 60 }, NOW)).toEqual({ allowed: true })
          expect(yield* limiter.hit("y", { max: 21, window: 60 }, NOW)).toEqual({ allowed: false, retryAfter: 60 })
        }),
      ))
  })

  describe(`${name}: RateLimiter growing delays`, () => {
    it("locks after freeAttempts, doubling each further lock up to maxDelay", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          expect(yield* limiter.attempt("u", backoff, NOW)).toEqual({ allowed: true, lockIfFailed: 0 })
          expect(yield* limiter.attempt("u", backoff, NOW)).toEqual({ allowed: true, lockIfFailed: 0 })
          expect(yield* limiter.attempt("u", backoff, NOW)).toEqual({ allowed: true, lockIfFailed: 10 })
          expect(yield* limiter.attempt("u", backoff, NOW + 1)).toEqual({ allowed: false, retryAfter: 9 })
          expect(yield* limiter.attempt("u", backoff, NOW + 9)).toEqual({ allowed: false, retryAfter: 1 })
          expect(yield* limiter.attempt("u", backoff, NOW + 10)).toEqual({ allowed: true, lockIfFailed: 20 })
          expect(yield* limiter.attempt("u", backoff, NOW + 29)).toEqual({ allowed: false, retryAfter: 1 })
          expect(yield* limiter.attempt("u", backoff, NOW + 30)).toEqual({ allowed: true, lockIfFailed: 25 })
          expect(yield* limiter.attempt("u", backoff, NOW + 55)).toEqual({ allowed: true, lockIfFailed: 25 })
          // Another bucket is not locked.
          expect(yield* limiter.attempt("v", backoff, NOW + 56)).toEqual({ allowed: true, lockIfFailed: 0 })
        }),
      ))

    it("forgets the count forgetAfter seconds after the last attempt", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          yield* limiter.attempt("u", backoff, NOW)
          yield* limiter.attempt("u", backoff, NOW + 50)
          expect(yield* limiter.attempt("u", backoff, NOW + 149)).toEqual({ allowed: true, lockIfFailed: 10 })
          yield* limiter.reset("u")
          yield* limiter.attempt("w", backoff, NOW)
          yield* limiter.attempt("w", backoff, NOW + 1)
          expect(yield* limiter.attempt("w", backoff, NOW + 101)).toEqual({ allowed: true, lockIfFailed: 0 })
        }),
      ))

    it("reset forgets the bucket; forgive gives one attempt back and lifts the lock it set", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          for (let i = 0; i < 3; i++) yield* limiter.attempt("u", backoff, NOW)
          yield* limiter.reset("u")
          expect(yield* limiter.attempt("u", backoff, NOW + 1)).toEqual({ allowed: true, lockIfFailed: 0 })

          for (let i = 0; i < 3; i++) yield* limiter.attempt("a", backoff, NOW)
          yield* limiter.forgive("a", NOW)
          // Two counted, no lock: the next attempt is the third again.
          expect(yield* limiter.attempt("a", backoff, NOW + 1)).toEqual({ allowed: true, lockIfFailed: 10 })
          // Forgiving an unknown bucket changes nothing.
          yield* limiter.forgive("nobody", NOW)
          expect(yield* limiter.attempt("nobody", backoff, NOW)).toEqual({ allowed: true, lockIfFailed: 0 })
        }),
      ))

    it("counts concurrent attempts one by one: exactly freeAttempts get through, the rest are locked out", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          const decisions = yield* Effect.all(
            Array.from({ length: 12 }, () => limiter.attempt("u", backoff, NOW)),
            { concurrency: "unbounded" },
          )
          expect(
            decisions
              .filter((d) => d.allowed)
              .map((d) => (d.allowed ? d.lockIfFailed : -1))
              .sort(),
          ).toEqual([0, 0, 10])
          expect(decisions.filter((d) => !d.allowed)).toEqual(
            Array.from({ length: 9 }, () => ({ allowed: false, retryAfter: 10 })),
          )
        }),
      ))
  })

  describe(`${name}: RateLimiter purge`, () => {
    it("deletes the buckets forgotten at now, and only those", () =>
      run(
        Effect.gen(function* () {
          const limiter = yield* RateLimiter
          yield* limiter.hit("window", { max: 1, window: 60 }, NOW)
          yield* limiter.attempt("backoff", backoff, NOW)
          expect(yield* limiter.purgeExpired(NOW + 59)).toBe(0)
          expect(yield* limiter.purgeExpired(NOW + 60)).toBe(1)
          expect(yield* limiter.purgeExpired(NOW + 100)).toBe(1)
          // Purged buckets start from nothing.
          expect(yield* limiter.hit("window", { max: 1, window: 60 }, NOW + 100)).toEqual({ allowed: true })
        }),
      ))
  })
}
