/**
 * The periodic purge: expired codes, access-token ids, assertion ids, refresh tokens, dead families and empty grants,
 * expired cached clients, retired signing keys and forgotten rate-limit buckets are deleted on a schedule instead of by
 * hand.
 *
 * @module
 */
import { type Duration, Effect, Layer, Option, Schedule } from "effect"
import { nowSeconds } from "../internal/clock.js"
import { RateLimiter } from "../RateLimiter.js"
import type { StorageError } from "./Errors.js"
import { ClientStore, GrantStore, KeyStore, RecordStore, type Stores } from "./Storage.js"

/**
 * How many records one purge removed from each store.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export interface PurgeCounts {
  readonly clients: number
  readonly grants: number
  readonly keys: number
  /** Forgotten rate-limit buckets (0 when no {@link RateLimiter} is provided). */
  readonly rateLimits: number
  /** Expired extension records (0 when no {@link RecordStore} is provided). */
  readonly records: number
}

/**
 * Runs `purgeExpired` once on all three stores at `now` (NumericDate seconds), and on the {@link RateLimiter} and the
 * {@link RecordStore} when they are provided.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const purgeExpired = (now: number): Effect.Effect<PurgeCounts, StorageError, Stores> =>
  Effect.gen(function* () {
    const clients = yield* (yield* ClientStore).purgeExpired(now)
    const grants = yield* (yield* GrantStore).purgeExpired(now)
    const keys = yield* (yield* KeyStore).purgeExpired(now)
    const limiter = yield* Effect.serviceOption(RateLimiter)
    const rateLimits = Option.isSome(limiter) ? yield* limiter.value.purgeExpired(now) : 0
    const recordStore = yield* Effect.serviceOption(RecordStore)
    const records = Option.isSome(recordStore) ? yield* recordStore.value.purgeExpired(now) : 0
    return { clients, grants, keys, rateLimits, records }
  })

/**
 * Options for {@link purgeJob} and {@link layerPurge}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export interface PurgeOptions {
  /** The pause between two purges (the first runs at once), e.g. `"5 minutes"`. */
  readonly every: Duration.Input
}

/**
 * Purges all three stores now and then again after every `every`, forever, at the time of Effect's `Clock`. A failed
 * round (the database briefly unreachable) is logged as a warning and the job carries on with the next round.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const purgeJob = (options: PurgeOptions): Effect.Effect<never, never, Stores> => {
  const round = nowSeconds.pipe(
    Effect.flatMap(purgeExpired),
    Effect.catch((error) => Effect.logWarning("storage purge failed; retrying at the next interval", error)),
  )
  return Effect.repeat(round, Schedule.spaced(options.every)).pipe(
    Effect.andThen(Effect.never),
    Effect.withLogSpan("keyway.storage.purge"),
  )
}

/**
 * Runs {@link purgeJob} in the background for as long as the layer's scope is open, one job per instance (several
 * instances on one database purge idempotently).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const layerPurge = (options: PurgeOptions): Layer.Layer<never, never, Stores> =>
  Layer.effectDiscard(Effect.forkScoped(purgeJob(options)))
