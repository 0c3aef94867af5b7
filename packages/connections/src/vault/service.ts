/**
 * The vault's rules, written once over the {@link Store} port: records sealed under the key ring with their row as
 * additional data, freshness with a skew, single flight of refreshes in this process (one per connection however many
 * callers) and across instances (a lease taken by compare-and-set on the row's version: the instance that does not
 * get it waits for the holder's tokens instead of spending the refresh token again, since providers rotate them).
 */
import { Bytes } from "@keyway/core"
import { Cause, Deferred, Effect, Exit, Option, Result } from "effect"
import type { KeyRing, Sealed } from "../KeyRing.js"
import type { Connection, ConnectionKey, PendingFlow, ProviderTokens, Vault } from "../Vault.js"
import { RefreshRejected, VaultError } from "./errors.js"
import type { ConnectionRow, Store } from "./store.js"

/** Tuning of a vault; the defaults suit providers whose access tokens live minutes to hours. */
export interface VaultOptions {
  /** Seconds before expiry at which a token is refreshed rather than handed out (60). */
  readonly skewSeconds?: number
  /**
   * Seconds an instance may hold a connection's refresh lease (30): another instance waits that long at most for its
   * tokens before refreshing itself, as when the holder crashed.
   */
  readonly leaseSeconds?: number
  /** Milliseconds between two reads of a connection whose refresh another instance holds (100). */
  readonly pollMillis?: number
}

const encoder = new TextEncoder()

/** SHA-256 of a flow reference, base64url: the row is found by it, and the reference itself is stored nowhere. */
export const hashReference = (reference: string): Effect.Effect<string> =>
  Effect.promise(async () =>
    Bytes.base64UrlEncode(new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(reference)))),
  )

// The additional data binds a ciphertext to its row: moved to another row it does not open.
const connectionAad = (key: ConnectionKey): string =>
  JSON.stringify(["keyway/connections/connection", key.issuer, key.subject, key.provider])
const flowAad = (referenceHash: string): string => JSON.stringify(["keyway/connections/flow", referenceHash])

const keyOf = (row: ConnectionRow): ConnectionKey => ({
  issuer: row.issuer,
  subject: row.subject,
  provider: row.provider,
})

const sealedOf = (row: Sealed): Sealed => ({ keyId: row.keyId, iv: row.iv, ciphertext: row.ciphertext })

