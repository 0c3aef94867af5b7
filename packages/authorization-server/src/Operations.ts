/**
 * What an operator watches: a readiness check (the database answers and a key can sign) and the timing of every
 * storage operation, for health endpoints and metrics. Neither costs anything until used: the storage timing is off
 * unless a {@link StorageObserver} is provided.
 *
 * @see {@link https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/ | Kubernetes: liveness, readiness and startup probes}
 * @module
 */
import { Effect } from "effect"
import { nowSeconds } from "./internal/clock.js"
import { KeyStore } from "./storage/Storage.js"

export { type SecurityEvent, type SecurityEventFn, SecurityEvents } from "./internal/events.js"
export { StorageObserver, type StorageObserverFn } from "./storage/internal/observer.js"

/**
 * The outcome of {@link readiness}: whether the database answered and whether a key can sign access tokens now.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2 | RFC 9068 §2 (signed access tokens)}
 */
export interface Readiness {
  readonly ready: boolean
  readonly database: "ok" | "failed"
  readonly signingKey: "ok" | "missing" | "unknown"
}

/**
 * Checks what serving tokens needs: one read of the current signing key, which also proves the database answers.
 * Never fails: a failure is the answer.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const readiness: Effect.Effect<Readiness, never, KeyStore> = Effect.gen(function* () {
  const keys = yield* KeyStore
  const now = yield* nowSeconds
  return yield* keys.current(now).pipe(
    Effect.as<Readiness>({ ready: true, database: "ok", signingKey: "ok" }),
    Effect.catchTag("NoSigningKey", () =>
      Effect.succeed<Readiness>({ ready: false, database: "ok", signingKey: "missing" }),
    ),
    Effect.catchCause(() => Effect.succeed<Readiness>({ ready: false, database: "failed", signingKey: "unknown" })),
  )
})
