import { Context, Effect, Layer, Logger, Schedule } from "effect"
import { describe, expect, it } from "vitest"
import {
  ClientStore,
  CodeExpired,
  CodeNotFound,
  GrantStore,
  KeyStore,
  layerMemory,
  layerPurge,
  purgeExpired,
  StorageError,
} from "../../src/storage/index.js"
import { NOW, newClient, newCode, signingKey } from "./contract.js"

const seconds = () => Math.floor(Date.now() / 1000)

/** Re-runs `check` every 20 ms until it holds; fails after a generous bound so a broken job cannot hang the run. */
const eventually = <E, R>(check: Effect.Effect<boolean, E, R>) =>
  Effect.repeat(check, { until: (ok) => ok, schedule: Schedule.spaced("20 millis") }).pipe(
    Effect.timeoutOrElse({
      duration: "10 seconds",
      orElse: () => Effect.die(new Error("condition not met within 10 s")),
    }),
  )

describe("purgeExpired", () => {
  it("purges all three stores and reports what each removed", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        yield* (yield* ClientStore).create(
          newClient({ client_id: "cached", origin: "metadata-document", expires_at: NOW + 10 }),
        )
        yield* (yield* KeyStore).add(signingKey("old", { status: "retired", retires_at: NOW + 10 }))
        yield* (yield* GrantStore).createCode(newCode({ expires_at: NOW + 10 }))
        expect(yield* purgeExpired(NOW + 9)).toEqual({ clients: 0, grants: 0, keys: 0 })
        // The code and the grant it leaves empty.
        expect(yield* purgeExpired(NOW + 10)).toEqual({ clients: 1, grants: 2, keys: 1 })
      }).pipe(Effect.provide(layerMemory)),
    ))
})

describe("layerPurge", () => {
  it("removes an expired code in the background, without a manual call", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const context = yield* Layer.build(Layer.provideMerge(layerPurge({ every: "50 millis" }), layerMemory))
          const grants = Context.get(context, GrantStore)
          const expired = newCode({ issued_at: seconds() - 120, expires_at: seconds() - 60 })
          const { grant_id } = yield* grants.createCode(expired)
          const live = newCode({ issued_at: seconds(), expires_at: seconds() + 3600 })
          yield* grants.createCode(live)
          // Right after creation the code is still there, only expired.
          expect(yield* Effect.flip(grants.consumeCode(expired.code, seconds()))).toEqual(new CodeExpired({ grant_id }))

          yield* eventually(
            Effect.map(
              Effect.flip(grants.consumeCode(expired.code, seconds())),
              (error) => error._tag === "CodeNotFound",
            ),
          )
          expect(yield* Effect.flip(grants.consumeCode(expired.code, seconds()))).toEqual(new CodeNotFound())
          expect(yield* Effect.flip(grants.getGrant(grant_id))).toMatchObject({ _tag: "GrantNotFound" })
          expect((yield* grants.consumeCode(live.code, seconds())).expires_at).toBe(live.expires_at)
        }),
      ),
    ))

  it("keeps running after a failed round, and stops when its scope closes", async () => {
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
                ? Effect.fail(new StorageError({ operation: "GrantStore.purgeExpired", message: "connection refused" }))
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

    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(Layer.provideMerge(layerPurge({ every: "20 millis" }), stores))
          yield* eventually(Effect.sync(() => rounds >= 5))
        }),
      ).pipe(Effect.provide(capture)),
    )
    expect(warnings.slice(0, 2)).toEqual(
      Array.from({ length: 2 }, () => [
        "storage purge failed; retrying at the next interval",
        new StorageError({ operation: "GrantStore.purgeExpired", message: "connection refused" }),
      ]),
    )
    expect(warnings).toHaveLength(2)
    const atClose = rounds
    await Effect.runPromise(Effect.sleep("200 millis"))
    expect(rounds).toBe(atClose)
  })
})
