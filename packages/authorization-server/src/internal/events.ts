import { Context, Effect } from "effect"

/**
 * A security event, reported by the endpoint that decided it with the values it parsed itself: names, IDs, scopes,
 * error codes and outcomes, never a password, secret, code or token. Values that come from a request (a username, a
 * `client_id` or `redirect_uri` as sent) are reported as sent, unvalidated: quote or escape them before display.
 *
 * - `key_rotated`: a signing key created (on schedule, on demand, or because none could sign; then `reason`).
 * - `client_registered`, `registration_refused`: dynamic client registration (RFC 7591 §3.2).
 * - `login_succeeded`, `login_failed`: a sign-in on the login page of an authorization request (with its client,
 *   resource and scope) or on the account page (without them); a failure says why (`reason`).
 * - `consent_given`, `consent_denied`, `consent_refused`: the consent page (refused: the form failed its CSRF check).
 * - `consent_revoked`: a user revoked an app on the account page.
 * - `code_issued`: an authorization code sent to the client, after consent given now or remembered (OAuth 2.1 §4.1.2).
 * - `authorization_rejected`: an authorization request refused (OAuth 2.1 §4.1.2.1), on the error page (`page`: the
 *   client or redirect URI cannot be trusted) or by redirect to the client, with the `client_id` and `redirect_uri` the
 *   request carried.
 * - `token_issued`: an access token issued at the token endpoint, for every grant (`refresh_token` included); an
 *   exchanged token (RFC 8693) also names the resource it was exchanged from and its chain of actors.
 * - `token_refused`: a token request refused (OAuth 2.1 §3.2.4), with the grant type and client it named.
 * - `refresh_token_reuse_detected`: a rotated-out refresh token presented again; its family is revoked (OAuth 2.1
 *   §4.3.1).
 * - `token_revoked`: a revocation request a client made (RFC 7009 §2).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7 | OAuth 2.1 §7 (security considerations)}
 */
export type SecurityEvent =
  | {
      readonly event: "key_rotated"
      readonly kid: string
      /** When the key starts signing, in seconds since the epoch. */
      readonly activates_at: number
      readonly reason?: string
    }
  | {
      readonly event: "client_registered"
      readonly client_id: string
      readonly client_name?: string
      readonly token_endpoint_auth_method: string
      readonly redirect_uris: ReadonlyArray<string>
    }
  | { readonly event: "registration_refused"; readonly error: string; readonly description: string }
  | {
      readonly event: "login_succeeded"
      /** The username as typed. */
      readonly username: string
      /** The user it signed in. */
      readonly subject: string
      /** The authorization request's client, resource and scope; absent on the account page. */
      readonly client_id?: string
      readonly resource?: string
      readonly scope?: string
    }
  | {
      readonly event: "login_failed"
      /** Wrong username or password; too many failed attempts (`retry_after` seconds); the form's CSRF check. */
      readonly reason: "wrong_credentials" | "rate_limited" | "csrf"
      /** The username as typed; absent when the form failed its CSRF check. */
      readonly username?: string
      readonly client_id?: string
      readonly retry_after?: number
    }
  | {
      readonly event: "consent_given" | "consent_denied"
      readonly subject?: string
      readonly client_id: string
      readonly resource: string
      readonly scope: string
    }
  | { readonly event: "consent_refused"; readonly reason: "csrf" }
  | {
      readonly event: "consent_revoked"
      readonly subject: string
      readonly client_id: string
      /** The IDs of the grants revoked with the consent. */
      readonly revoked_grants: ReadonlyArray<string>
    }
  | {
      readonly event: "code_issued"
      readonly subject: string
      readonly client_id: string
      readonly resource: string
      readonly scope: string
      /** Consent `given` just now, or `remembered` from before. */
      readonly consent: "given" | "remembered"
    }
  | {
      readonly event: "authorization_rejected"
      /** The OAuth error code, and its description as the client or the user sees it. */
      readonly error: string
      readonly description: string
      /** The `client_id` and `redirect_uri` the request carried (each absent when it carried none). */
      readonly client_id?: string
      readonly redirect_uri?: string
      /** `page`: shown on the server's error page; `redirect`: sent back to the client's redirect URI. */
      readonly answered: "page" | "redirect"
    }
  | {
      readonly event: "token_issued"
      readonly grant_type: string
      readonly client_id: string
      /** The user, the client (client credentials) or the workload the token is for. */
      readonly subject: string
      readonly resource: string
      readonly scope: string
      /** The access token's lifetime, in seconds. */
      readonly expires_in: number
      readonly refresh_token_issued: boolean
      /** The resource of the token this one was exchanged from (RFC 8693: the subject token's `aud`). */
      readonly source_resource?: string
      /** The `sub` of each actor of the token's `act` chain, the current actor first (RFC 8693 §4.1). */
      readonly actors?: ReadonlyArray<string>
    }
  | {
      readonly event: "token_refused"
      readonly error: string
      readonly description: string
      /** The `grant_type` and the client the request named, when it could be read. */
      readonly grant_type?: string
      readonly client_id?: string
    }
  | { readonly event: "refresh_token_reuse_detected"; readonly client_id: string; readonly subject: string }
  | { readonly event: "token_revoked"; readonly client_id: string; readonly token_type_hint?: string }

/**
 * Receives each {@link SecurityEvent}, synchronously, while the endpoint answers: a receiver should hand slow work (a
 * remote log) to a queue of its own. One that throws loses that event (a warning names the event and the error) and
 * never changes the answer.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7 | OAuth 2.1 §7}
 */
export type SecurityEventFn = (event: SecurityEvent) => void

/**
 * Where the server reports its security events, if anywhere; nowhere by default. Provide it
 * (`Layer.succeed(SecurityEvents)(fn)`) next to the storage layer.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7 | OAuth 2.1 §7}
 */
export const SecurityEvents: Context.Reference<SecurityEventFn | undefined> = Context.Reference<
  SecurityEventFn | undefined
>("@keyway/authorization-server/SecurityEvents", { defaultValue: () => undefined })

/**
 * Reports one event to the {@link SecurityEvents} receiver, if there is one. A receiver that throws is the operator's
 * bug, not the client's: the request is answered as if it had not, and the failure is logged as a warning.
 */
export const emit = (event: SecurityEvent): Effect.Effect<void> =>
  SecurityEvents.use((receive) =>
    receive === undefined
      ? Effect.void
      : Effect.try({ try: () => receive(event), catch: (error) => error }).pipe(
          Effect.catch((error) =>
            Effect.logWarning(`the security event receiver threw; the ${event.event} event was not delivered`, error),
          ),
        ),
  )
