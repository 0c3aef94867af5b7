import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { Assertion } from "../src/index.js"

const now = 1_800_000_000
const policy: Assertion.ClaimsPolicy = {
  issuer: "https://idp.example.com",
  audiences: ["https://as.example.com"],
  now,
  clockSkew: 30,
  maxLifetime: 300,
  requireIat: true,
  requireJti: true,
}
const good = {
  iss: "https://idp.example.com",
  sub: "alice",
  aud: "https://as.example.com",
  exp: now + 240,
  iat: now - 10,
  jti: "j1",
}

describe("Assertion.check (RFC 7523 §3)", () => {
  it("accepts well-formed claims, aud as a string or an array", () => {
    expect(Assertion.check(good, policy)).toEqual(
      Result.succeed({ iss: good.iss, sub: "alice", exp: good.exp, iat: good.iat, jti: "j1" }),
    )
    expect(Result.isSuccess(Assertion.check({ ...good, aud: ["x", "https://as.example.com"] }, policy))).toBe(true)
    // Within the skew on both ends.
    expect(Result.isSuccess(Assertion.check({ ...good, exp: now - 29 }, policy))).toBe(true)
    expect(Result.isSuccess(Assertion.check({ ...good, iat: now + 30, exp: now + 60 }, policy))).toBe(true)
  })

  it("accepts a missing iat or jti when the policy allows it", () => {
    const { iat: _iat, jti: _jti, ...bare } = good
    expect(Assertion.check(bare, { ...policy, requireIat: false, requireJti: false })).toEqual(
      Result.succeed({ iss: good.iss, sub: "alice", exp: good.exp, iat: undefined, jti: undefined }),
    )
  })

  const refused: ReadonlyArray<[string, Record<string, unknown>, string]> = [
    ["no iss", { ...good, iss: undefined }, "the assertion has no iss claim (RFC 7523 section 3 item 1)"],
    [
      "another iss",
      { ...good, iss: "https://evil.example.com" },
      "the assertion's iss https://evil.example.com is not https://idp.example.com",
    ],
    ["no sub", { ...good, sub: "" }, "the assertion has no sub claim (RFC 7523 section 3 item 2)"],
    ["no aud", { ...good, aud: [] }, "the assertion has no aud claim (RFC 7523 section 3 item 3)"],
    [
      "another aud",
      { ...good, aud: "https://other.example.com" },
      "the assertion's aud does not name this authorization server (accepted: https://as.example.com)",
    ],
    ["no exp", { ...good, exp: "soon" }, "the assertion has no exp claim (RFC 7523 section 3 item 4)"],
    ["expired beyond the skew", { ...good, exp: now - 30 }, `the assertion expired at ${now - 30} (clock skew 30 s)`],
    ["nbf not a time", { ...good, nbf: "later" }, "the assertion's nbf is not a number"],
    ["nbf ahead", { ...good, nbf: now + 31 }, `the assertion is not valid before ${now + 31} (clock skew 30 s)`],
    ["iat not a time", { ...good, iat: "now" }, "the assertion's iat is not a number"],
    ["no iat", { ...good, iat: undefined }, "the assertion has no iat claim"],
    ["iat ahead", { ...good, iat: now + 31 }, `the assertion's iat ${now + 31} is in the future (clock skew 30 s)`],
    [
      "too long a life",
      { ...good, exp: good.iat + 301 },
      "the assertion lives 301 s (exp - iat), longer than the 300 s accepted",
    ],
    ["jti not a string", { ...good, jti: 7 }, "the assertion's jti is not a string"],
    ["no jti", { ...good, jti: undefined }, "the assertion has no jti claim (RFC 7523 section 3 item 7)"],
  ]
  it.each(refused)("refuses %s", (_, claims, message) => {
    expect(Assertion.check(claims, policy)).toEqual(Result.fail(message))
  })

  it("bounds the age of an assertion when asked to (maxAge), and the life of one without iat", () => {
    const old = { ...good, iat: now - 100, exp: now + 100 }
    expect(Assertion.check(old, { ...policy, maxAge: 69 })).toEqual(
      Result.fail(`the assertion was issued more than 69 s ago (iat ${now - 100})`),
    )
    expect(Result.isSuccess(Assertion.check(old, { ...policy, maxAge: 70 }))).toBe(true)
    const { iat: _iat, ...noIat } = { ...good, exp: now + 301 }
    expect(Assertion.check(noIat, { ...policy, requireIat: false })).toEqual(
      Result.fail("the assertion lives 301 s (exp - now), longer than the 300 s accepted"),
    )
  })
})
