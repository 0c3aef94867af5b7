import { describe, expect, it } from "vitest"
import * as HttpCache from "../src/HttpCache.js"

const NOW = 1_800_000_000
const http = (seconds: number) => new Date(seconds * 1000).toUTCString()

describe("HttpCache.parseCacheControl (RFC 9111 §5.2)", () => {
  it.each<[string | null, Record<string, string | undefined>]>([
    [null, {}],
    ["max-age=600", { "max-age": "600" }],
    ["public, max-age=600, must-revalidate", { public: undefined, "max-age": "600", "must-revalidate": undefined }],
    ['no-cache="set-cookie, x", max-age=5', { "no-cache": "set-cookie, x", "max-age": "5" }],
    ['private="a\\"b"', { private: 'a"b' }],
    ["MAX-AGE=60, max-age=5", { "max-age": "60" }],
  ])("%j", (value, expected) => {
    expect(Object.fromEntries(HttpCache.parseCacheControl(value))).toEqual(expected)
  })
})

describe("HttpCache.freshness (RFC 9111 §4.2.1, §4.2.3)", () => {
  // [headers, remaining freshness in seconds (undefined = not stated)]
  it.each<[Record<string, string>, number | undefined]>([
    [{}, undefined],
    // RFC 9111 §5.2.2.1: max-age is the freshness lifetime.
    [{ "cache-control": "max-age=600" }, 600],
    [{ "cache-control": 'max-age="600"' }, 600],
    [{ "cache-control": "private, max-age=120" }, 120],
    [{ "cache-control": "max-age=600, max-age=5" }, 600],
    // §4.2.3: the Age the response arrived with has already been spent.
    [{ "cache-control": "max-age=600", age: "100" }, 500],
    [{ "cache-control": "max-age=60", age: "100" }, 0],
    [{ "cache-control": "max-age=600", age: "junk" }, 600],
    // §1.2.2: an invalid delta-seconds makes the response stale.
    [{ "cache-control": "max-age=abc" }, 0],
    [{ "cache-control": "max-age=-5" }, 0],
    [{ "cache-control": "no-store" }, 0],
    [{ "cache-control": "no-cache" }, 0],
    [{ "cache-control": 'no-cache="set-cookie", max-age=600' }, 0],
    [{ "cache-control": "max-age=600, no-store" }, 0],
    // s-maxage is for shared caches.
    [{ "cache-control": "s-maxage=600" }, undefined],
    // §4.2.1: Expires less Date, else less the time of receipt.
    [{ expires: http(NOW + 900), date: http(NOW) }, 900],
    [{ expires: http(NOW + 900), date: http(NOW - 100) }, 1000],
    [{ expires: http(NOW + 900) }, 900],
    [{ expires: http(NOW + 900), date: "garbage" }, 900],
    [{ expires: http(NOW + 900), date: http(NOW), age: "50" }, 850],
    [{ expires: http(NOW - 10), date: http(NOW) }, 0],
    // §5.3: an invalid Expires, such as "0", means already expired.
    [{ expires: "0" }, 0],
    [{ expires: "not a date" }, 0],
    // §5.3: max-age overrides Expires.
    [{ expires: http(NOW + 900), "cache-control": "max-age=60" }, 60],
    // RFC 9111 §5.3's example date format.
    [{ expires: "Thu, 01 Dec 1994 16:00:00 GMT", date: "Thu, 01 Dec 1994 15:00:00 GMT" }, 3600],
  ])("%j -> %s", (headers, expected) => {
    expect(HttpCache.freshness(new Headers(headers), NOW)).toBe(expected)
  })
})
