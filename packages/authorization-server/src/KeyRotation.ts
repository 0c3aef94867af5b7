/**
 * Signing-key rotation over the {@link KeyStore}: a new key is published before it signs, the key it replaces stays
 * published until every token it signed has expired, and a schedule rotates when the newest key is old enough.
 *
 * All state is in the store (`created_at`, `activates_at`, `retires_at`, `status`), so the schedule survives
 * restarts and every instance sharing one database follows the same keys. Instances decide independently; two that
 * rotate at the same moment can both create a key, and the next check of either keeps the earlier one and withdraws
 * the other before it has signed anything, so the set converges to one new key per rotation.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#RotateSigKeys | OpenID Connect Core §10.1.1}
 * @module
 */
import { type Duration, Effect, Schedule } from "effect"
import { nowSeconds } from "./internal/clock.js"
import { emit } from "./internal/events.js"
import { generateSigningKey, type SigningAlgorithm } from "./Signing.js"
import type { StorageError } from "./storage/Errors.js"
import { KeyStore, type SigningKey } from "./storage/Storage.js"

/**
 * What rotation needs to know, in seconds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export interface RotationPolicy {
  /** Rotate when the newest key is this old; `false` for on demand only. */
  readonly rotateEvery: number | false
  /** How long a new key is published before it signs. */
  readonly publishAhead: number
  /** The access-token lifetime: how long after its last signature a key must stay published. */
  readonly accessTokenTtl: number
  /** Allowance for clocks differing between instances and verifiers. */
  readonly clockSkew: number
  /** The algorithm of generated keys. */
  readonly algorithm: SigningAlgorithm
}

/**
 * The outcome of {@link rotate}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-4.5 | RFC 7517 §4.5 (kid)}
 */
export interface Rotation {
  /** The key that takes over. */
  readonly kid: string
  readonly alg: string
  /** When it starts signing (NumericDate seconds); it is published already. */
  readonly activatesAt: number
  /** False when a key was already waiting to take over and is returned instead of a second one. */
  readonly created: boolean
}

/**
 * What one {@link maintain} round changed.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export interface MaintenanceReport {
  /** The key created by this round (a scheduled rotation, or a key because none could sign), if any. */
  readonly created?: string
  /** Superseded keys now retired: they sign no more and leave the JWK Set at their `retires_at`. */
  readonly retired: ReadonlyArray<string>
  /** Duplicate waiting keys withdrawn at once (they never signed). */
  readonly withdrawn: ReadonlyArray<string>
}

const live = (k: SigningKey, now: number) => k.retires_at === undefined || k.retires_at > now

/** Published and active but not signing yet. */
const waiting = (keys: ReadonlyArray<SigningKey>, now: number) =>
  keys.filter((k) => k.status === "active" && k.activates_at > now && live(k, now)).sort(byCreation)

const byCreation = (a: SigningKey, b: SigningKey) =>
  a.created_at - b.created_at || (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0)

const addKey = (key: SigningKey) =>
  Effect.flatMap(KeyStore, (keys) =>
    // The kid is the new key's thumbprint, so a clash would mean a broken random generator.
    keys.add(key).pipe(Effect.catchTag("KeyAlreadyExists", (e) => Effect.die(e))),
  )

const generate = (algorithm: SigningAlgorithm, now: number, activatesAt: number) =>
  Effect.map(
    Effect.promise(() => generateSigningKey(algorithm, now)),
    (key): SigningKey => ({ ...key, activates_at: activatesAt }),
  )

/**
 * Starts a rotation at `now`: a new key, published at once, that signs from `now + publishAhead`. When a key is
 * already waiting to take over, it is returned instead (`created: false`), so repeated or concurrent requests do not
 * pile up keys. The key it replaces keeps signing until then, and is retired by the next {@link maintain} after that.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#RotateSigKeys | OpenID Connect Core §10.1.1}
 */
