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
    ["no iss", { ...good, iss: undefined }, "the assertion has no iss"],
    [
      "another iss",
      { ...good, iss: "https://evil.example.com" },
      "the assertion's iss https://evil.example.com is not https://idp.example.com",
    ],
    ["no sub", { ...good, sub: "" }, "the assertion has no sub"],
    ["no aud", { ...good, aud: [] }, "the assertion has no aud"],
    [
      "another aud",
      { ...good, aud: "https://other.example.com" },
      "the assertion's aud does not name https://as.example.com",
    ],
    ["no exp", { ...good, exp: "soon" }, "the assertion has no exp"],
    ["expired beyond the skew", { ...good, exp: now - 30 }, "the assertion has expired"],
    ["nbf ahead", { ...good, nbf: now + 31 }, "the assertion is not valid yet (nbf)"],
    ["iat not a time", { ...good, iat: "now" }, "the assertion's iat is not a time"],
    ["no iat", { ...good, iat: undefined }, "the assertion has no iat"],
    ["iat ahead", { ...good, iat: now + 31 }, "the assertion's iat is in the future"],
    ["too long a life", { ...good, exp: good.iat + 301 }, "the assertion lives longer than 300 seconds"],
    ["jti not a string", { ...good, jti: 7 }, "the assertion's jti is not a string"],
    ["no jti", { ...good, jti: undefined }, "the assertion has no jti"],
  ]
  it.each(refused)("refuses %s", (_, claims, message) => {
    expect(Assertion.check(claims, policy)).toEqual(Result.fail(message))
  })
})
