import { Effect, Result } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Scope from "../src/Scope.js"

describe("Scope.parse", () => {
  it.each([
    ["read", ["read"]],
    ["files:read files:write user:profile:write", ["files:read", "files:write", "user:profile:write"]],
    ["openid profile email offline_access", ["openid", "profile", "email", "offline_access"]],
    ["https://api.example.com/read mcp:tools", ["https://api.example.com/read", "mcp:tools"]],
    // Every scope-token character class: %x21, %x23-5B, %x5D-7E.
    ["! #[ ]~ A_z", ["!", "#[", "]~", "A_z"]],
    // Runs of spaces and leading or trailing spaces are tolerated.
    ["  read   write ", ["read", "write"]],
    // Repeats keep their first position.
    ["write read write", ["write", "read"]],
    // Scopes are case-sensitive.
    ["Read read", ["Read", "read"]],
    ["", []],
    ["   ", []],
  ] as const)("%j -> %j", (value, scopes) => {
    expect(Scope.parse(value)).toEqual(scopes)
    expect(Scope.validate(value)).toEqual(Result.succeed(scopes))
  })

  it.each([null, undefined])("gives [] for %s", (value) => {
    expect(Scope.parse(value)).toEqual([])
  })

  it.each([
    ["read\twrite", "character U+0009 at position 4 is not allowed in a scope token"],
    ["read\nwrite", "character U+000A at position 4 is not allowed in a scope token"],
    ['say"hi"', 'character "\\"" (U+0022) at position 3 is not allowed in a scope token'],
    ["back\\slash", 'character "\\\\" (U+005C) at position 4 is not allowed in a scope token'],
    ["caf\u00e9", "character U+00E9 at position 3 is not allowed in a scope token"],
    ["read\u00a0write", "character U+00A0 at position 4 is not allowed in a scope token"],
    ["del\u007f", "character U+007F at position 3 is not allowed in a scope token"],
  ])("refuses %j", (value, detail) => {
    const message = `Invalid scope ${JSON.stringify(value)}: ${detail}`
    const result = Scope.validate(value)
    expect(Result.isFailure(result)).toBe(true)
    if (Result.isFailure(result)) {
      expect(result.failure).toBeInstanceOf(Scope.InvalidScope)
      expect(result.failure._tag).toBe("InvalidScope")
      expect(result.failure.input).toBe(value)
      expect(result.failure.message).toBe(message)
    }
    expect(() => Scope.parse(value)).toThrow(message)
  })

  it("decodes as an Effect", async () => {
    expect(await Effect.runPromise(Scope.decode("a b a"))).toEqual(["a", "b"])
    const error = await Effect.runPromise(Effect.flip(Scope.decode('a"')))
    expect(error).toBeInstanceOf(Scope.InvalidScope)
    expect(error.message).toBe(
      'Invalid scope "a\\"": character "\\"" (U+0022) at position 1 is not allowed in a scope token',
    )
  })
})

describe("Scope.format", () => {
  it.each([
    [["read", "write"], "read write"],
    [["write", "read", "write"], "write read"],
    [[], ""],
    ["b a b", "b a"],
  ] as const)("%j -> %j", (scopes, value) => {
    expect(Scope.format(scopes)).toBe(value)
  })

  it("accepts any iterable", () => {
    expect(Scope.format(new Set(["x", "y"]))).toBe("x y")
  })

  it.each([
    ["", 'Invalid scope "": not a single scope token (RFC 6749 §3.3)'],
    ["two words", 'Invalid scope "two words": not a single scope token (RFC 6749 §3.3)'],
    ['q"', 'Invalid scope "q\\"": not a single scope token (RFC 6749 §3.3)'],
  ])("refuses the item %j", (item, message) => {
    expect(() => Scope.format(["ok", item])).toThrow(message)
    expect(() => Scope.format(["ok", item])).toThrow(Scope.InvalidScope)
  })
})

describe("Scope.isScopeToken", () => {
  it("accepts exactly %x21 / %x23-5B / %x5D-7E", () => {
    for (let code = 0; code <= 0x100; code++) {
      const c = String.fromCharCode(code)
      const expected = code === 0x21 || (code >= 0x23 && code <= 0x5b) || (code >= 0x5d && code <= 0x7e)
      expect(Scope.isScopeToken(c)).toBe(expected)
    }
    expect(Scope.isScopeToken("")).toBe(false)
    expect(Scope.isScopeToken("a b")).toBe(false)
  })
})

