import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ExpiringCache } from "../../src/internal/cache.js"

type Op =
  | { readonly op: "set"; readonly key: string; readonly ttl: number }
  | { readonly op: "get" | "delete"; readonly key: string }
  | { readonly op: "clear" }
  | { readonly op: "tick"; readonly ms: number }

const key = fc.constantFrom("a", "b", "c", "d", "e", "f", "g")
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant("set" as const), key, ttl: fc.integer({ min: 1, max: 50 }) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constantFrom("get" as const, "delete" as const), key }) },
  { weight: 1, arbitrary: fc.constant({ op: "clear" as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("tick" as const), ms: fc.integer({ min: 1, max: 20 }) }) },
)

describe("ExpiringCache", () => {
  it("evicts the oldest insertion first; an entry set again counts from its last insertion", () => {
    const cache = new ExpiringCache<number>(3, () => 0)
    cache.set("a", 1, 100)
    cache.set("b", 2, 100)
    cache.set("c", 3, 100)
    cache.set("a", 4, 100)
    cache.set("d", 5, 100)
    expect([cache.get("a"), cache.get("b"), cache.get("c"), cache.get("d")]).toEqual([4, undefined, 3, 5])
    cache.delete("c")
    cache.set("e", 6, 100)
    cache.set("f", 7, 100)
    expect([cache.get("a"), cache.get("d"), cache.get("e"), cache.get("f")]).toEqual([undefined, 5, 6, 7])
  })

  it("holds about the live entries, not maxEntries, when entries keep coming and expiring", () => {
    let now = 0
    const cache = new ExpiringCache<number>(10_000, () => now)
    // Ten new tokens a millisecond, each live for 100 ms: about 1,000 live at any time, 50,000 in all.
    let most = 0
    for (let i = 0; i < 50_000; i++) {
      if (i % 10 === 0) now++
      cache.set(`-token-${i}`, i, now + 100)
      most = Math.max(most, cache.size)
    }
    // An expired entry waits at most one walk round the map (half as many insertions as entries): twice the live.
    expect(most).toBeLessThanOrEqual(2_000)
    expect(cache.get("-token-49999")).toBe(49_999)
    expect(cache.get("-token-48000")).toBeUndefined()
  })

  it("behaves as a map with per-entry expiry that drops its oldest insertion when full, whatever the operations", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 200 }), (max, ops) => {
        let now = 0
        const cache = new ExpiringCache<number>(max, () => now)
        // The model: insertion order kept by a Map, each eviction a fresh walk from its first key; each insertion
        // first looks at the next two keys of a walk round the map and drops them if expired.
        const model = new Map<string, { value: number; expiresAt: number }>()
        let sweep = model.keys()
        let value = 0
        for (const o of ops) {
          if (o.op === "set") {
            value++
            cache.set(o.key, value, now + o.ttl)
            for (let step = 0; step < 2; step++) {
              let next = sweep.next()
              if (next.done === true) {
                sweep = model.keys()
                next = sweep.next()
                if (next.done === true) break
              }
              if (model.get(next.value)!.expiresAt <= now) model.delete(next.value)
            }
            model.delete(o.key)
            while (model.size >= max) model.delete(model.keys().next().value!)
            model.set(o.key, { value, expiresAt: now + o.ttl })
          } else if (o.op === "get") {
            const entry = model.get(o.key)
            const expected = entry === undefined || entry.expiresAt <= now ? undefined : entry.value
            if (entry !== undefined && expected === undefined) model.delete(o.key)
            expect(cache.get(o.key)).toBe(expected)
          } else if (o.op === "delete") {
            cache.delete(o.key)
            model.delete(o.key)
          } else if (o.op === "clear") {
            cache.clear()
            model.clear()
          } else if (o.op === "tick") {
            now += o.ms
          }
          expect(cache.size).toBe(model.size)
        }
      }),
    )
  })
})
