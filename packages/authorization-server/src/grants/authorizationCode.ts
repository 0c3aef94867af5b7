/**
 * The authorization code grant: a code the authorization endpoint issued, redeemed with its PKCE verifier.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.3 | OAuth 2.1 §4.1.3}
 * @module
 */
import { CanonicalUri, Grant, type OAuthError, Pkce, Scope } from "@keyway/core"
import { Effect, Option, Result } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { GrantHandler, TokenBinding } from "../Extension.js"
import { nowSeconds } from "../internal/clock.js"
import { randomToken } from "../internal/crypto.js"
import { emit } from "../internal/events.js"
import type { TokenSigner } from "../Signing.js"
import type { AuthorizationCode, Client } from "../storage/Storage.js"
import type { GrantServices } from "./registry.js"
import { err, signAccessToken, signJwt, tokenResponse } from "./tokens.js"

const codeErrors = {
  CodeNotFound: () => err("invalid_grant", "the authorization code is invalid"),
  CodeAlreadyUsed: () =>
    err("invalid_grant", "the authorization code was already used; tokens issued from it are revoked"),
  CodeExpired: () => err("invalid_grant", "the authorization code has expired"),
  GrantRevoked: () => err("invalid_grant", "the authorization code has been revoked"),
}

/**
 * An OpenID Connect ID token for the client the code was issued to.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#IDToken | OpenID Connect Core 1.0 §2}
 */
const signIdToken = (
  signer: TokenSigner["Service"],
  config: ResolvedConfig,
  clientId: string,
  record: { readonly subject: string; readonly auth_time: number; readonly nonce?: string | undefined },
) =>
  Effect.gen(function* () {
    const iat = yield* nowSeconds
    return yield* signJwt(
      signer,
      {
        iss: config.issuer,
        sub: record.subject,
        aud: clientId,
        exp: iat + config.accessTokenTtl,
        iat,
        auth_time: record.auth_time,
        ...(record.nonce === undefined ? {} : { nonce: record.nonce }),
      },
      "JWT",
    )
  })

/**
 * Issues what an authorization's code is redeemed for, as one step: the access token (signed first), a refresh token
 * when the client may refresh (bound as the request's binding asks), an ID token when `openid` was granted, the code
 * consumed, the access token recorded and the refresh family opened in one transaction; reported as `token_issued`
 * under `grantType`. The code's checks are the caller's.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.3 | OAuth 2.1 §4.1.3}
 */
export const redeemAuthorization = (
  { grants, signer }: Pick<GrantServices, "grants" | "signer">,
  config: ResolvedConfig,
  client: Client,
  binding: TokenBinding,
  code: string,
  record: AuthorizationCode,
  grantType: string,
) =>
  Effect.gen(function* () {
    const now = yield* nowSeconds
    const access = yield* signAccessToken(signer, config, binding, {
      subject: record.subject,
      clientId: client.client_id,
      resource: record.resource,
      scope: record.scope,
      authTime: record.auth_time,
    })
    const refreshToken = client.grant_types.includes("refresh_token") ? randomToken(32) : undefined
    // OpenID Connect Core 1.0 §3.1.3.3: an ID token for the client when `openid` was granted.
    const idToken =
      config.openid && Scope.parse(record.scope).includes("openid")
        ? yield* signIdToken(signer, config, client.client_id, record)
        : undefined
    // One transaction: the code consumed, the access token recorded, the refresh family opened.
    yield* grants
      .redeemCode({
        code,
        now,
        access_token: access.record,
        ...(refreshToken === undefined
          ? {}
          : {
              refresh: {
                token: refreshToken,
                expires_at: now + config.refreshTokenTtl,
                ...(binding.bindRefreshTokens === true && binding.confirmation !== undefined
                  ? { confirmation: binding.confirmation }
                  : {}),
              },
            }),
      })
      .pipe(Effect.catchTags(codeErrors))
    yield* emit({
      event: "token_issued",
      grant_type: grantType,
      client_id: client.client_id,
      subject: record.subject,
      resource: record.resource,
      scope: record.scope,
      expires_in: config.accessTokenTtl,
      refresh_token_issued: refreshToken !== undefined,
    })
    return tokenResponse(binding, access.token, config.accessTokenTtl, record.scope, refreshToken, idToken)
  })

