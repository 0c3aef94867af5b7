import { Context, Effect } from "effect"

/**
 * A security event the server itself decides, for an audit log: names, IDs and outcomes, never a secret or a token.
 * `key_rotated` when a signing key is created (on schedule, on demand, or because none could sign); `consent_revoked`
 * when a user revokes an app on the account page.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7 | OAuth 2.1 §7 (security considerations)}
 */
export interface SecurityEvent {
  readonly event: "key_rotated" | "consent_revoked"
  readonly [field: string]: string | number | boolean | ReadonlyArray<string> | undefined
}

/**
 * Receives each {@link SecurityEvent}.
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

/** Reports one event to the {@link SecurityEvents} receiver, if there is one. */
export const emit = (event: SecurityEvent): Effect.Effect<void> =>
  SecurityEvents.use((receive) => Effect.sync(() => receive?.(event)))
