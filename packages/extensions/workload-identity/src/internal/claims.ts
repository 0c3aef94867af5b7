/**
 * The claim checks of RFC 7523 §3 for a JWT used as an authorization grant, as a pure function of the claims and the
 * time: each failure is the `error_description` of the `invalid_grant` it is answered with.
 */

/** What the claims are checked against; times in seconds. */
export interface ClaimPolicy {
  readonly now: number
  /** The `aud` values that name this authorization server (one must be present). */
  readonly audiences: ReadonlyArray<string>
  /** The allowance for clocks that differ, applied to `exp`, `nbf` and `iat`. */
  readonly clockSkew: number
  /** The longest `exp - iat` accepted. */
  readonly maxLifetime: number
  /** How long after `iat` an assertion is still accepted; unbounded (but for `maxLifetime`) when undefined. */
  readonly maxAge: number | undefined
}

/** The claims of an assertion that passed {@link checkClaims}. */
export interface CheckedClaims {
  readonly iss: string
  readonly sub: string
  readonly jti: string
  readonly exp: number
  readonly iat: number
  readonly claims: Readonly<Record<string, unknown>>
}

const isText = (value: unknown): value is string => typeof value === "string" && value !== ""
const isTime = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/**
 * Checks `sub`, `aud`, `exp`, `nbf`, `iat` and `jti` in the order of RFC 7523 §3 (the issuer and the signature are
 * checked before, since the keys depend on the issuer): the checked claims, or the description of the first failure.
 */
export const checkClaims = (
  claims: Readonly<Record<string, unknown>>,
  iss: string,
  policy: ClaimPolicy,
): CheckedClaims | string => {
  const { now, clockSkew: skew } = policy
  const sub = claims.sub
  if (!isText(sub)) return "the assertion has no sub claim (RFC 7523 section 3 item 2)"
  const aud = claims.aud
  const audiences = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : []
  if (audiences.length === 0) return "the assertion has no aud claim (RFC 7523 section 3 item 3)"
  if (!audiences.some((value) => policy.audiences.includes(value))) {
    return `the assertion's aud does not name this authorization server (accepted: ${policy.audiences.join(", ")})`
  }
  const exp = claims.exp
  if (!isTime(exp)) return "the assertion has no exp claim (RFC 7523 section 3 item 4)"
  if (now >= exp + skew) return `the assertion expired at ${exp} (clock skew ${skew} s)`
  const nbf = claims.nbf
  if (nbf !== undefined) {
    if (!isTime(nbf)) return "the assertion's nbf is not a number"
    if (nbf > now + skew) return `the assertion is not valid before ${nbf} (clock skew ${skew} s)`
  }
  const iat = claims.iat
  if (!isTime(iat)) return "the assertion has no iat claim"
  if (iat > now + skew) return `the assertion's iat ${iat} is in the future (clock skew ${skew} s)`
  if (policy.maxAge !== undefined && now - iat > policy.maxAge + skew) {
    return `the assertion was issued more than ${policy.maxAge} s ago (iat ${iat})`
  }
  if (exp - iat > policy.maxLifetime) {
    return `the assertion lives ${exp - iat} s (exp - iat), longer than the ${policy.maxLifetime} s accepted`
  }
  const jti = claims.jti
  if (!isText(jti)) return "the assertion has no jti claim (RFC 7523 section 3 item 7)"
  return { iss, sub, jti, exp, iat, claims }
}