export const rotate = (policy: RotationPolicy, now: number): Effect.Effect<Rotation, StorageError, KeyStore> =>
  Effect.gen(function* () {
    const keys = yield* KeyStore
    const pending = waiting(yield* keys.list(), now)[0]
    if (pending !== undefined) {
      return { kid: pending.kid, alg: pending.alg, activatesAt: pending.activates_at, created: false }
    }
    const key = yield* addKey(yield* generate(policy.algorithm, now, now + policy.publishAhead))
    yield* emit({ event: "key_rotated", kid: key.kid, activates_at: key.activates_at })
    return { kid: key.kid, alg: key.alg, activatesAt: key.activates_at, created: true }
  })

/**
 * One round of key upkeep at `now`, safe to run from several instances at once:
 * 1. of several keys waiting to take over, the earliest created stays and the others are withdrawn (`retires_at` =
 *    `now`): they have signed nothing, and every instance picks the same survivor;
 * 2. once the current key has signed for `clockSkew` seconds (so no instance with a slower clock still signs with an
 *    older one), every older active key is retired with `retires_at` = the current key's `activates_at` + access-token
 *    lifetime + `clockSkew`: the last moment a token it signed can still be valid;
 * 3. with no key able to sign, one is created that signs at once; otherwise, when `rotateEvery` is set and the newest
 *    key was created that long ago or longer, {@link rotate} starts a rotation.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const maintain = (
  policy: RotationPolicy,
  now: number,
): Effect.Effect<MaintenanceReport, StorageError, KeyStore> =>
  Effect.gen(function* () {
    const keys = yield* KeyStore
    const all = yield* keys.list()
    const withdrawn: Array<string> = []
    for (const duplicate of waiting(all, now).slice(1)) {
      yield* keys.retire(duplicate.kid, now).pipe(Effect.catchTag("KeyNotFound", () => Effect.void))
      withdrawn.push(duplicate.kid)
    }
    const current = yield* keys.current(now).pipe(Effect.catchTag("NoSigningKey", () => Effect.succeed(undefined)))
    const retired: Array<string> = []
    if (current !== undefined && now >= current.activates_at + policy.clockSkew) {
      const retiresAt = current.activates_at + policy.accessTokenTtl + policy.clockSkew
      for (const k of all) {
        if (k.kid === current.kid || k.status !== "active" || k.activates_at > current.activates_at || !live(k, now)) {
          continue
        }
        yield* keys.retire(k.kid, retiresAt).pipe(Effect.catchTag("KeyNotFound", () => Effect.void))
        retired.push(k.kid)
      }
    }
    if (current === undefined) {
      const key = yield* addKey(yield* generate(policy.algorithm, now, now))
      yield* emit({ event: "key_rotated", kid: key.kid, activates_at: key.activates_at, reason: "no key could sign" })
      return { created: key.kid, retired, withdrawn }
    }
    if (policy.rotateEvery !== false) {
      const newest = all
        .filter((k) => k.status === "active" && live(k, now) && !withdrawn.includes(k.kid))
        .reduce((a, b) => (b.created_at > a.created_at ? b : a), current)
      if (now - newest.created_at >= policy.rotateEvery) {
        const rotation = yield* rotate(policy, now)
        if (rotation.created) return { created: rotation.kid, retired, withdrawn }
      }
    }
    return { retired, withdrawn }
  })

const warn = (reason: unknown) =>
  Effect.logWarning("signing-key maintenance failed; retrying at the next interval", reason)

/**
 * Runs {@link maintain} now and then every `every`, forever, at the time of Effect's `Clock`. A failed round is logged
 * as a warning and the job carries on with the next.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const rotationJob = (policy: RotationPolicy, every: Duration.Input): Effect.Effect<never, never, KeyStore> => {
  const round = nowSeconds.pipe(
    Effect.flatMap((now) => maintain(policy, now)),
    // Failures and defects are logged and retried; an interruption (the server closing) ends the job.
    Effect.catch(warn),
    Effect.catchDefect(warn),
  )
  return Effect.repeat(round, Schedule.spaced(every)).pipe(
    Effect.andThen(Effect.never),
    Effect.withLogSpan("keyway.signing-keys"),
  )
}
