import * as Result from "effect/Result"
import { describe, expect, it } from "vitest"
import * as AuthorizationResponse from "../src/AuthorizationResponse.js"

const ISSUER = "https://as.example.com"
const STATE = "s-123"
const AT = "the authorization response at http://127.0.0.1/callback"

const callback = (query: string) => new URL(`http://127.0.0.1/callback?${query}`)

const outcome = (response: URL | URLSearchParams, expected: Partial<AuthorizationResponse.Expected> = {}) => {
  const result = AuthorizationResponse.process(response, { state: STATE, issuer: ISSUER, ...expected })
  return Result.isFailure(result) ? result.failure : result.success
}

const problem = (fields: ConstructorParameters<typeof AuthorizationResponse.AuthorizationResponseProblem>[0]) =>
  new AuthorizationResponse.AuthorizationResponseProblem(fields)

const iss = encodeURIComponent(ISSUER)

describe("AuthorizationResponse.process: a usable response", () => {
  it.each([
    ["with iss, advertised", `code=c1&state=${STATE}&iss=${iss}`, true],
    ["with iss, not advertised", `code=c1&state=${STATE}&iss=${iss}`, false],
    ["without iss, not advertised", `code=c1&state=${STATE}`, false],
  ])("%s: the code", (_name, query, issParameterSupported) => {
    expect(outcome(callback(query), { issParameterSupported })).toEqual({ code: "c1" })
  })

  it("reads bare query parameters the same way", () => {
    expect(outcome(new URLSearchParams({ code: "c1", state: STATE }))).toEqual({ code: "c1" })
  })
})

describe("AuthorizationResponse.process: state", () => {
  it.each([
    ["absent", "code=c1"],
    ["empty", "code=c1&state="],
  ])("%s: state-missing", (_name, query) => {
    expect(outcome(callback(query))).toEqual(
      problem({
        reason: "state-missing",
        message: `${AT} carries no state; it was discarded (it may be forged or from another request)`,
      }),
    )
  })

  it.each([
    ["another request's", "code=c1&state=s-999"],
    ["a prefix of the request's", "code=c1&state=s-12"],
    ["an extension of the request's", `code=c1&state=${STATE}x`],
  ])("%s: state-mismatch", (_name, query) => {
    expect(outcome(callback(query))).toEqual(
      problem({
        reason: "state-mismatch",
        message: `${AT} carries a state that does not match the request; it was discarded (it may be forged or from another request)`,
      }),
    )
  })

  it("a state that does not match is refused before an error response is surfaced", () => {
    expect(outcome(callback("error=access_denied&state=forged"))).toMatchObject({ reason: "state-mismatch" })
  })

  it("messages without the redirect URI when given bare parameters", () => {
    expect(outcome(new URLSearchParams({ code: "c1" }))).toEqual(
      problem({
        reason: "state-missing",
        message:
          "the authorization response carries no state; it was discarded (it may be forged or from another request)",
      }),
    )
  })
})

describe("AuthorizationResponse.process: iss (RFC 9207 §2.4)", () => {
  const mismatch = (value: string) =>
    problem({
      reason: "iss-mismatch",
      iss: value,
      message: `${AT} has iss "${value}" but the request went to "${ISSUER}"; rejected as a possible mix-up attack (RFC 9207)`,
    })

  it.each([
    ["another issuer, advertised", "https://attacker.example", true],
    ["another issuer, not advertised", "https://attacker.example", false],
    ["a trailing slash (no normalisation)", `${ISSUER}/`, true],
    ["another case", ISSUER.toUpperCase(), true],
    ["empty", "", false],
  ])("%s: iss-mismatch", (_name, value, issParameterSupported) => {
    const query = `code=c1&state=${STATE}&iss=${encodeURIComponent(value)}`
    expect(outcome(callback(query), { issParameterSupported })).toEqual(mismatch(value))
  })

  it("absent although advertised: iss-missing", () => {
    expect(outcome(callback(`code=c1&state=${STATE}`), { issParameterSupported: true })).toEqual(
      problem({
        reason: "iss-missing",
        message: `${AT} has no iss although ${ISSUER} advertises authorization_response_iss_parameter_supported; rejected as a possible mix-up attack (RFC 9207)`,
      }),
    )
  })

  it("an error response from another issuer is not surfaced", () => {
    const query = `error=access_denied&state=${STATE}&iss=${encodeURIComponent("https://attacker.example")}`
    expect(outcome(callback(query))).toEqual(mismatch("https://attacker.example"))
    expect(outcome(callback(`error=access_denied&state=${STATE}`), { issParameterSupported: true })).toMatchObject({
      reason: "iss-missing",
    })
  })
})