describe("Scope set operations", () => {
  it.each([
    ["dedupe", Scope.dedupe(["b", "a", "b", "c", "a"]), ["b", "a", "c"]],
    ["union", Scope.union(["b", "a"], ["c", "a", "d"]), ["b", "a", "c", "d"]],
    ["difference", Scope.difference(["b", "a", "c", "a"], ["a"]), ["b", "c"]],
    ["intersection", Scope.intersection(["c", "b", "a", "c"], ["a", "c"]), ["c", "a"]],
    ["union of strings", Scope.union("read write", "write admin"), ["read", "write", "admin"]],
    ["difference of strings", Scope.difference("read write", "write"), ["read"]],
  ])("%s", (_, actual, expected) => {
    expect(actual).toEqual(expected)
  })

  it.each([
    [["read", "write"], ["read"], true],
    [["read", "write"], [], true],
    [[], [], true],
    [["read"], ["read", "write"], false],
    [["Read"], ["read"], false],
    ["files:read files:write", "files:write", true],
    ["files:read", "files:read files:write", false],
  ] as const)("containsAll(%j, %j) is %s", (granted, required, expected) => {
    expect(Scope.containsAll(granted, required)).toBe(expected)
  })

  it("reads a plain string argument as a scope string, and refuses an invalid one", () => {
    expect(Scope.dedupe("a a b")).toEqual(["a", "b"])
    expect(() => Scope.containsAll('a"', "a")).toThrow(Scope.InvalidScope)
  })
})

const scopeToken = fc.string({
  unit: fc.constantFrom(..."abcAB:/._-!#[]~{}0"),
  minLength: 1,
  maxLength: 6,
})
const scopes = fc.array(scopeToken, { maxLength: 8 })

describe("Scope properties", () => {
  it("format then parse gives the de-duplicated list", () => {
    fc.assert(
      fc.property(scopes, (list) => {
        expect(Scope.parse(Scope.format(list))).toEqual(Scope.dedupe(list))
      }),
    )
  })

  it("dedupe keeps first occurrences in order and no repeats", () => {
    fc.assert(
      fc.property(scopes, (list) => {
        const out = Scope.dedupe(list)
        expect(new Set(out).size).toBe(out.length)
        expect(out).toEqual(list.filter((s, i) => list.indexOf(s) === i))
      }),
    )
  })

  it("union, difference and intersection behave as ordered sets", () => {
    fc.assert(
      fc.property(scopes, scopes, (a, b) => {
        const union = Scope.union(a, b)
        const difference = Scope.difference(a, b)
        const intersection = Scope.intersection(a, b)
        expect(union).toEqual(Scope.dedupe([...a, ...b]))
        expect(Scope.containsAll(union, a)).toBe(true)
        expect(Scope.containsAll(union, b)).toBe(true)
        expect(difference.some((s) => b.includes(s))).toBe(false)
        expect(intersection.every((s) => a.includes(s) && b.includes(s))).toBe(true)
        // a splits into the part outside b and the part inside it, each in a's order.
        expect([...difference, ...intersection].sort()).toEqual([...Scope.dedupe(a)].sort())
        expect(difference).toEqual(Scope.dedupe(a).filter((s) => !b.includes(s)))
        expect(intersection).toEqual(Scope.dedupe(a).filter((s) => b.includes(s)))
        expect(Scope.containsAll(a, b)).toBe(Scope.difference(b, a).length === 0)
      }),
    )
  })

  it("parse never throws anything but InvalidScope", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary-ascii" }), (value) => {
        const result = Scope.validate(value)
        if (Result.isSuccess(result)) {
          for (const s of result.success) expect(Scope.isScopeToken(s)).toBe(true)
        } else {
          expect(result.failure).toBeInstanceOf(Scope.InvalidScope)
          expect(/[^\x20\x21\x23-\x5b\x5d-\x7e]/.test(value)).toBe(true)
        }
      }),
    )
  })
})
