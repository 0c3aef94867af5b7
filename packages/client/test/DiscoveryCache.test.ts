import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { freshness, memory } from "../src/DiscoveryCache.js"

describe("freshness", () => {
  it("honours max-age, no-store and no-cache, else the default", () => {
    expect(freshness(new Headers({ "cache-control": "public, max-age=120" }), 300)).toBe(120)
    expect(freshness(new Headers({ "cache-control": "no-store" }), 300)).toBe(0)
    expect(freshness(new Headers({ "cache-control": "max-age=60, no-cache" }), 300)).toBe(0)
    expect(freshness(new Headers(), 300)).toBe(300)
  })
})

describe("memory cache", () => {
  it("returns entries while fresh and forgets them after", async () => {
    let now = 1_000
    const cache = memory(() => now)
    await Effect.runPromise(cache.set("u", { a: 1 }, 10))
    expect(await Effect.runPromise(cache.get("u"))).toEqual({ a: 1 })
    now += 9_999
    expect(await Effect.runPromise(cache.get("u"))).toEqual({ a: 1 })
    now += 1
    expect(await Effect.runPromise(cache.get("u"))).toBeUndefined()
  })

  it("does not store entries with no freshness, and forgets on invalidate", async () => {
    const cache = memory(() => 0)
    await Effect.runPromise(cache.set("u", 1, 0))
    expect(await Effect.runPromise(cache.get("u"))).toBeUndefined()
    await Effect.runPromise(cache.set("v", 1, 5))
    await Effect.runPromise(cache.invalidate("v"))
    expect(await Effect.runPromise(cache.get("v"))).toBeUndefined()
  })
})
