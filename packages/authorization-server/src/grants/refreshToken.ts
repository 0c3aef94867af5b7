/**
 * The refresh token grant: rotation for public clients (and confidential ones when configured), reuse detection that
 * revokes the family, scope that may narrow but never widen.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3 | OAuth 2.1 §4.3}
 * @module
 */
import { CanonicalUri, Grant, type OAuthError, Scope } from "@keyway/core"
import { Effect, Option, Result } from "effect"
import type { GrantHandler } from "../Extension.js"
import { nowSeconds } from "../internal/clock.js"
import { emit } from "../internal/events.js"
import { addressOf, limitPublicToken } from "../internal/limits.js"
import type { GrantServices } from "./registry.js"
import { err, signAccessToken, tokenResponse } from "./tokens.js"

/** The answers to a refresh token that cannot be used; reuse is reported as a security event too. */
const refreshErrors = (token: { readonly client_id: string; readonly subject: string }) => ({
  RefreshTokenNotFound: () => err("invalid_grant", "the refresh token is invalid"),
  RefreshTokenExpired: () => err("invalid_grant", "the refresh token has expired"),
  RefreshTokenRevoked: () => err("invalid_grant", "the refresh token has been revoked"),
  RefreshTokenReused: () =>
    emit({ event: "refresh_token_reuse_detected", client_id: token.client_id, subject: token.subject }).pipe(
      Effect.andThen(err("invalid_grant", "the refresh token was already used; its whole family is now revoked")),
    ),
})

/**
 * The `refresh_token` grant over the server's grant store, signer and limiter. A public client's request is counted
 * here, not before the grant as for the other grants: per client address and per refresh-token family, in one check
 * once the family is known.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3 | OAuth 2.1 §4.3}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3.1 | OAuth 2.1 §4.3.1}
 */
export const refreshTokenGrant = ({ grants, signer, limiter }: GrantServices): GrantHandler => ({
  grantType: Grant.REFRESH_TOKEN,
  clientAuthentication: "required",
  handle: ({ config, request, client, form, binding }) =>
    Effect.gen(function* () {
      // A `required` grant is reached only by an authenticated client.
      if (client === undefined) return yield* err("invalid_client", "client authentication failed")
      const presented = form.get("refresh_token")
      const now = yield* nowSeconds
      // Looked up without side effects: what the token is for decides the access token signed below; whether it may
      // still be used (reuse, revocation, expiry) is decided in the one transaction that records that access token.
      const found =
        presented === undefined || presented === "" ? Option.none() : yield* grants.findRefresh(presented, now)
      // A public client's limits (its address, the token's family) in one check, as soon as the family is known; a
      // client that authenticated has spent its own allowance.
      if (client.token_endpoint_auth_method === "none") {
        yield* limitPublicToken(
          config,
          limiter,
          addressOf(config, request),
          Option.isSome(found) ? found.value.family_id : undefined,
        )
      }
      if (presented === undefined || presented === "") return yield* err("invalid_request", "refresh_token is missing")
      const scopeParam = form.get("scope")
      let requested: ReadonlyArray<string> | undefined
      if (scopeParam !== undefined) {
        const parsed = Scope.validate(scopeParam)
        if (Result.isFailure(parsed)) return yield* err("invalid_scope", "scope is malformed")
        requested = parsed.success
      }
      const resourceParam = form.get("resource")
      if (Option.isNone(found)) return yield* err("invalid_grant", "the refresh token is invalid")
      const current = found.value
      const unusable = refreshErrors(current)
      // A request that fails a check answers first what presenting the token means (a rotated-out token is reuse and
      // revokes the family; a revoked or expired one says so), as a refresh would.
      const refuse = (failure: Effect.Effect<never, OAuthError.OAuthError>) =>
        grants.getRefresh(presented, now).pipe(Effect.catchTags(unusable), Effect.andThen(failure))
      if (current.client_id !== client.client_id) {
        return yield* refuse(err("invalid_grant", "the refresh token was issued to another client"))
      }
      // A refresh token of a family bound to a confirmation (RFC 7800 §3.1: a proof-of-possession key) is used only
      // by a request that proves the same.
      if (current.confirmation !== undefined && current.confirmation !== binding.confirmation) {
        return yield* refuse(
          err(
            "invalid_grant",
            binding.confirmation === undefined
              ? "the refresh token is bound to a proof-of-possession key and this request proves none"
              : "the refresh token is bound to another proof-of-possession key than this request proves",
          ),
        )
      }
      const granted = Scope.parse(current.scope)
      const scopes = requested ?? granted
      if (!Scope.containsAll(granted, scopes)) {
        return yield* refuse(err("invalid_scope", "scope may narrow but never widen the original grant"))
      }
      if (resourceParam !== undefined) {
        const canonical = CanonicalUri.validate(resourceParam)
        if (Result.isFailure(canonical) || canonical.success !== current.resource) {
          return yield* refuse(err("invalid_target", "resource differs from the one the refresh token was issued for"))
        }
      }

      const scope = Scope.format(scopes)
      const access = yield* signAccessToken(signer, config, binding, {
        subject: current.subject,
        clientId: client.client_id,
        resource: current.resource,
        scope,
        authTime: current.auth_time,
      })
      const rotate = client.token_endpoint_auth_method === "none" || config.rotateConfidentialRefreshTokens
      // OAuth 2.1 §4.3.1 / RFC 6749 §6: a successor keeps the original scope; only the access token narrows.
      const refreshed = yield* grants
        .refresh({
          token: presented,
          client_id: client.client_id,
          now,
          access_token: access.record,
          ...(rotate
            ? {
                rotation: {
                  expires_at: now + config.refreshTokenTtl,
                  reuse_interval: config.refreshTokenReuseInterval,
                },
              }
            : {}),
        })
        .pipe(
          Effect.catchTags({
            ...unusable,
            RefreshTokenClientMismatch: () => err("invalid_grant", "the refresh token was issued to another client"),
            GrantRevoked: () => err("invalid_grant", "the grant has been revoked"),
          }),
        )
      yield* emit({
        event: "token_issued",
        grant_type: Grant.REFRESH_TOKEN,
        client_id: client.client_id,
        subject: current.subject,
        resource: current.resource,
        scope,
        expires_in: config.accessTokenTtl,
        refresh_token_issued: refreshed.refresh_token !== undefined,
      })
      return tokenResponse(binding, access.token, config.accessTokenTtl, scope, refreshed.refresh_token)
    }),
})
