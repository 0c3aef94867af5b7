import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import * as FetchCache from "../../src/cimd/internal/fetchCache.js"

const NOW = 1_800_000_000

const failing = (key: string) => Effect.fail(`no document at ${key}`)
const fetched = (value: string, expiresAt: number) => Effect.succeed({ value, expiresAt })

const load = (
  cache: FetchCache.FetchCache<string, string>,
  key: string,
  now: number,
  fetch: ReturnType<typeof failing>,
) => Effect.runPromise(Effect.exit(cache.load(key, now, fetch)))

describe("FetchCache bounds", () => {
  it("keeps a failure only for its back-off: 2,000 made-up keys failing over 400 s hold the last 5 s of them at most", async () => {
    const cache = FetchCache.make<string, string>({ maxEntries: 1000, failureBackoffSeconds: 5 })
    // Five new keys a second, some beginning with "-" as made-up client IDs may.
    const key = (i: number) => (i % 7 === 0 ? `-${i}` : `https://client${i}.example/metadata.json`)
    let most = 0
    for (let i = 0; i < 2000; i++) {
      expect(await load(cache, key(i), NOW + Math.floor(i / 5), failing(key(i)))).toEqual(
        Exit.fail(`no document at ${key(i)}`),
      )
      most = Math.max(most, cache.size())
    }
    // At any time only the failures of the last 5 s are in force: 25 keys, never the 1,000 of the bound.
    expect(most).toBe(25)
    expect(cache.size()).toBe(25)
    expect(cache.current(key(1999), NOW + 399)).toEqual({
      _tag: "failed",
      error: `no document at ${key(1999)}`,
      until: NOW + 404,
    })
    expect(cache.current(key(1974), NOW + 399)).toBeUndefined()
  })

  it("drops the oldest failures before any value when full, and keeps values while failures come and go", async () => {
    const cache = FetchCache.make<string, string>({ maxEntries: 3, failureBackoffSeconds: 5 })
    await Effect.runPromise(cache.load("value", NOW, fetched("document", NOW + 3600)))
    await load(cache, "-first", NOW, failing("-first"))
    await load(cache, "second", NOW, failing("second"))
    await load(cache, "third", NOW, failing("third"))
    expect(cache.size()).toBe(3)
    expect(cache.current("-first", NOW)).toBeUndefined()
    expect(cache.current("value", NOW)).toEqual({
      _tag: "ok",
      value: "document",
      fetchedAt: NOW,
      expiresAt: NOW + 3600,
    })
    // Many failures later, long after the first ones ended, the value is still there and fewer than three keys are.
    for (let i = 0; i < 100; i++) await load(cache, `later-${i}`, NOW + 10 * (i + 1), failing(`later-${i}`))
    expect(cache.size()).toBe(2)
    expect(cache.current("value", NOW + 1000)).toEqual({
      _tag: "ok",
      value: "document",
      fetchedAt: NOW,
      expiresAt: NOW + 3600,
    })
  })

  it("forget drops a failure as well as a value", async () => {
    const cache = FetchCache.make<string, string>({ maxEntries: 10, failureBackoffSeconds: 5 })
    await Effect.runPromise(cache.load("value", NOW, fetched("document", NOW + 60)))
    await load(cache, "failed", NOW, failing("failed"))
    cache.forget("failed")
    cache.forget("value")
    expect(cache.size()).toBe(0)
    expect(cache.current("failed", NOW)).toBeUndefined()
    expect(cache.current("value", NOW)).toBeUndefined()
  })
})
