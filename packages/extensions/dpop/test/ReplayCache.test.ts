import { describe, expect, it } from "vitest"
import { memoryReplayCache } from "../src/resource-server.js"

describe("memoryReplayCache (RFC 9449 §11.1)", () => {
  it("refuses a jti seen before until its time has passed", () => {
    const cache = memoryReplayCache(10)
    expect(cache.remember("a", 160, 100)).toBe(true)
    expect(cache.remember("a", 160, 150)).toBe(false)
    expect(cache.remember("a", 220, 161)).toBe(true)
  })

  it("is bounded in time: expired entries are dropped as new ones come", () => {
    const cache = memoryReplayCache(100)
    for (let i = 0; i < 50; i++) cache.remember(`old-${i}`, 110, 100)
    expect(cache.size()).toBe(50)
    cache.remember("new", 200, 111)
    expect(cache.size()).toBe(1)
  })

  it("is bounded in memory: beyond maxEntries the oldest go first", () => {
    const cache = memoryReplayCache(3)
    for (const jti of ["a", "b", "c", "d"]) expect(cache.remember(jti, 1000, 100)).toBe(true)
    expect(cache.size()).toBe(3)
    expect(cache.remember("d", 1000, 100)).toBe(false)
    // "a" was evicted early: remembered again (its proof's iat still bounds how long it can be replayed).
    expect(cache.remember("a", 1000, 100)).toBe(true)
  })
})
