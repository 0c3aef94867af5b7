import { Wire } from "@keyway/core"
import { Result } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { claimTypesHold } from "../../src/internal/claims.js"

// The claims the verifier reads, as RFC 9068 §2.2 types them in core's schema, with the ones tokens were always
// accepted without made optional.
const VerifiedClaims = Wire.JwtAccessTokenClaims.pick({
  iss: true,
  exp: true,
  aud: true,
  sub: true,
  client_id: true,
  iat: true,
  nbf: true,
  jti: true,
}).partial({ sub: true, client_id: true, iat: true, jti: true })

const schemaHolds = (claims: Record<string, unknown>): boolean =>
  Result.isSuccess(Wire.validate(VerifiedClaims, claims, Wire.Documents.jwtAccessTokenClaims))

// JSON values a claim may hold, leaning towards the edges: empty strings, overflowing numbers, mixed arrays.
const value = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.constantFrom("", "x", "https://as.example.com"),
  fc.constantFrom(0, 1.5, -3, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  fc.boolean(),
  fc.array(fc.oneof(fc.constantFrom("", "a"), fc.integer(), fc.constant(null)), { maxLength: 3 }),
  fc.constant({}),
)
const names = ["iss", "exp", "aud", "sub", "client_id", "iat", "nbf", "jti", "scope"] as const

describe("claimTypesHold", () => {
  it("agrees with core's RFC 9068 schema on any claims", () => {
    fc.assert(
      fc.property(fc.record(Object.fromEntries(names.map((n) => [n, value])), { requiredKeys: [] }), (drawn) => {
        const claims = Object.fromEntries(Object.entries(drawn).filter(([, v]) => v !== undefined))
        expect(claimTypesHold(claims)).toBe(schemaHolds(claims))
      }),
      { numRuns: 3000 },
    )
  })

  it("accepts the usual access token and refuses each wrong type", () => {
    const good = { iss: "https://as.example.com", exp: 2e9, aud: ["r"], sub: "u", client_id: "c", iat: 1, jti: "j" }
    expect(claimTypesHold(good)).toBe(true)
    expect(schemaHolds(good)).toBe(true)
    for (const wrong of [
      { iss: "" },
      { exp: "1" },
      { aud: [1] },
      { sub: "" },
      { iat: JSON.parse("1e999") },
      { nbf: null },
    ]) {
      expect(claimTypesHold({ ...good, ...wrong })).toBe(false)
      expect(schemaHolds({ ...good, ...wrong })).toBe(false)
    }
  })
})
