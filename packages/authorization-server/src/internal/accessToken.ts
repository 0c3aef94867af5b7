import { Effect, Option } from "effect"
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from "jose"
import type { ResolvedConfig } from "../Config.js"
import type { OwnAccessToken } from "../Extension.js"
import { TokenSigner } from "../Signing.js"
import type { StorageError } from "../storage/Errors.js"
import type { GrantStore } from "../storage/Storage.js"

/** The claims of an access token this server issued (RFC 9068 §2.2). */
export interface AccessTokenClaims {
  readonly iss: string
  readonly sub: string
  readonly aud: string
  readonly client_id: string
  readonly scope: string
  readonly jti: string
  readonly iat: number
  readonly exp: number
  /** The confirmation of a sender-constrained token (`jkt` for DPoP, RFC 9449 §6.1). */
  readonly cnf?: Readonly<Record<string, unknown>>
  /** The actor a token exchange issued the token to, with the prior actors nested (RFC 8693 §4.1). */
  readonly act?: Readonly<Record<string, unknown>>
}

// Every algorithm TokenSigner can sign with; the key's own `alg` narrows it further.
const ALGORITHMS = ["ES256", "ES384", "EdDSA", "RS256", "PS256"]

/**
 * Verifies a JWT as one this server signed: signature by a published key, our issuer, `typ` when given, not expired
 * at `now`. Its claims, or `undefined` for anything else.
 */
export const verifyOwnJwt = (
  config: ResolvedConfig,
  token: string,
  now: number,
  typ: string | undefined,
): Effect.Effect<Readonly<Record<string, unknown>> | undefined, StorageError, TokenSigner> =>
  Effect.gen(function* () {
    if (token.split(".").length !== 3) return undefined
    const signer = yield* TokenSigner
    const jwks = yield* signer.jwks
    return yield* Effect.promise(() =>
      jwtVerify(token, createLocalJWKSet(jwks as unknown as JSONWebKeySet), {
        issuer: config.issuer,
        ...(typ === undefined ? {} : { typ }),
        algorithms: ALGORITHMS,
        currentDate: new Date(now * 1000),
        requiredClaims: ["exp"],
      }).then(
        (r) => r.payload as Readonly<Record<string, unknown>>,
        () => undefined,
      ),
    )
  })

/** The claims of a verified JWT when they have the shape of our access tokens (RFC 9068 §2.2); `undefined` otherwise. */
export const accessTokenClaims = (verified: Readonly<Record<string, unknown>>): AccessTokenClaims | undefined => {
  const { iss, sub, aud, client_id, scope, jti, iat, exp, cnf, act } = verified
  if (
    typeof iss !== "string" ||
    typeof sub !== "string" ||
    typeof aud !== "string" ||
    typeof client_id !== "string" ||
    typeof scope !== "string" ||
    typeof jti !== "string" ||
    typeof iat !== "number" ||
    typeof exp !== "number"
  ) {
    return undefined
  }
  const confirmation = isObject(cnf) ? { cnf } : {}
  const actor = isObject(act) ? { act } : {}
  return { iss, sub, aud, client_id, scope, jti, iat, exp, ...confirmation, ...actor }
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Verifies a token as one of our own access tokens: signature by a published key, `typ` at+jwt, our issuer, not
 * expired at `now`. `undefined` for anything else (another issuer's token, a refresh token, garbage), so callers can
 * treat all of those alike, as RFC 7009 §2.2 and RFC 7662 §2.2 ask.
 */
export const verifyAccessToken = (
  config: ResolvedConfig,
  token: string,
  now: number,
): Effect.Effect<AccessTokenClaims | undefined, StorageError, TokenSigner> =>
  Effect.map(verifyOwnJwt(config, token, now, "at+jwt"), (verified) =>
    verified === undefined ? undefined : accessTokenClaims(verified),
  )

/**
 * Verifies one of our own access tokens presented back at the token endpoint (a token exchange's subject or actor
 * token): as {@link verifyAccessToken}, and not revoked (by itself or with its grant). With every claim and the live
 * grant it was recorded under (none for a token issued under no grant).
 */
export const verifyOwnAccessToken = (
  config: ResolvedConfig,
  grants: GrantStore["Service"],
  token: string,
  now: number,
): Effect.Effect<OwnAccessToken | undefined, StorageError, TokenSigner> =>
  Effect.gen(function* () {
    const verified = yield* verifyOwnJwt(config, token, now, "at+jwt")
    const claims = verified === undefined ? undefined : accessTokenClaims(verified)
    if (verified === undefined || claims === undefined) return undefined
    if (yield* grants.isAccessTokenRevoked(claims.jti)) return undefined
    const grant = yield* grants.accessTokenGrant(claims.jti)
    return {
      claims: verified,
      subject: claims.sub,
      clientId: claims.client_id,
      resource: claims.aud,
      scope: claims.scope,
      jti: claims.jti,
      expiresAt: claims.exp,
      grant: Option.isSome(grant) ? { id: grant.value.grant_id, scope: grant.value.scope } : undefined,
    }
  })
