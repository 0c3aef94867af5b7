import * as Result from "effect/Result"
import { describe, expect, it } from "vitest"
import * as TokenResponse from "../src/TokenResponse.js"

const URL = "https://as.example.com/token"

const problemOf = (status: number, json: unknown, expected?: TokenResponse.Expected) => {
  const result = TokenResponse.process(URL, status, json, expected)
  return Result.isFailure(result) ? result.failure : result.success
}

describe("TokenResponse.process (RFC 6749 §5, RFC 8693 §2.2)", () => {
  it("returns a successful response, token_type compared case-insensitively", () => {
    const ok = { access_token: "at", token_type: "bearer", expires_in: 60, scope: "a b", refresh_token: "rt" }
    expect(problemOf(200, ok)).toEqual(ok)
  })

  it("an error response carries its code and description", () => {
    expect(problemOf(400, { error: "invalid_grant", error_description: "code expired" })).toEqual(
      new TokenResponse.TokenResponseProblem({
        reason: "error-response",
        url: URL,
        status: 400,
        error: "invalid_grant",
        description: "code expired",
        message: `the token endpoint ${URL} answered HTTP 400 invalid_grant: code expired`,
      }),
    )
    expect(problemOf(503, undefined)).toEqual(
      new TokenResponse.TokenResponseProblem({
        reason: "error-response",
        url: URL,
        status: 503,
        message: `the token endpoint ${URL} answered HTTP 503 without an OAuth error code`,
      }),
    )
  })

  it.each([
    ["no body", undefined],
    ["an array", []],
    ["no access_token", { token_type: "Bearer" }],
    ["an empty access_token", { access_token: "", token_type: "Bearer" }],
  ])("%s: missing-access-token", (_name, json) => {
    expect(problemOf(200, json)).toEqual(
      new TokenResponse.TokenResponseProblem({
        reason: "missing-access-token",
        url: URL,
        status: 200,
        message: `the token response from ${URL} has no access_token; the authorization server must return one (RFC 6749 §5.1)`,
      }),
    )
  })

  it("a token type the caller cannot use", () => {
    expect(problemOf(200, { access_token: "at", token_type: "DPoP" })).toMatchObject({
      reason: "unsupported-token-type",
      message: `the token response from ${URL} has token_type "DPoP"; only Bearer tokens can be used`,
    })
    expect(problemOf(200, { access_token: "at" })).toMatchObject({
      reason: "unsupported-token-type",
      message: `the token response from ${URL} has no token_type (RFC 6749 §5.1)`,
    })
    expect(problemOf(200, { access_token: "at", token_type: "DPoP" }, { tokenType: (t) => t === "DPoP" })).toEqual({
      access_token: "at",
      token_type: "DPoP",
    })
  })

  it("a token exchange's issued_token_type", () => {
    const expected = { issuedTokenType: "urn:ietf:params:oauth:token-type:id-jag" }
    expect(problemOf(200, { access_token: "at", token_type: "N_A" }, { ...expected, tokenType: () => true })).toEqual(
      new TokenResponse.TokenResponseProblem({
        reason: "unexpected-issued-token-type",
        url: URL,
        status: 200,
        message: `the token response from ${URL} has issued_token_type null, not urn:ietf:params:oauth:token-type:id-jag`,
      }),
    )
    const exchanged = { access_token: "at", token_type: "N_A", issued_token_type: expected.issuedTokenType }
    expect(problemOf(200, exchanged, { ...expected, tokenType: () => true })).toEqual(exchanged)
  })

  it("a response that fails the schema, unless the caller does not check it", () => {
    const stringExpiry = { access_token: "at", token_type: "Bearer", expires_in: "3600" }
    expect(problemOf(200, stringExpiry)).toMatchObject({
      reason: "invalid-document",
      message: expect.stringMatching(
        new RegExp(`^the token response from ${URL} is invalid: token response: "expires_in" `),
      ),
    })
    expect(problemOf(200, stringExpiry, { schema: false })).toEqual(stringExpiry)
  })
})
