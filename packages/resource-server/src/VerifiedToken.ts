/**
 * What a verified access token says: the caller, its client and its scopes.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2.2 | RFC 7662 §2.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.1 | RFC 8693 §4.1}
 */
import type { TokenExchange } from "@keyway/core"
import { Schema } from "effect"

/**
 * A token that passed verification. It never holds the token string itself, so it can be cached and logged.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 */
export interface VerifiedToken {
  /** The resource owner (`sub`), when the token names one. */
  readonly subject?: string
  /** The OAuth client the token was issued to (`client_id`, or `azp`). */
  readonly clientId?: string
  /** Granted scopes (`scope` or `scp`), de-duplicated, in token order. */
  readonly scopes: ReadonlyArray<string>
  /** The issuer (`iss`). */
  readonly issuer?: string
  /** The audiences (`aud`) as given in the token. */
  readonly audience: ReadonlyArray<string>
  /** Expiry (`exp`), seconds since the epoch. */
  readonly expiresAt?: number
  /** Issue time (`iat`), seconds since the epoch. */
  readonly issuedAt?: number
  /** Start of validity (`nbf`), seconds since the epoch. */
  readonly notBefore?: number
  /** Token identifier (`jti`). */
  readonly tokenId?: string
  /**
   * Who acts for the subject, for a delegated token (one whose claims carry `act`, RFC 8693 §4.1): the current actor
   * first, the earliest last. Set by the protected resource once it has accepted the chain (see its `delegation`
   * option), from the claims alone; absent for a token that is not delegated.
   */
  readonly actors?: ReadonlyArray<TokenExchange.Actor>
  /** Every claim, as verified (JWT payload or introspection response). */
  readonly claims: Readonly<Record<string, unknown>>
  /**
   * Latest time (milliseconds since the epoch) the verification result may be reused, set by verifiers whose answer
   * can change before expiry (introspection). The verified-token cache never keeps an entry past it nor past `exp`.
   */
  readonly reuseUntil?: number
}

/**
 * Why a token was refused. `delegation-refused`: a delegated token (`act`) whose chain this resource does not accept.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1 (invalid_token)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.1 | RFC 8693 §4.1}
 */
export const InvalidTokenReason = Schema.Literals([
  "malformed",
  "expired",
  "not-yet-valid",
  "bad-signature",
  "unknown-key",
  "algorithm-not-allowed",
  "wrong-type",
  "wrong-issuer",
  "wrong-audience",
  "missing-claim",
  "inactive",
  "rejected",
  "delegation-refused",
])

/**
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1 (invalid_token)}
 */
export type InvalidTokenReason = typeof InvalidTokenReason.Type

/**
 * The token is not acceptable here: answered with 401 and `error="invalid_token"`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", {
  reason: InvalidTokenReason,
  /** Safe to show to the client as `error_description`. */
  description: Schema.String,
}) {
  override get message(): string {
    return this.description
  }
}

/**
 * The token could not be checked because a dependency (JWKS endpoint, introspection endpoint) failed. The resource
 * server fails closed: the request gets 401 `invalid_token`, never the protected response nor a 500.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export class VerifierUnavailable extends Schema.TaggedError<VerifierUnavailable>()("VerifierUnavailable", {
  /** Which dependency failed, e.g. "jwks" or "introspection". */
  source: Schema.String,
  /** What went wrong, for logs (never contains the token). */
  detail: Schema.String,
}) {
  override get message(): string {
    return `Token verification is unavailable (${this.source}): ${this.detail}`
  }
}

/**
 * Any reason verification did not produce a {@link VerifiedToken}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export type VerificationError = InvalidToken | VerifierUnavailable

/**
 * Reads scopes from a `scope` string or an `scp` array/string, de-duplicated in order.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2.3 | RFC 9068 §2.2.3}
 */
export const scopesFromClaims = (claims: Readonly<Record<string, unknown>>): ReadonlyArray<string> => {
  const raw = claims.scope ?? claims.scp
  const list =
    typeof raw === "string"
      ? raw.split(" ")
      : Array.isArray(raw)
        ? raw.filter((s): s is string => typeof s === "string")
        : []
  const seen = new Set<string>()
  for (const scope of list) if (scope.length > 0) seen.add(scope)
  return [...seen]
}

/**
 * Builds a {@link VerifiedToken} from JWT claims or an introspection response.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2.2 | RFC 7662 §2.2}
 */
export const fromClaims = (claims: Readonly<Record<string, unknown>>, reuseUntil?: number): VerifiedToken => {
  const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)
  const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined)
  const aud = claims.aud
  const token: {
    -readonly [K in keyof VerifiedToken]: VerifiedToken[K]
  } = {
    scopes: scopesFromClaims(claims),
    audience: typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud.filter((a) => typeof a === "string") : [],
    claims,
  }
  const subject = str(claims.sub)
  if (subject !== undefined) token.subject = subject
  const clientId = str(claims.client_id) ?? str(claims.azp)
  if (clientId !== undefined) token.clientId = clientId
  const issuer = str(claims.iss)
  if (issuer !== undefined) token.issuer = issuer
  const exp = num(claims.exp)
  if (exp !== undefined) token.expiresAt = exp
  const iat = num(claims.iat)
  if (iat !== undefined) token.issuedAt = iat
  const nbf = num(claims.nbf)
  if (nbf !== undefined) token.notBefore = nbf
  const jti = str(claims.jti)
  if (jti !== undefined) token.tokenId = jti
  if (reuseUntil !== undefined) token.reuseUntil = reuseUntil
  return token
}
