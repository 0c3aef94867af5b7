/**
 * The processing half of a token request (the request is the caller's): what a token endpoint answered, checked once
 * for every OAuth client in Keyway. An error response (RFC 6749 §5.2) becomes a problem carrying its code and
 * description; a success (RFC 6749 §5.1) must carry an `access_token`, a `token_type` the caller can use (Bearer
 * unless it says otherwise), the `issued_token_type` a token exchange asked for (RFC 8693 §2.2.1), and pass the
 * token response schema (`expires_in` a non-negative integer, `scope` a string, ...).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5 | RFC 6749 §5}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.2 | RFC 8693 §2.2}
 * @module
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Wire from "./Wire.js"

/** Why a token response cannot be used. */
export const ProblemReason = Schema.Literals([
  "error-response",
  "missing-access-token",
  "unsupported-token-type",
  "unexpected-issued-token-type",
  "invalid-document",
])

/** @see {@link ProblemReason} */
export type ProblemReason = typeof ProblemReason.Type

/**
 * A token response that cannot be used: the reason, the endpoint's URL and HTTP status, the OAuth `error` and
 * `error_description` of an error response, and a message that says what was wrong.
 */
export class TokenResponseProblem extends Schema.TaggedError<TokenResponseProblem>()("TokenResponseProblem", {
  reason: ProblemReason,
  url: Schema.String,
  status: Schema.Number,
  error: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  message: Schema.String,
}) {}

/** What the caller expects of a successful answer. */
export interface Expected {
  /** Whether the caller can use a `token_type`; by default only `Bearer`, compared case-insensitively (RFC 6749 §7.1). */
  readonly tokenType?: (tokenType: string) => boolean
  /** The `issued_token_type` a token exchange must answer with (RFC 8693 §2.2.1); not checked when omitted. */
  readonly issuedTokenType?: string
  /**
   * Whether the other members must pass the token response schema (`expires_in` a non-negative integer, `scope` a
   * string, ...). Default `true`; `false` for a caller that reads only the tokens themselves (a sign-in through an
   * upstream identity provider, some of which send `expires_in` as a string).
   */
  readonly schema?: boolean
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const isBearer = (tokenType: string): boolean => tokenType.toLowerCase() === "bearer"

/**
 * Processes what the token endpoint at `url` answered with HTTP `status` and the body `json` (`undefined` when it
 * was not JSON): the token response, or the problem that stops its use.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.1 | RFC 6749 §5.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.2.1 | RFC 8693 §2.2.1}
 */
export const process = (
  url: string,
  status: number,
  json: unknown,
  expected: Expected = {},
): Result.Result<Wire.TokenResponse, TokenResponseProblem> => {
  const problem = (reason: ProblemReason, message: string, extra: { error?: string; description?: string } = {}) =>
    Result.fail(new TokenResponseProblem({ reason, url, status, message, ...extra }))
  if (status !== 200) {
    const error = isRecord(json) && typeof json.error === "string" ? json.error : undefined
    const description = isRecord(json) && typeof json.error_description === "string" ? json.error_description : ""
    return problem(
      "error-response",
      `the token endpoint ${url} answered HTTP ${status} ${error ?? "without an OAuth error code"}${description !== "" ? `: ${description}` : ""}`,
      { ...(error === undefined ? {} : { error }), ...(description === "" ? {} : { description }) },
    )
  }
  if (!isRecord(json) || typeof json.access_token !== "string" || json.access_token === "") {
    return problem(
      "missing-access-token",
      `the token response from ${url} has no access_token; the authorization server must return one (RFC 6749 §5.1)`,
    )
  }
  if (typeof json.token_type !== "string" || json.token_type === "") {
    return problem("unsupported-token-type", `the token response from ${url} has no token_type (RFC 6749 §5.1)`)
  }
  if (!(expected.tokenType ?? isBearer)(json.token_type)) {
    return problem(
      "unsupported-token-type",
      `the token response from ${url} has token_type ${JSON.stringify(json.token_type)}; only Bearer tokens can be used`,
    )
  }
  if (expected.issuedTokenType !== undefined && json.issued_token_type !== expected.issuedTokenType) {
    return problem(
      "unexpected-issued-token-type",
      `the token response from ${url} has issued_token_type ${JSON.stringify(json.issued_token_type ?? null)}, not ${expected.issuedTokenType}`,
    )
  }
  if (expected.schema === false) return Result.succeed(json as Wire.TokenResponse)
  const parsed = Wire.validate(Wire.TokenResponse, json, "token response")
  if (Result.isFailure(parsed)) {
    return problem("invalid-document", `the token response from ${url} is invalid: ${parsed.failure.message}`)
  }
  return Result.succeed(parsed.success)
}
