import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Descriptions, parseAuthorization } from "../../src/internal/bearer.js"

describe("parseAuthorization", () => {
  it.each([
    [null, { _tag: "None" }],
    [undefined, { _tag: "None" }],
    ["", { _tag: "None" }],
    [[], { _tag: "None" }],
    ["Bearer abc.def-ghi_~+/==", { _tag: "Token", token: "abc.def-ghi_~+/==" }],
    ["bearer abc", { _tag: "Token", token: "abc" }],
    ["BEARER abc", { _tag: "Token", token: "abc" }],
    ["Bearer   abc  ", { _tag: "Token", token: "abc" }],
    [["Bearer abc"], { _tag: "Token", token: "abc" }],
    ["Bearer", { _tag: "Empty" }],
    ["Bearer    ", { _tag: "Empty" }],
    ["Basic dXNlcjpwYXNz", { _tag: "OtherScheme", scheme: "Basic", credentials: "dXNlcjpwYXNz" }],
    ["DPoP abc", { _tag: "OtherScheme", scheme: "DPoP", credentials: "abc" }],
    ["Bearer a b", { _tag: "Malformed", description: Descriptions.multipleTokens }],
    ["Bearer abc, Bearer def", { _tag: "Malformed", description: Descriptions.multipleHeaders }],
    ["Basic x, Bearer def", { _tag: "Malformed", description: Descriptions.multipleHeaders }],
    [["Bearer abc", "Bearer def"], { _tag: "Malformed", description: Descriptions.multipleHeaders }],
    ['Bearer ab"c', { _tag: "Malformed", description: Descriptions.illegalCharacters }],
    ["Bearer a=b", { _tag: "Malformed", description: Descriptions.illegalCharacters }],
    ["Bearer a,b", { _tag: "Malformed", description: Descriptions.illegalCharacters }],
    ["Bearer ä", { _tag: "Malformed", description: Descriptions.illegalCharacters }],
    ["Bear(er x", { _tag: "Malformed", description: Descriptions.malformedHeader }],
  ] as const)("%j", (input, expected) => {
    expect(parseAuthorization(input as string | ReadonlyArray<string> | null | undefined)).toEqual(expected)
  })

  it("accepts every b64token and returns it unchanged", () => {
    const b64token = fc
      .tuple(
        fc.stringMatching(/^[A-Za-z0-9\-._~+/]{1,40}$/),
        fc.integer({ min: 0, max: 3 }).map((n) => "=".repeat(n)),
      )
      .map(([a, b]) => a + b)
    fc.assert(
      fc.property(b64token, fc.constantFrom("Bearer", "bearer", "BeArEr"), (token, scheme) => {
        expect(parseAuthorization(`${scheme} ${token}`)).toEqual({ _tag: "Token", token })
      }),
    )
  })

  it("never yields a token containing characters outside the b64token alphabet", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 30 }), (rest) => {
        const result = parseAuthorization(`Bearer ${rest}`)
        if (result._tag === "Token") expect(result.token).toMatch(/^[A-Za-z0-9\-._~+/]+=*$/)
      }),
    )
  })
})