/**
 * The `authorization_code` grant over the server's grant store and signer. A request that fails a check spends the
 * code; a code issued to another client also revokes its grant; the tokens are signed first and the code redeemed,
 * the access token recorded and the refresh family opened in one transaction.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.3 | OAuth 2.1 §4.1.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.6 | RFC 7636 §4.6}
 */
export const authorizationCodeGrant = ({ grants, signer }: GrantServices): GrantHandler => ({
  grantType: Grant.AUTHORIZATION_CODE,
  clientAuthentication: "required",
  handle: ({ config, client, form, binding }) =>
    Effect.gen(function* () {
      // A `required` grant is reached only by an authenticated client.
      if (client === undefined) return yield* err("invalid_client", "client authentication failed")
      const code = form.get("code")
      if (code === undefined || code === "") return yield* err("invalid_request", "code is missing")
      const verifier = form.get("code_verifier")
      if (verifier === undefined || verifier === "") return yield* err("invalid_request", "code_verifier is missing")
      if (!Pkce.isVerifier(verifier)) {
        return yield* err("invalid_request", "code_verifier must be 43 to 128 unreserved characters (RFC 7636 §4.1)")
      }
      const resourceParam = form.get("resource")
      let resource: string | undefined
      if (resourceParam !== undefined) {
        const canonical = CanonicalUri.validate(resourceParam)
        if (Result.isFailure(canonical)) return yield* err("invalid_target", "resource is not a valid absolute URI")
        resource = canonical.success
      }

      const now = yield* nowSeconds
      const found = yield* grants.findCode(code)
      if (Option.isNone(found)) return yield* err("invalid_grant", "the authorization code is invalid")
      const record = found.value
      // A request that fails a check below spends the code (a stolen code gets no second try); a code already used,
      // expired or revoked answers that first, as the redemption itself would.
      const refuse = (failure: Effect.Effect<never, OAuthError.OAuthError>, revokeGrant = false) =>
        Effect.gen(function* () {
          yield* grants.consumeCode(code, now).pipe(Effect.catchTags(codeErrors))
          if (revokeGrant) {
            yield* grants.revokeGrant(record.grant_id, now).pipe(Effect.catchTag("GrantNotFound", () => Effect.void))
          }
          return yield* failure
        })
      if (record.client_id !== client.client_id) {
        return yield* refuse(err("invalid_grant", "the authorization code was issued to another client"), true)
      }
      // OAuth 2.1 §4.1.3: redirect_uri is required exactly when the authorization request carried it, and then must
      // be identical; without it there, the client's one registered redirect URI was used.
      const redirectUri = form.get("redirect_uri")
      if (redirectUri === undefined && record.redirect_uri_sent === true) {
        return yield* refuse(err("invalid_grant", "redirect_uri is required: the authorization request carried one"))
      }
      if (redirectUri !== undefined && redirectUri !== record.redirect_uri) {
        return yield* refuse(err("invalid_grant", "redirect_uri does not match the authorization request"))
      }
      const ok = yield* Effect.promise(() => Pkce.verifyS256(verifier, record.code_challenge))
      if (!ok) return yield* refuse(err("invalid_grant", "code_verifier does not match the code_challenge"))
      if (resource !== undefined && resource !== record.resource) {
        return yield* refuse(err("invalid_target", "resource differs from the one authorized"))
      }
      // A code whose authorization request named a confirmation (RFC 7800 §3.1: a proof-of-possession key) is
      // redeemed only by a request that proves the same.
      if (record.confirmation !== undefined && record.confirmation !== binding.confirmation) {
        return yield* refuse(
          err(
            "invalid_grant",
            binding.confirmation === undefined
              ? "the authorization code is bound to a proof-of-possession key and this request proves none"
              : "the authorization code is bound to another proof-of-possession key than this request proves",
          ),
        )
      }

      return yield* redeemAuthorization(
        { grants, signer },
        config,
        client,
        binding,
        code,
        record,
        Grant.AUTHORIZATION_CODE,
      )
    }),
})
