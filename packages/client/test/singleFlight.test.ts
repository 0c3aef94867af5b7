import { it } from "@effect/vitest"
import { Cache, Cause, Deferred, Effect, Exit, Fiber } from "effect"
import { describe, expect } from "vitest"
import { ForServer, singleFlight } from "../src/internal/singleFlight.js"

describe("singleFlight", () => {
  it.effect("shares a run among the callers for its server that arrive while it runs, and keeps nothing after", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const runs: Array<string> = []
      const flights = yield* singleFlight((key: string, value: number) =>
        Effect.sync(() => runs.push(`${key} ${value}`)).pipe(
          Effect.andThen(Deferred.await(gate)),
          Effect.as(`${key} ${value}`),
        ),
      )
      const callers = yield* Effect.forEach(
        [
          ["a", 1],
          ["a", 2],
          ["b", 3],
          ["a", 4],
        ] as const,
        ([key, value]) => Effect.forkChild(Cache.get(flights, new ForServer(key, value)), { startImmediately: true }),
      )
      // One run per server, with the first caller's value.
      expect(runs).toEqual(["a 1", "b 3"])
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Effect.forEach(callers, Fiber.join)).toEqual(["a 1", "a 1", "b 3", "a 1"])
      // The next caller runs anew, with its own value.
      expect(yield* Cache.get(flights, new ForServer("a", 5))).toBe("a 5")
      expect(runs).toEqual(["a 1", "b 3", "a 5"])
    }),
  )

  it.effect("shares a failure among the callers waiting for it, and does not keep it", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      let runs = 0
      const flights = yield* singleFlight((_key: string, fail: boolean) =>
        Effect.sync(() => runs++).pipe(
          Effect.andThen(Deferred.await(gate)),
          Effect.andThen(fail ? Effect.fail("refused") : Effect.succeed("fresh")),
        ),
      )
      const callers = yield* Effect.forEach([true, false], (fail) =>
        Effect.forkChild(Cache.get(flights, new ForServer("a", fail)), { startImmediately: true }),
      )
      yield* Deferred.succeed(gate, undefined)
      const exits = yield* Effect.forEach(callers, Fiber.await)
      expect(exits.map((exit) => (Exit.isFailure(exit) ? Cause.squash(exit.cause) : exit.value))).toEqual([
        "refused",
        "refused",
      ])
      expect(runs).toBe(1)
      expect(yield* Cache.get(flights, new ForServer("a", false))).toBe("fresh")
      expect(runs).toBe(2)
    }),
  )
})
