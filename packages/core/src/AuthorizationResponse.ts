/**
 * The processing half of an authorization request (the request and the redirect are the caller's): what arrived at
 * the redirect URI, checked once for every OAuth client in Keyway. In order, so that nothing in a response that
 * cannot be matched to the request is acted on: `state` must be present once and equal the request's (compared in
 * constant time); `iss` must name the expected issuer exactly when present, and be present when the authorization
 * server advertises `authorization_response_iss_parameter_supported` (RFC 9207 §2.4); only then is an error response
 * (RFC 6749 §4.1.2.1) surfaced; finally a `code` must be present. A parameter that appears more than once is refused
 * (RFC 6749 §3.1).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 * @module
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Bytes from "./Bytes.js"

/**
 * Why an authorization response cannot be used.
 *
 * - `repeated-parameter`: a parameter Keyway reads appears more than once (RFC 6749 §3.1).
 * - `state-missing`: no `state`, or an empty one: the response cannot be matched to a request.
 * - `state-mismatch`: a `state` other than the request's (forged, or from another request).
 * - `iss-missing`: no `iss` although the authorization server advertises it (RFC 9207 §2.4).
 * - `iss-mismatch`: an `iss` other than the expected issuer (RFC 9207 §2.4): a possible mix-up attack.
 * - `error-response`: the authorization server refused the request (RFC 6749 §4.1.2.1).
 * - `code-missing`: neither `code` nor `error`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2 | RFC 6749 §4.1.2}
 */
export const ProblemReason = Schema.Literals([
  "repeated-parameter",
  "state-missing",
  "state-mismatch",
  "iss-missing",
  "iss-mismatch",
  "error-response",
  "code-missing",
])

/** @see {@link ProblemReason} */
export type ProblemReason = typeof ProblemReason.Type

/**
 * An authorization response that cannot be used: the reason, the repeated `parameter`, the `iss` that did not match,
 * the `error`, `error_description` (`description`) and `error_uri` (`uri`) of an error response, and a message that
 * says what was wrong.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2.1 | RFC 6749 §4.1.2.1}
 */
export class AuthorizationResponseProblem extends Schema.TaggedError<AuthorizationResponseProblem>()(
  "AuthorizationResponseProblem",
  {
    reason: ProblemReason,
    parameter: Schema.optional(Schema.String),
    iss: Schema.optional(Schema.String),
    error: Schema.optional(Schema.String),
    description: Schema.optional(Schema.String),
    uri: Schema.optional(Schema.String),
    message: Schema.String,
  },
) {}

/** What the caller recorded when it sent the request. */
export interface Expected {
  /** The `state` the request carried. */
  readonly state: string
  /** The issuer identifier of the authorization server the request went to. */
  readonly issuer: string
  /**
   * Its metadata's `authorization_response_iss_parameter_supported`: when `true`, a response without `iss` is refused.
   * Default `false`.
   */
  readonly issParameterSupported?: boolean
}

/** A usable authorization response: the authorization code to redeem at the token endpoint. */
export interface Authorized {
  readonly code: string
}

/**
 * The response's parameters, and how messages name it: with the redirect URI's origin and path (never its query,
 * which holds the code) when the whole URL is given.
 */
const read = (response: URL | URLSearchParams) =>
  response instanceof URL
    ? { params: response.searchParams, name: `the authorization response at ${response.origin}${response.pathname}` }
    : { params: response, name: "the authorization response" }

type Fields = Omit<ConstructorParameters<typeof AuthorizationResponseProblem>[0], "message">

const fail = (fields: Fields, message: string) => Result.fail(new AuthorizationResponseProblem({ ...fields, message }))

/** The first of `parameters` that appears more than once, as a problem; undefined when each appears at most once. */
const repeated = (params: URLSearchParams, name: string, ...parameters: ReadonlyArray<string>) => {
  for (const parameter of parameters) {
    const count = params.getAll(parameter).length
    if (count > 1) {
      return fail(
        { reason: "repeated-parameter", parameter },
        `${name} carries ${parameter} ${count} times; a parameter may appear only once (RFC 6749 §3.1)`,
      )
    }
  }
  return undefined
}

/**
 * The `state` of an authorization response, for a caller that finds the request it belongs to by its state (and then
 * calls {@link process} with it): refused when absent, empty or repeated.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const state = (response: URL | URLSearchParams): Result.Result<string, AuthorizationResponseProblem> => {
  const { params, name } = read(response)
  const again = repeated(params, name, "state")
  if (again !== undefined) return again
  const value = params.get("state")
  if (value === null || value === "") {
    return fail(
      { reason: "state-missing" },
      `${name} carries no state; it was discarded (it may be forged or from another request)`,
    )
  }
  return Result.succeed(value)
}

/**
 * Processes the authorization response that arrived at the redirect URI (the whole URL, or its query parameters)
 * for the request described by `expected`: the authorization code, or the problem that stops its use. The checks
 * run in the order of the module's description, so an error response is surfaced only once it is known to answer
 * this request from this authorization server.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2 | RFC 6749 §4.1.2}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const process = (
  response: URL | URLSearchParams,
  expected: Expected,
): Result.Result<Authorized, AuthorizationResponseProblem> => {
  const { params, name } = read(response)
  const got = state(response)
  if (Result.isFailure(got)) return Result.fail(got.failure)
  if (!Bytes.timingSafeEqual(got.success, expected.state)) {
    return fail(
      { reason: "state-mismatch" },
      `${name} carries a state that does not match the request; it was discarded (it may be forged or from another request)`,
    )
  }
  const issRepeated = repeated(params, name, "iss")
  if (issRepeated !== undefined) return issRepeated
  const iss = params.get("iss")
  if (iss === null) {
    if (expected.issParameterSupported === true) {
      return fail(
        { reason: "iss-missing" },
        `${name} has no iss although ${expected.issuer} advertises authorization_response_iss_parameter_supported; rejected as a possible mix-up attack (RFC 9207)`,
      )
    }
  } else if (iss !== expected.issuer) {
    return fail(
      { reason: "iss-mismatch", iss },
      `${name} has iss "${iss}" but the request went to "${expected.issuer}"; rejected as a possible mix-up attack (RFC 9207)`,
    )
  }
  const errorRepeated = repeated(params, name, "error", "error_description", "error_uri")
  if (errorRepeated !== undefined) return errorRepeated
  const error = params.get("error")
  if (error !== null) {
    const description = params.get("error_description")
    const uri = params.get("error_uri")
    return fail(
      {
        reason: "error-response",
        error,
        ...(description === null ? {} : { description }),
        ...(uri === null ? {} : { uri }),
      },
      `the authorization server ${expected.issuer} answered the authorization request with ${error}${description === null ? "" : `: ${description}`}`,
    )
  }
  const codeRepeated = repeated(params, name, "code")
  if (codeRepeated !== undefined) return codeRepeated
  const code = params.get("code")
  if (code === null || code === "") {
    return fail({ reason: "code-missing" }, `${name} carries neither code nor error`)
  }
  return Result.succeed({ code })
}