describe("AuthorizationResponse.process: error response (RFC 6749 §4.1.2.1)", () => {
  it.each([
    [
      "with description and URI",
      `error=access_denied&error_description=the+user+said+no&error_uri=${encodeURIComponent("https://as.example.com/why")}`,
      {
        error: "access_denied",
        description: "the user said no",
        uri: "https://as.example.com/why",
        message: `the authorization server ${ISSUER} answered the authorization request with access_denied: the user said no`,
      },
    ],
    [
      "the code only",
      "error=invalid_scope",
      {
        error: "invalid_scope",
        message: `the authorization server ${ISSUER} answered the authorization request with invalid_scope`,
      },
    ],
    [
      "with a code as well (the error wins)",
      "error=server_error&code=c1",
      {
        error: "server_error",
        message: `the authorization server ${ISSUER} answered the authorization request with server_error`,
      },
    ],
  ])("%s: error-response", (_name, query, fields) => {
    expect(outcome(callback(`${query}&state=${STATE}&iss=${iss}`), { issParameterSupported: true })).toEqual(
      problem({ reason: "error-response", ...fields }),
    )
  })
})

describe("AuthorizationResponse.process: code", () => {
  it.each([
    ["absent", `state=${STATE}`],
    ["empty", `code=&state=${STATE}`],
  ])("%s: code-missing", (_name, query) => {
    expect(outcome(callback(query))).toEqual(
      problem({ reason: "code-missing", message: `${AT} carries neither code nor error` }),
    )
  })
})

describe("AuthorizationResponse.process: repeated parameters (RFC 6749 §3.1)", () => {
  it.each([
    ["state", `code=c1&state=${STATE}&state=${STATE}`],
    ["iss", `code=c1&state=${STATE}&iss=${iss}&iss=${iss}`],
    ["error", `error=a&error=b&state=${STATE}`],
    ["error_description", `error=a&error_description=x&error_description=y&state=${STATE}`],
    ["error_uri", `error=a&error_uri=x&error_uri=y&state=${STATE}`],
    ["code", `code=c1&code=c2&state=${STATE}`],
  ])("%s twice: repeated-parameter", (parameter, query) => {
    expect(outcome(callback(query))).toEqual(
      problem({
        reason: "repeated-parameter",
        parameter,
        message: `${AT} carries ${parameter} 2 times; a parameter may appear only once (RFC 6749 §3.1)`,
      }),
    )
  })

  it("parameters Keyway does not read may repeat", () => {
    expect(outcome(callback(`code=c1&state=${STATE}&session_state=a&session_state=b`))).toEqual({ code: "c1" })
  })
})

describe("AuthorizationResponse.state", () => {
  it("the state of a response, for finding its request", () => {
    expect(AuthorizationResponse.state(callback(`code=c1&state=${STATE}`))).toEqual(Result.succeed(STATE))
  })

  it.each([
    ["absent", "code=c1", "state-missing"],
    ["empty", "code=c1&state=", "state-missing"],
    ["repeated", "code=c1&state=a&state=b", "repeated-parameter"],
  ])("%s: refused", (_name, query, reason) => {
    const result = AuthorizationResponse.state(callback(query))
    expect(Result.isFailure(result) && result.failure.reason).toBe(reason)
  })
})
