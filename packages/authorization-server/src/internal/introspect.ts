import { OAuthError } from "@keyway/core"
import { Effect, Option } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { RateLimiterService } from "../RateLimiter.js"
import type { TokenSigner } from "../Signing.js"
import type { StorageError } from "../storage/Errors.js"
import { type ClientStore, GrantStore } from "../storage/Storage.js"
import { verifyAccessToken } from "./accessToken.js"
import { ClientAuthFailure } from "./clientAuth.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { tokenType } from "./extensionMetadata.js"
import { answerFailures, readForm } from "./formEndpoint.js"
import { json } from "./http.js"
import { authenticateWithinLimits } from "./limits.js"

const inactive = () => json({ active: false })

/**
 * The introspection endpoint (RFC 7662 §2). Callers authenticate with client credentials (§2.1): a client that
 * authenticates with `none` is refused like an unauthenticated one (401). A client named in `introspectionClients`
 * (a resource server) may introspect every token; any other confidential client only its own tokens, and gets
 * `active: false` for the rest (§2.2 lets the answer depend on who asks, and says nothing about other clients' tokens).
 * Refresh tokens are active while their family is live. Never cached (§2.2 and §4).
 */
export const introspectEndpoint = (
  config: ResolvedConfig,
  request: Request,
  limiter: RateLimiterService,
): Effect.Effect<Response, StorageError, ClientStore | GrantStore | TokenSigner | MetadataDocuments> =>
  Effect.gen(function* () {
    const form = yield* readForm(config, request)
    const { client, method } = yield* authenticateWithinLimits(config, limiter, "introspection", request, form, [
      config.issuer,
      config.endpoints.token,
      config.endpoints.introspection,
    ])
    if (method === "none") {
      return yield* Effect.fail(
        new ClientAuthFailure({
          code: "invalid_client",
          description: "introspection needs client credentials",
        }),
      )
    }
    const token = form.get("token")
    if (token === undefined || token === "") {
      return yield* Effect.fail(OAuthError.make("invalid_request", "token is missing"))
    }
    const mayRead = (owner: string) => owner === client.client_id || config.introspectionClients.has(client.client_id)
    const grants = yield* GrantStore
    const now = yield* nowSeconds

    const claims = yield* verifyAccessToken(config, token, now)
    if (claims !== undefined) {
      if (!mayRead(claims.client_id) || (yield* grants.isAccessTokenRevoked(claims.jti))) return inactive()
      return json({
        active: true,
        scope: claims.scope,
        client_id: claims.client_id,
        sub: claims.sub,
        aud: claims.aud,
        iss: claims.iss,
        exp: claims.exp,
        iat: claims.iat,
        // A token bound to a key says so, with its confirmation (RFC 9449 §6.2 for DPoP's).
        token_type: tokenType(config.extensions, claims.cnf),
        jti: claims.jti,
        ...(claims.cnf === undefined ? {} : { cnf: claims.cnf }),
        // The delegation chain of an exchanged token (RFC 8693 §4.1, which lets introspection answer it).
        ...(claims.act === undefined ? {} : { act: claims.act }),
      })
    }
    const found = yield* grants.findRefresh(token, now)
    if (Option.isNone(found)) return inactive()
    const refresh = found.value
    if (!refresh.active || !mayRead(refresh.client_id)) return inactive()
    return json({
      active: true,
      scope: refresh.scope,
      client_id: refresh.client_id,
      sub: refresh.subject,
      aud: refresh.resource,
      iss: config.issuer,
      iat: refresh.issued_at,
      ...(refresh.expires_at === undefined ? {} : { exp: refresh.expires_at }),
      token_type: "refresh_token",
    })
  }).pipe(answerFailures(config, "introspection"))
