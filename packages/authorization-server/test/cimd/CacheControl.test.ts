import { HttpCache } from "@keyway/core"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { CacheControl } from "../../src/cimd/index.js"

const NOW = 1_800_000_000
const http = (seconds: number) => new Date(seconds * 1000).toUTCString()

// The freshness rules the resolver relies on, read through core, which owns them.
describe("HttpCache.freshness", () => {
  // [headers, remaining freshness in seconds (undefined = not stated)]
  const table: ReadonlyArray<readonly [Record<string, string>, number | undefined]> = [
    [{}, undefined],
    [{ "cache-control": "max-age=600" }, 600],
    [{ "cache-control": "public, max-age=600" }, 600],
    [{ "cache-control": 'max-age="600"' }, 600],
    [{ "cache-control": "private, max-age=120" }, 120],
    [{ "cache-control": "MAX-AGE=60" }, 60],
    [{ "cache-control": "max-age=600, max-age=5" }, 600],
    [{ "cache-control": "max-age=600", age: "100" }, 500],
    [{ "cache-control": "max-age=60", age: "100" }, 0],
    [{ "cache-control": "max-age=abc" }, 0],
    [{ "cache-control": "max-age=-5" }, 0],
    [{ "cache-control": "no-store" }, 0],
    [{ "cache-control": "no-cache" }, 0],
    [{ "cache-control": 'no-cache="set-cookie", max-age=600' }, 0],
    [{ "cache-control": "max-age=600, no-store" }, 0],
    [{ "cache-control": "s-maxage=600" }, undefined],
    [{ expires: http(NOW + 900), date: http(NOW) }, 900],
    [{ expires: http(NOW + 900), date: http(NOW - 100) }, 1000],
    [{ expires: http(NOW + 900) }, 900],
    [{ expires: http(NOW + 900), date: http(NOW), age: "50" }, 850],
    [{ expires: http(NOW - 10), date: http(NOW) }, 0],
    [{ expires: "0" }, 0],
    [{ expires: "not a date" }, 0],
    [{ expires: http(NOW + 900), "cache-control": "max-age=60" }, 60],
  ]
  it.each(table)("%j -> %s", (headers, expected) => {
    expect(HttpCache.freshness(new Headers(headers), NOW)).toBe(expected)
  })
})

describe("CacheControl.lifetime", () => {
  const bounds = { minSeconds: 300, maxSeconds: 86_400 }
  it.each([
    [{ "cache-control": "max-age=600" }, 600],
    [{ "cache-control": "max-age=10" }, 300],
    [{ "cache-control": "max-age=9999999" }, 86_400],
    [{ "cache-control": "no-store" }, 300],
    [{}, 300],
  ] as const)("%j -> %i", (headers, expected) => {
    expect(CacheControl.lifetime(new Headers(headers), NOW, bounds)).toBe(expected)
  })

  it("defaults to 5 minutes .. 24 hours", () => {
    expect(CacheControl.defaultBounds).toEqual({ minSeconds: 300, maxSeconds: 86_400 })
  })

  it("always lies within the bounds", () => {
    fc.assert(
      fc.property(fc.nat(10_000_000), fc.nat(1000), fc.nat(100_000), (maxAge, min, span) => {
        const b = { minSeconds: min, maxSeconds: min + span }
        const seconds = CacheControl.lifetime(new Headers({ "cache-control": `max-age=${maxAge}` }), NOW, b)
        expect(seconds).toBeGreaterThanOrEqual(b.minSeconds)
        expect(seconds).toBeLessThanOrEqual(b.maxSeconds)
        if (maxAge >= b.minSeconds && maxAge <= b.maxSeconds) expect(seconds).toBe(maxAge)
      }),
    )
  })
})

describe("HttpCache.parseCacheControl", () => {
  it("reads names case-insensitively and unquotes values", () => {
    expect([...HttpCache.parseCacheControl('No-Cache, max-age="30", ext="a\\"b", public')]).toEqual([
      ["no-cache", undefined],
      ["max-age", "30"],
      ["ext", 'a"b'],
      ["public", undefined],
    ])
    expect([...HttpCache.parseCacheControl(null)]).toEqual([])
  })
})
