import { it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect } from "vitest"
import { DiscoveryCache } from "../src/DiscoveryCache.js"
import { ttlOf } from "../src/internal/http.js"

describe("ttlOf", () => {
  const now = 1_700_000_000
  it("honours max-age, no-store and no-cache, else the default", () => {
    expect(ttlOf(new Headers({ "cache-control": "public, max-age=120" }), 300, now)).toBe(120)
    expect(ttlOf(new Headers({ "cache-control": "no-store" }), 300, now)).toBe(0)
    expect(ttlOf(new Headers({ "cache-control": "max-age=60, no-cache" }), 300, now)).toBe(0)
    expect(ttlOf(new Headers(), 300, now)).toBe(300)
  })
})

describe("memory cache", () => {
  it.effect("returns entries while fresh and forgets them after", () =>
    Effect.gen(function* () {
      const cache = yield* DiscoveryCache
      yield* TestClock.adjust(1_000)
      yield* cache.set("u", { a: 1 }, 10)
      expect(yield* cache.get("u")).toEqual({ a: 1 })
      yield* TestClock.adjust(9_999)
      expect(yield* cache.get("u")).toEqual({ a: 1 })
      yield* TestClock.adjust(1)
      expect(yield* cache.get("u")).toBeUndefined()
    }).pipe(Effect.provide(DiscoveryCache.layerMemory)),
  )

  it.effect("does not store entries with no freshness, and forgets on invalidate", () =>
    Effect.gen(function* () {
      const cache = yield* DiscoveryCache
      yield* cache.set("u", 1, 0)
      expect(yield* cache.get("u")).toBeUndefined()
      yield* cache.set("v", 1, 5)
      yield* cache.invalidate("v")
      expect(yield* cache.get("v")).toBeUndefined()
    }).pipe(Effect.provide(DiscoveryCache.layerMemory)),
  )
})