/** Builds the {@link Vault} service over a backend. */
export const makeVault = (store: Store, keyRing: KeyRing, options: VaultOptions = {}): Vault["Service"] => {
  const skew = options.skewSeconds ?? 60
  const leaseSeconds = options.leaseSeconds ?? 30
  const pollMillis = options.pollMillis ?? 100
  const inflight = new Map<string, Deferred.Deferred<Option.Option<ProviderTokens>, unknown>>()

  const openTokens = (row: ConnectionRow): Effect.Effect<ProviderTokens, VaultError> =>
    keyRing
      .open(sealedOf(row), connectionAad(keyOf(row)))
      .pipe(Effect.map((text) => JSON.parse(text) as ProviderTokens))
  const sealTokens = (key: ConnectionKey, tokens: ProviderTokens) =>
    keyRing.seal(JSON.stringify(tokens), connectionAad(key))
  const toConnection = (row: ConnectionRow): Effect.Effect<Connection, VaultError> =>
    openTokens(row).pipe(
      Effect.map((tokens) => ({
        key: keyOf(row),
        tokens,
        status: row.status,
        connectedAt: row.connectedAt,
        updatedAt: row.updatedAt,
      })),
    )
  const fresh = (tokens: ProviderTokens, now: number) => tokens.expiresAt === undefined || tokens.expiresAt - now > skew

  /** What `token` answers from a row without refreshing, or `refresh` when it must. */
  const assess = (
    row: ConnectionRow | undefined,
    now: number,
  ): Effect.Effect<
    Option.Option<ProviderTokens> | { readonly refresh: ProviderTokens & { refreshToken: string } },
    VaultError
  > => {
    if (row === undefined || row.status !== "connected") return Effect.succeed(Option.none())
    return openTokens(row).pipe(
      Effect.map((tokens) => {
        if (fresh(tokens, now)) return Option.some(tokens)
        if (tokens.refreshToken === undefined) return Option.none()
        return { refresh: { ...tokens, refreshToken: tokens.refreshToken } }
      }),
    )
  }

  // One instance's attempt: read, take the lease or wait for its holder, refresh, write. `waited` moves this
  // instance's view of the time on while it waits, so that a lease left by a crashed holder ends.
  const refreshAcrossInstances = <E>(
    key: ConnectionKey,
    now: number,
    refresh: (refreshToken: string) => Effect.Effect<ProviderTokens, RefreshRejected | E>,
    waited: number,
  ): Effect.Effect<Option.Option<ProviderTokens>, VaultError | RefreshRejected | E> =>
    Effect.gen(function* () {
      const row = yield* store.getConnection(key)
      const assessed = yield* assess(row, now)
      if (Option.isOption(assessed) || row === undefined) return Option.isOption(assessed) ? assessed : Option.none()
      const at = now + Math.floor(waited / 1000)
      if (row.lease !== null && row.leaseUntil > at) {
        yield* Effect.sleep(pollMillis)
        return yield* refreshAcrossInstances(key, now, refresh, waited + pollMillis)
      }
      const lease = Bytes.randomBase64Url(16)
      if (!(yield* store.claim(key, row.version, lease, at + leaseSeconds, at)))
        return yield* refreshAcrossInstances(key, now, refresh, waited)
      const old = assessed.refresh
      const exit = yield* Effect.exit(refresh(old.refreshToken))
      if (Exit.isSuccess(exit)) {
        // A response without a refresh token keeps the old one (RFC 6749 §6).
        const next: ProviderTokens =
          exit.value.refreshToken === undefined ? { ...exit.value, refreshToken: old.refreshToken } : exit.value
        yield* store.finish(key, lease, yield* sealTokens(key, next), "connected", at)
        return Option.some(next)
      }
      const error = Cause.findError(exit.cause)
      if (Result.isSuccess(error) && error.success instanceof RefreshRejected)
        yield* store.finish(key, lease, undefined, "broken", at)
      else yield* store.release(key, lease)
      return yield* Effect.failCause(exit.cause)
    })

  // Single flight in this process: the first caller's refresh runs detached, so that a caller giving up does not
  // cancel it for the others, and every concurrent caller for the connection awaits it.
  const shared = <E>(
    key: ConnectionKey,
    now: number,
    refresh: (refreshToken: string) => Effect.Effect<ProviderTokens, RefreshRejected | E>,
  ): Effect.Effect<Option.Option<ProviderTokens>, VaultError | RefreshRejected | E> =>
    Effect.suspend(() => {
      const id = connectionAad(key)
      const running = inflight.get(id)
      if (running !== undefined)
        return Deferred.await(running) as Effect.Effect<Option.Option<ProviderTokens>, VaultError | RefreshRejected | E>
      const deferred = Deferred.makeUnsafe<Option.Option<ProviderTokens>, VaultError | RefreshRejected | E>()
      inflight.set(id, deferred as Deferred.Deferred<Option.Option<ProviderTokens>, unknown>)
      return refreshAcrossInstances(key, now, refresh, 0).pipe(
        Effect.exit,
        Effect.flatMap((exit) =>
          Effect.suspend(() => {
            inflight.delete(id)
            return Deferred.done(deferred, exit)
          }),
        ),
        Effect.forkDetach,
        Effect.andThen(Deferred.await(deferred)),
      )
    })

  const openFlow = (referenceHash: string, sealed: Sealed): Effect.Effect<PendingFlow, VaultError> =>
    keyRing.open(sealed, flowAad(referenceHash)).pipe(Effect.map((text) => JSON.parse(text) as PendingFlow))

  return {
    get: (key) =>
      store
        .getConnection(key)
        .pipe(
          Effect.flatMap((row) =>
            row === undefined ? Effect.succeed(Option.none()) : Effect.asSome(toConnection(row)),
          ),
        ),
    put: (key, tokens, now) =>
      sealTokens(key, tokens).pipe(Effect.flatMap((sealed) => store.putConnection(key, sealed, now))),
    token: (key, now, refresh) =>
      store.getConnection(key).pipe(
        Effect.flatMap((row) => assess(row, now)),
        Effect.flatMap((assessed) =>
          Option.isOption(assessed) ? Effect.succeed(assessed) : shared(key, now, refresh),
        ),
      ),
    markBroken: (key, now) => store.markBroken(key, now),
    delete: (key) => store.deleteConnection(key),
    list: (issuer, subject) =>
      store.listConnections(issuer, subject).pipe(Effect.flatMap((rows) => Effect.forEach(rows, toConnection))),
    putFlow: (reference, flow) =>
      Effect.gen(function* () {
        const referenceHash = yield* hashReference(reference)
        const sealed = yield* keyRing.seal(JSON.stringify(flow), flowAad(referenceHash))
        yield* store.putFlow({ referenceHash, expiresAt: flow.expiresAt, ...sealed })
      }),
    getFlow: (reference, now) =>
      Effect.gen(function* () {
        const referenceHash = yield* hashReference(reference)
        const row = yield* store.getFlow(referenceHash, now)
        return row === undefined ? Option.none() : Option.some(yield* openFlow(referenceHash, row))
      }),
    takeFlow: (reference, now) =>
      Effect.gen(function* () {
        const referenceHash = yield* hashReference(reference)
        const row = yield* store.takeFlow(referenceHash, now)
        return row === undefined ? Option.none() : Option.some(yield* openFlow(referenceHash, row))
      }),
    purgeFlows: (now) => store.purgeFlows(now),
    reencrypt: () =>
      Effect.gen(function* () {
        let rewritten = 0
        for (const row of yield* store.connectionsNotUnder(keyRing.current)) {
          const sealed = yield* sealTokens(keyOf(row), yield* openTokens(row))
          if (yield* store.reseal(keyOf(row), row.version, sealed)) rewritten++
        }
        for (const row of yield* store.flowsNotUnder(keyRing.current)) {
          const plaintext = yield* keyRing.open(sealedOf(row), flowAad(row.referenceHash))
          const sealed = yield* keyRing.seal(plaintext, flowAad(row.referenceHash))
          if (yield* store.resealFlow(row.referenceHash, sealedOf(row), sealed)) rewritten++
        }
        return rewritten
      }),
  }
}

/** A storage failure as a {@link VaultError} naming the operation. */
export const storageError = (operation: string, error: unknown): VaultError =>
  new VaultError({
    reason: "storage",
    message: `vault storage failed (${operation}): ${error instanceof Error ? error.message : String(error)}`,
  })
