import { it } from "@effect/vitest"
import { Clock, Context, Effect, Layer, Logger } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect } from "vitest"
import { RateLimiter } from "../../src/RateLimiter.js"
import {
  ClientStore,
  CodeExpired,
  CodeNotFound,
  GrantStore,
  KeyStore,
  layerMemory,
  layerPurge,
  purgeExpired,
  RecordStore,
  StorageError,
} from "../../src/storage/index.js"
import { NOW, newClient, newCode, signingKey } from "./contract.js"

/** The test clock's time in NumericDate seconds. */
const seconds = Effect.map(Clock.currentTimeMillis, (millis) => Math.floor(millis / 1000))

describe("purgeExpired", () => {
  it("purges all three stores, the rate limiter and the extension records, and reports what each removed", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        yield* (yield* ClientStore).create(
          newClient({ client_id: "cached", origin: "metadata-document", expires_at: NOW + 10 }),
        )
        yield* (yield* KeyStore).add(signingKey("old", { status: "retired", retires_at: NOW + 10 }))
        yield* (yield* GrantStore).createCode(newCode({ expires_at: NOW + 10 }))
        yield* (yield* RateLimiter).hit("bucket", { max: 1, window: 10 }, NOW)
        yield* (yield* RecordStore).put("example/records", "-key", { n: 1 }, NOW + 10, NOW)
        expect(yield* purgeExpired(NOW + 9)).toEqual({ clients: 0, grants: 0, keys: 0, rateLimits: 0, records: 0 })
        // The code and the grant it leaves empty.
        expect(yield* purgeExpired(NOW + 10)).toEqual({ clients: 1, grants: 2, keys: 1, rateLimits: 1, records: 1 })
      }).pipe(Effect.provide(layerMemory)),
    ))
})

describe("layerPurge", () => {
  it.effect("removes an expired code in the background, without a manual call", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* TestClock.setTime(NOW * 1000)
        const context = yield* Layer.build(Layer.provideMerge(layerPurge({ every: "1 minute" }), layerMemory))
        const grants = Context.get(context, GrantStore)
        const now = yield* seconds
        const expired = newCode({ issued_at: now - 120, expires_at: now - 60 })
        const { grant_id } = yield* grants.createCode(expired)
        // Another user's, so the expired code's grant is left empty.
        const live = newCode({ subject: "bob", issued_at: now, expires_at: now + 3600 })
        yield* grants.createCode(live)
        // Right after creation the code is still there, only expired.
        expect(yield* Effect.flip(grants.consumeCode(expired.code, yield* seconds))).toEqual(
          new CodeExpired({ grant_id }),
        )

        // The next round, one minute later, deletes it.
        yield* TestClock.adjust("1 minute")
        expect(yield* Effect.flip(grants.consumeCode(expired.code, yield* seconds))).toEqual(new CodeNotFound())
        expect(yield* Effect.flip(grants.getGrant(grant_id))).toMatchObject({ _tag: "GrantNotFound" })
        expect((yield* grants.consumeCode(live.code, yield* seconds)).expires_at).toBe(live.expires_at)
      }),
    ),
  )

  it.effect("keeps running after a failed round, and stops when its scope closes", () =>
    Effect.gen(function* () {
      let rounds = 0
      // A grant store whose purge fails on the first two rounds, as a database that is briefly unreachable would.
      const flaky = Layer.effect(
        GrantStore,
        Effect.map(GrantStore, (inner) =>
          GrantStore.of({
            ...inner,
            purgeExpired: (now) =>
              Effect.suspend(() => {
                rounds++
                return rounds <= 2
                  ? Effect.fail(
                      new StorageError({ operation: "GrantStore.purgeExpired", message: "connection refused" }),
                    )
                  : inner.purgeExpired(now)
              }),
          }),
        ),
      ).pipe(Layer.provide(GrantStore.layerMemory))
      const stores = Layer.mergeAll(ClientStore.layerMemory, flaky, KeyStore.layerMemory)

      const warnings: Array<unknown> = []
      const capture = Logger.layer([
        Logger.make(({ logLevel, message }) => {
          if (logLevel === "Warn") warnings.push(message)
        }),
      ])

      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(Layer.provideMerge(layerPurge({ every: "1 minute" }), stores))
          // The first round runs at once, the next four one minute apart.
          yield* TestClock.adjust("4 minutes")
          expect(rounds).toBe(5)
        }),
      ).pipe(Effect.provide(capture))
      expect(warnings.slice(0, 2)).toEqual(
        Array.from({ length: 2 }, () => [
          "storage purge failed; retrying at the next interval",
          new StorageError({ operation: "GrantStore.purgeExpired", message: "connection refused" }),
        ]),
      )
      expect(warnings).toHaveLength(2)
      const atClose = rounds
      yield* TestClock.adjust("10 minutes")
      expect(rounds).toBe(atClose)
    }),
  )
})
