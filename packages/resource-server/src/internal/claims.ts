/**
 * The checks of a JWT access token's header and claims besides its signature, issuer and audience, written out by
 * hand: they run on every verification, where a schema parse costs more than the rest of the claims' checks together
 * (docs/benchmarks.md). The claims' types are those of `Wire.JwtAccessTokenClaims` in @keyway/core, the one home of
 * RFC 9068 §2.2; a test holds this code to that schema.
 */
import type { InvalidTokenReason } from "../VerifiedToken.js"

// RFC 8725 §3.11 and RFC 9068 §2.1: the media type in `typ`, compared without its "application/" prefix and case.
const normalizeType = (value: string): string => {
  const lower = value.toLowerCase()
  return lower.includes("/") ? lower : `application/${lower}`
}

/** Whether the header's `typ` is `typ` (RFC 9068 §2.1); any header passes when `typ` is undefined. */
export const typeMatches = (header: Readonly<Record<string, unknown>>, typ: string | undefined): boolean =>
  typ === undefined || (typeof header.typ === "string" && normalizeType(header.typ) === normalizeType(typ))

/**
 * The time checks of a signed claims set, as jose's `jwtVerify` made them for this verifier: `iss`, `aud` and `exp`
 * present (RFC 9068 §2.2), `iat` and `nbf` numbers, `nbf` reached and `exp` not passed within the clock skew
 * (RFC 7519 §4.1.4, §4.1.5). `now` and `skew` in seconds.
 */
export const claimsProblem = (
  claims: Readonly<Record<string, unknown>>,
  now: number,
  skew: number,
): InvalidTokenReason | undefined => {
  if (!Object.hasOwn(claims, "iss") || !Object.hasOwn(claims, "aud") || !Object.hasOwn(claims, "exp")) {
    return "missing-claim"
  }
  const { iat, nbf, exp } = claims
  if (iat !== undefined && typeof iat !== "number") return "not-yet-valid"
  if (nbf !== undefined && (typeof nbf !== "number" || nbf > now + skew)) return "not-yet-valid"
  if (typeof exp !== "number") return "malformed"
  if (exp <= now - skew) return "expired"
  return undefined
}

const finite = (value: unknown): boolean => typeof value === "number" && Number.isFinite(value)
const nonEmpty = (value: unknown): boolean => typeof value === "string" && value.length > 0
const optional = (value: unknown, holds: (value: unknown) => boolean): boolean => value === undefined || holds(value)

/**
 * Whether every claim the verifier reads has its RFC 9068 §2.2 type: `iss` a non-empty string, `exp` a number, `aud`
 * a string or an array of strings, and, when present, `sub`, `client_id` and `jti` non-empty strings, `iat` and
 * `nbf` numbers. `sub`, `client_id`, `iat` and `jti` stay optional: tokens of authorization servers that omit them
 * were always accepted. Numbers are finite, as JSON's are except for overflowing literals such as `1e999`.
 */
export const claimTypesHold = (claims: Readonly<Record<string, unknown>>): boolean => {
  const aud = claims.aud
  return (
    nonEmpty(claims.iss) &&
    finite(claims.exp) &&
    (typeof aud === "string" || (Array.isArray(aud) && aud.every((a) => typeof a === "string"))) &&
    optional(claims.sub, nonEmpty) &&
    optional(claims.client_id, nonEmpty) &&
    optional(claims.iat, finite) &&
    optional(claims.nbf, finite) &&
    optional(claims.jti, nonEmpty)
  )
}
