import { CanonicalUri, OAuthError, Pkce, Scope } from "@keyway/core"
import { Effect, Result } from "effect"
import type { ResolvedConfig } from "../Config.js"
import { TokenSigner } from "../Signing.js"
import type { StorageError } from "../storage/Errors.js"
import { type Client, type ClientStore, GrantStore } from "../storage/Storage.js"
import { authenticateClient } from "./clientAuth.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { randomToken } from "./crypto.js"
import { answerFailures, readForm } from "./formEndpoint.js"
import { CORS_HEADERS, json } from "./http.js"

const err = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

/** Issues an access token (RFC 9068) and records its `jti` under the grant before handing it out. */
const issueAccessToken = (
  config: ResolvedConfig,
  args: { grantId: string; subject: string; clientId: string; resource: string; scope: string; authTime: number },
) =>
  Effect.gen(function* () {
    const signer = yield* TokenSigner
    const grants = yield* GrantStore
    const iat = yield* nowSeconds
    const exp = iat + config.accessTokenTtl
    const jti = randomToken(16)
    yield* grants.recordAccessToken({ grant_id: args.grantId, jti, expires_at: exp }).pipe(
      Effect.catchTags({
        GrantNotFound: () => err("invalid_grant", "the grant no longer exists"),
        GrantRevoked: () => err("invalid_grant", "the grant has been revoked"),
      }),
    )
    const token = yield* signer
      .sign(
        {
          iss: config.issuer,
          sub: args.subject,
          aud: args.resource,
          client_id: args.clientId,
          scope: args.scope,
          jti,
          iat,
          exp,
          auth_time: args.authTime,
        },
        "at+jwt",
      )
      .pipe(Effect.catchTag("NoSigningKey", () => err("server_error", "no signing key is active")))
    return { token, expiresIn: config.accessTokenTtl }
  })

const authorizationCodeGrant = (config: ResolvedConfig, client: Client, form: Map<string, string>) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
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
    const record = yield* grants.consumeCode(code, now).pipe(
      Effect.catchTags({
        CodeNotFound: () => err("invalid_grant", "the authorization code is invalid"),
        CodeAlreadyUsed: () =>
          err("invalid_grant", "the authorization code was already used; tokens issued from it are revoked"),
        CodeExpired: () => err("invalid_grant", "the authorization code has expired"),
        GrantRevoked: () => err("invalid_grant", "the authorization code has been revoked"),
      }),
    )
    // The code is spent from here on: any mismatch below leaves it unusable, which is what a stolen code deserves.
    if (record.client_id !== client.client_id) {
      yield* grants.revokeGrant(record.grant_id, now).pipe(Effect.catchTag("GrantNotFound", () => Effect.void))
      return yield* err("invalid_grant", "the authorization code was issued to another client")
    }
    const redirectUri = form.get("redirect_uri")
    if (redirectUri === undefined ? client.redirect_uris.length !== 1 : redirectUri !== record.redirect_uri) {
      return yield* err("invalid_grant", "redirect_uri does not match the authorization request")
    }
    const ok = yield* Effect.promise(() => Pkce.verifyS256(verifier, record.code_challenge))
    if (!ok) return yield* err("invalid_grant", "code_verifier does not match the code_challenge")
    if (resource !== undefined && resource !== record.resource) {
      return yield* err("invalid_target", "resource differs from the one authorized")
    }

    const access = yield* issueAccessToken(config, {
      grantId: record.grant_id,
      subject: record.subject,
      clientId: client.client_id,
      resource: record.resource,
      scope: record.scope,
      authTime: record.auth_time,
    })
    let refreshToken: string | undefined
    if (client.grant_types.includes("refresh_token")) {
      refreshToken = randomToken(32)
      yield* grants
        .createRefresh({
          grant_id: record.grant_id,
          token: refreshToken,
          scope: record.scope,
          issued_at: now,
          expires_at: now + config.refreshTokenTtl,
        })
        .pipe(
          Effect.catchTags({
            GrantNotFound: () => err("invalid_grant", "the grant no longer exists"),
            GrantRevoked: () => err("invalid_grant", "the grant has been revoked"),
          }),
        )
    }
    return tokenResponse(access.token, access.expiresIn, record.scope, refreshToken)
  })

