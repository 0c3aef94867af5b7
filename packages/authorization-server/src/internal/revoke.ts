import { OAuthError } from "@keyway/core"
import { Effect, Option } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { RateLimiterService } from "../RateLimiter.js"
import type { TokenSigner } from "../Signing.js"
import type { StorageError } from "../storage/Errors.js"
import { type Client, type ClientStore, GrantStore } from "../storage/Storage.js"
import { verifyAccessToken } from "./accessToken.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { emit } from "./events.js"
import { answerFailures, readForm } from "./formEndpoint.js"
import { CORS_HEADERS } from "./http.js"
import { authenticateWithinLimits } from "./limits.js"

/** Revokes the token if it is one of this client's refresh tokens; whether it was a refresh token at all. */
const revokeRefresh = (client: Client, token: string, now: number) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const found = yield* grants.findRefresh(token, now)
    if (Option.isNone(found)) return false
    // RFC 7009 §2.1: the token must have been issued to the requesting client; otherwise nothing happens, and the
    // answer stays 200 so the caller learns nothing about a token it does not own.
    if (found.value.client_id === client.client_id) yield* grants.revokeByRefreshToken(token, now)
    return true
  })

/** Revokes the token if it is one of this client's live access tokens; whether it was an access token at all. */
const revokeAccess = (config: ResolvedConfig, client: Client, token: string, now: number) =>
  Effect.gen(function* () {
    const claims = yield* verifyAccessToken(config, token, now)
    if (claims === undefined) return false
    if (claims.client_id === client.client_id) yield* (yield* GrantStore).revokeAccessToken(claims.jti, claims.exp)
    return true
  })

/**
 * The revocation endpoint (RFC 7009 §2): the client authenticates as at the token endpoint; a refresh token revokes
 * its whole grant (family, access tokens), an access token is revoked by `jti` until it expires. Unknown, invalid,
 * expired or foreign tokens get the same 200 (§2.2). `token_type_hint` only orders the look-ups; an unknown hint is
 * ignored, since both token types are supported.
 */
export const revokeEndpoint = (
  config: ResolvedConfig,
  request: Request,
  limiter: RateLimiterService,
): Effect.Effect<Response, StorageError, ClientStore | GrantStore | TokenSigner | MetadataDocuments> =>
  Effect.gen(function* () {
    const form = yield* readForm(config, request)
    const { client } = yield* authenticateWithinLimits(config, limiter, "revocation", request, form, [
      config.issuer,
      config.endpoints.token,
      config.endpoints.revocation,
    ])
    const token = form.get("token")
    if (token === undefined || token === "") {
      return yield* Effect.fail(OAuthError.make("invalid_request", "token is missing"))
    }
    const now = yield* nowSeconds
    if (form.get("token_type_hint") === "access_token") {
      if (!(yield* revokeAccess(config, client, token, now))) yield* revokeRefresh(client, token, now)
    } else if (!(yield* revokeRefresh(client, token, now))) {
      yield* revokeAccess(config, client, token, now)
    }
    const hint = form.get("token_type_hint")
    // Whether anything was revoked stays unsaid, as in the answer (RFC 7009 §2.2).
    yield* emit({
      event: "token_revoked",
      client_id: client.client_id,
      ...(hint === undefined ? {} : { token_type_hint: hint }),
    })
    return new Response(null, { status: 200, headers: { ...CORS_HEADERS, "Cache-Control": "no-store" } })
  }).pipe(answerFailures(config, "revocation"))
