import { OAuthError } from "@keyway/core"
import { Effect } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { TokenBinding } from "../Extension.js"
import { nowSeconds } from "../internal/clock.js"
import { randomToken } from "../internal/crypto.js"
import { CORS_HEADERS, json } from "../internal/http.js"
import type { TokenSigner } from "../Signing.js"

/** Fails with this OAuth error (answered with its status by the token endpoint). */
export const err = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

/** Signs with the server's current key; a server without one answers `server_error`. */
export const signJwt = (signer: TokenSigner["Service"], claims: Readonly<Record<string, unknown>>, typ: string) =>
  signer
    .sign({ ...claims }, typ)
    .pipe(Effect.catchTag("NoSigningKey", () => err("server_error", "no signing key is active")))

/**
 * Signs an access token (RFC 9068) before anything is committed: the caller records its `jti` in the same transaction
 * as the redemption or refresh that issues it, and hands it out only after that commit.
 */
export const signAccessToken = (
  signer: TokenSigner["Service"],
  config: ResolvedConfig,
  binding: TokenBinding,
  args: {
    subject: string
    clientId: string
    resource: string
    scope: string
    authTime?: number
    claims?: Readonly<Record<string, unknown>> | undefined
    /** An upper bound of `exp` (a token exchanged from another never outlives it). */
    expiresAt?: number | undefined
  },
) =>
  Effect.gen(function* () {
    const iat = yield* nowSeconds
    const exp = Math.min(iat + config.accessTokenTtl, args.expiresAt ?? Number.POSITIVE_INFINITY)
    const jti = randomToken(16)
    const token = yield* signJwt(
      signer,
      {
        ...args.claims,
        ...binding.claims,
        iss: config.issuer,
        sub: args.subject,
        aud: args.resource,
        client_id: args.clientId,
        scope: args.scope,
        jti,
        iat,
        exp,
        ...(args.authTime === undefined ? {} : { auth_time: args.authTime }),
      },
      "at+jwt",
    )
    return { token, record: { jti, expires_at: exp }, expiresIn: exp - iat }
  })

/**
 * The token response (OAuth 2.1 §3.2.3), with what the request's token-request hooks bound (`token_type`, headers),
 * and the `issued_token_type` of a token exchange (RFC 8693 §2.2.1) when given.
 */
export const tokenResponse = (
  binding: TokenBinding,
  accessToken: string,
  expiresIn: number,
  scope: string,
  refreshToken: string | undefined,
  idToken?: string,
  issuedTokenType?: string,
) =>
  json(
    {
      access_token: accessToken,
      ...(issuedTokenType === undefined ? {} : { issued_token_type: issuedTokenType }),
      token_type: binding.tokenType ?? "Bearer",
      expires_in: expiresIn,
      scope,
      ...(refreshToken === undefined ? {} : { refresh_token: refreshToken }),
      ...(idToken === undefined ? {} : { id_token: idToken }),
    },
    { headers: { ...CORS_HEADERS, ...binding.headers } },
  )
