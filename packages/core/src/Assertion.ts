/**
 * The claim checks of a JWT presented as an authorization grant (RFC 7523 §3), written once for every grant that
 * takes one (identity assertions, workload assertions): issuer, subject, audience, expiry and issue time with a
 * bounded clock skew, a bounded lifetime, and a JWT ID for single use. Pure: the signature and the `jti` replay
 * record are the caller's.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 * @module
 */
import * as Result from "effect/Result"

/**
 * What the claims of an assertion are checked against.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export interface ClaimsPolicy {
  /** The `iss` the assertion must carry; any non-empty string when omitted. */
  readonly issuer?: string
  /** The values that identify the receiving server; `aud` must contain one of them (RFC 7523 §3 item 3). */
  readonly audiences: ReadonlyArray<string>
  /** The current time, in seconds since the epoch. */
  readonly now: number
  /** The clock skew tolerated on `exp`, `nbf` and `iat`, in seconds. */
  readonly clockSkew: number
  /** The longest lifetime (`exp` - `iat`, or `exp` - now without `iat`) accepted, in seconds. */
  readonly maxLifetime: number
  /** Whether `iat` is required (RFC 7523 §3 item 6 makes it optional; the ID-JAG profile requires it). */
  readonly requireIat: boolean
  /** Whether `jti` is required (for single use, RFC 7523 §3 item 7). */
  readonly requireJti: boolean
  /** How long after `iat` an assertion is still accepted, in seconds; bounded by `maxLifetime` alone when omitted. */
  readonly maxAge?: number | undefined
}

/**
 * The registered claims of an assertion that passed {@link check}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7519.html#section-4.1 | RFC 7519 §4.1}
 */
export interface CheckedClaims {
  readonly iss: string
  readonly sub: string
  readonly exp: number
  readonly iat: number | undefined
  readonly jti: string | undefined
}

const isText = (value: unknown): value is string => typeof value === "string" && value !== ""
const isTime = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/**
 * Checks the registered claims of an assertion (its signature already verified), failing with a description of the
 * first check that fails, for an `invalid_grant` answer (RFC 7523 §3.1).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export const check = (
  claims: Readonly<Record<string, unknown>>,
  policy: ClaimsPolicy,
): Result.Result<CheckedClaims, string> => {
  const { iss, sub, aud, exp, iat, nbf, jti } = claims
  const { now, clockSkew: skew } = policy
  if (!isText(iss)) return Result.fail("the assertion has no iss claim (RFC 7523 section 3 item 1)")
  if (policy.issuer !== undefined && iss !== policy.issuer) {
    return Result.fail(`the assertion's iss ${iss} is not ${policy.issuer}`)
  }
  if (!isText(sub)) return Result.fail("the assertion has no sub claim (RFC 7523 section 3 item 2)")
  const audiences = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : []
  if (audiences.length === 0) return Result.fail("the assertion has no aud claim (RFC 7523 section 3 item 3)")
  if (!audiences.some((a) => typeof a === "string" && policy.audiences.includes(a))) {
    return Result.fail(
      `the assertion's aud does not name this authorization server (accepted: ${policy.audiences.join(", ")})`,
    )
  }
  if (!isTime(exp)) return Result.fail("the assertion has no exp claim (RFC 7523 section 3 item 4)")
  if (now >= exp + skew) return Result.fail(`the assertion expired at ${exp} (clock skew ${skew} s)`)
  if (nbf !== undefined) {
    if (!isTime(nbf)) return Result.fail("the assertion's nbf is not a number")
    if (nbf > now + skew) return Result.fail(`the assertion is not valid before ${nbf} (clock skew ${skew} s)`)
  }
  if (iat !== undefined && !isTime(iat)) return Result.fail("the assertion's iat is not a number")
  if (iat === undefined && policy.requireIat) return Result.fail("the assertion has no iat claim")
  if (iat !== undefined && iat > now + skew) {
    return Result.fail(`the assertion's iat ${iat} is in the future (clock skew ${skew} s)`)
  }
  if (iat !== undefined && policy.maxAge !== undefined && now - iat > policy.maxAge + skew) {
    return Result.fail(`the assertion was issued more than ${policy.maxAge} s ago (iat ${iat})`)
  }
  const lifetime = exp - (iat ?? now)
  if (lifetime > policy.maxLifetime) {
    return Result.fail(
      `the assertion lives ${lifetime} s (${iat === undefined ? "exp - now" : "exp - iat"}), longer than the ${policy.maxLifetime} s accepted`,
    )
  }
  if (jti !== undefined && !isText(jti)) return Result.fail("the assertion's jti is not a string")
  if (jti === undefined && policy.requireJti) {
    return Result.fail("the assertion has no jti claim (RFC 7523 section 3 item 7)")
  }
  return Result.succeed({ iss, sub, exp, iat, jti })
}