const refreshGrant = (config: ResolvedConfig, client: Client, form: Map<string, string>) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const presented = form.get("refresh_token")
    if (presented === undefined || presented === "") return yield* err("invalid_request", "refresh_token is missing")
    const scopeParam = form.get("scope")
    let requested: ReadonlyArray<string> | undefined
    if (scopeParam !== undefined) {
      const parsed = Scope.validate(scopeParam)
      if (Result.isFailure(parsed)) return yield* err("invalid_scope", "scope is malformed")
      requested = parsed.success
    }
    const resourceParam = form.get("resource")
    const now = yield* nowSeconds
    const refreshErrors = {
      RefreshTokenNotFound: () => err("invalid_grant", "the refresh token is invalid"),
      RefreshTokenExpired: () => err("invalid_grant", "the refresh token has expired"),
      RefreshTokenRevoked: () => err("invalid_grant", "the refresh token has been revoked"),
      RefreshTokenReused: () =>
        err("invalid_grant", "the refresh token was already used; its whole family is now revoked"),
    }
    const current = yield* grants.getRefresh(presented, now).pipe(Effect.catchTags(refreshErrors))
    if (current.client_id !== client.client_id) {
      return yield* err("invalid_grant", "the refresh token was issued to another client")
    }
    const granted = Scope.parse(current.scope)
    const scopes = requested ?? granted
    if (!Scope.containsAll(granted, scopes)) {
      return yield* err("invalid_scope", "scope may narrow but never widen the original grant")
    }
    if (resourceParam !== undefined) {
      const canonical = CanonicalUri.validate(resourceParam)
      if (Result.isFailure(canonical) || canonical.success !== current.resource) {
        return yield* err("invalid_target", "resource differs from the one the refresh token was issued for")
      }
    }
    const grant = yield* grants
      .getGrant(current.grant_id)
      .pipe(Effect.catchTag("GrantNotFound", () => err("invalid_grant", "the grant no longer exists")))

    const rotate = client.token_endpoint_auth_method === "none" || config.rotateConfidentialRefreshTokens
    let refreshToken: string | undefined
    if (rotate) {
      refreshToken = randomToken(32)
      // OAuth 2.1 §4.3.1 / RFC 6749 §6: the successor keeps the original scope; only the access token narrows.
      yield* grants
        .rotate({
          token: presented,
          new_token: refreshToken,
          client_id: client.client_id,
          scope: current.scope,
          now,
          expires_at: now + config.refreshTokenTtl,
        })
        .pipe(
          Effect.catchTags({
            ...refreshErrors,
            RefreshTokenClientMismatch: () => err("invalid_grant", "the refresh token was issued to another client"),
          }),
        )
    }
    const scope = Scope.format(scopes)
    const access = yield* issueAccessToken(config, {
      grantId: current.grant_id,
      subject: current.subject,
      clientId: client.client_id,
      resource: current.resource,
      scope,
      authTime: grant.auth_time,
    })
    return tokenResponse(access.token, access.expiresIn, scope, refreshToken)
  })

const tokenResponse = (accessToken: string, expiresIn: number, scope: string, refreshToken: string | undefined) =>
  json(
    {
      access_token: accessToken,
      token_type: "Bearer",
      expires_in: expiresIn,
      scope,
      ...(refreshToken === undefined ? {} : { refresh_token: refreshToken }),
    },
    { headers: CORS_HEADERS },
  )

/**
 * The token endpoint (OAuth 2.1 §3.2): form body only, size-capped, one authentication method, then the grant.
 */
export const tokenEndpoint = (
  config: ResolvedConfig,
  request: Request,
): Effect.Effect<Response, StorageError, ClientStore | GrantStore | TokenSigner | MetadataDocuments> =>
  Effect.gen(function* () {
    const form = yield* readForm(config, request)
    const { client } = yield* authenticateClient(request, form, [config.issuer, config.endpoints.token])
    const grantType = form.get("grant_type")
    if (grantType === undefined || grantType === "") return yield* err("invalid_request", "grant_type is missing")
    if (grantType !== "authorization_code" && grantType !== "refresh_token") {
      return yield* err("unsupported_grant_type", `grant_type ${grantType} is not supported`)
    }
    if (!client.grant_types.includes(grantType)) {
      return yield* err("unauthorized_client", `this client may not use the ${grantType} grant`)
    }
    return grantType === "authorization_code"
      ? yield* authorizationCodeGrant(config, client, form)
      : yield* refreshGrant(config, client, form)
  }).pipe(answerFailures(config, "token"))
