import type { Extension } from "@keyway/authorization-server"
import { OAuthError } from "@keyway/core"
import { Effect } from "effect"

/** The grant type of {@link reissue}. */
export const REISSUE = "urn:keyway:test:reissue"

/**
 * A test extension that re-issues one of the server's access tokens, under the same grant and no later expiry, with
 * the extra claims a test needs (`may_act`, a malformed `act`, `cnf`): through `Issue.claims`, as any grant would;
 * with `detach`, under no grant.
 */
export const reissue: Extension.AuthorizationServerExtension = {
  id: REISSUE,
  grants: [
    {
      grantType: REISSUE,
      clientAuthentication: "optional",
      handle: (context) =>
        Effect.gen(function* () {
          const token = yield* context.verifyAccessToken(context.form.get("token") ?? "")
          if (token === undefined) return yield* Effect.fail(OAuthError.make("invalid_grant", "not a live token"))
          return yield* context.issue({
            subject: token.subject,
            clientId: token.clientId,
            resource: token.resource,
            scope: token.scope,
            claims: JSON.parse(context.form.get("claims") ?? "{}") as Record<string, unknown>,
            expiresAt: token.expiresAt,
            // `detach`: under no grant, as a client credentials token is.
            ...(token.grant === undefined || context.form.has("detach") ? {} : { grantId: token.grant.id }),
          })
        }),
    },
  ],
}
