/**
 * The contract every vault backend meets, run on memory, SQLite and PostgreSQL. A backend gives a fresh storage and
 * opens vault instances over it (each SQL instance on its own connection), so that rotation reopens the same records
 * under another key ring and the race tests put two instances on one database.
 */
import { it } from "@effect/vitest"
import { Clock, Effect, Exit, Option } from "effect"
import { TestClock } from "effect/testing"
import { afterEach, beforeEach, describe, expect } from "vitest"
import * as KeyRing from "../src/KeyRing.js"
import type { ConnectionKey, ProviderTokens, Vault } from "../src/Vault.js"
import { RefreshRejected, VaultError } from "../src/vault/errors.js"
import type { VaultOptions } from "../src/vault/service.js"
import type { Store } from "../src/vault/store.js"

export interface Storage {
  /** The rows as stored, to look at and move sealed records around. */
  readonly store: Store
  /** A vault instance over this storage. */
  readonly open: (keyRing: KeyRing.KeyRing, options?: VaultOptions) => Promise<Vault["Service"]>
  readonly close: () => Promise<void>
}

export interface Backend {
  readonly name: string
  readonly fresh: () => Promise<Storage>
}

export const keyA = KeyRing.generateKey()
export const keyB = KeyRing.generateKey()
export const ringA = KeyRing.make({ keys: [{ id: "-a", key: keyA }] })

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)
const failureOf = async <A, E>(effect: Effect.Effect<A, E>): Promise<unknown> => {
  const exit = await Effect.runPromise(Effect.exit(effect))
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  const error = exit.cause.reasons[0]
  return error !== undefined && "error" in error ? error.error : error
}

/** A promise to settle by hand, so that concurrent callers overlap for sure. */
const gate = () => {
  let open!: () => void
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { open, opened }
}

export const user: ConnectionKey = { issuer: "https://as.example", subject: "-sub-1", provider: "-code-host" }
const other: ConnectionKey = { issuer: "https://as.example", subject: "-sub-1", provider: "calendar" }
const stranger: ConnectionKey = { issuer: "https://as.example", subject: "-sub-2", provider: "-code-host" }
const NOW = 1_800_000_000

export const tokens = (suffix: string, expiresAt?: number): ProviderTokens => ({
  accessToken: `access-${suffix}-secret`,
  tokenType: "Bearer",
  refreshToken: `refresh-${suffix}-secret`,
  ...(expiresAt === undefined ? {} : { expiresAt }),
  scope: "repo",
})

export const vaultContract = (backend: Backend): void => {
  describe(`vault contract: ${backend.name}`, () => {
    let storage: Storage
    let vault: Vault["Service"]
    beforeEach(async () => {
      storage = await backend.fresh()
      vault = await storage.open(ringA)
    })
    afterEach(async () => {
      await storage.close()
    })

    it("stores, reads, lists and deletes connections", async () => {
      await run(vault.put(user, tokens("1", NOW + 3600), NOW))
      await run(vault.put(other, tokens("2"), NOW + 5))
      await run(vault.put(stranger, tokens("3"), NOW))
      const read = Option.getOrThrow(await run(vault.get(user)))
      expect(read).toEqual({
        key: user,
        tokens: tokens("1", NOW + 3600),
        status: "connected",
        connectedAt: NOW,
        updatedAt: NOW,
      })
      const list = await run(vault.list(user.issuer, user.subject))
      expect(list.map((c) => [c.key.provider, c.tokens.accessToken, c.connectedAt])).toEqual([
        ["-code-host", "access-1-secret", NOW],
        ["calendar", "access-2-secret", NOW + 5],
      ])
      expect(await run(vault.delete(user))).toBe(true)
      expect(await run(vault.delete(user))).toBe(false)
      expect(Option.isNone(await run(vault.get(user)))).toBe(true)
      expect((await run(vault.list(user.issuer, user.subject))).length).toBe(1)
    })

    it("answers a fresh token without refreshing, and refreshes within the skew", async () => {
      let refreshes = 0
      const refresh = (refreshToken: string) =>
        Effect.sync(() => {
          refreshes++
          expect(refreshToken).toBe("refresh-1-secret")
          return { accessToken: "access-new-secret", tokenType: "Bearer", expiresAt: NOW + 3600 }
        })
      await run(vault.put(user, tokens("1", NOW + 61), NOW))
      expect(Option.getOrThrow(await run(vault.token(user, NOW, refresh))).accessToken).toBe("access-1-secret")
      expect(refreshes).toBe(0)
      const refreshed = Option.getOrThrow(await run(vault.token(user, NOW + 1, refresh)))
      expect(refreshes).toBe(1)
      // A response without a refresh token keeps the one the vault had.
      expect(refreshed).toEqual({
        accessToken: "access-new-secret",
        tokenType: "Bearer",
        expiresAt: NOW + 3600,
        refreshToken: "refresh-1-secret",
      })
      const stored = Option.getOrThrow(await run(vault.get(user)))
      expect(stored.tokens).toEqual(refreshed)
      expect(stored.updatedAt).toBe(NOW + 1)
      expect(stored.connectedAt).toBe(NOW)
    })

    it("answers none for no connection and for an expired one without a refresh token", async () => {
      const refresh = () => Effect.die("not called")
      expect(Option.isNone(await run(vault.token(user, NOW, refresh)))).toBe(true)
      await run(vault.put(user, { accessToken: "access-x-secret", tokenType: "Bearer", expiresAt: NOW }, NOW - 100))
      expect(Option.isNone(await run(vault.token(user, NOW, refresh)))).toBe(true)
      await run(vault.put(user, { accessToken: "access-y-secret", tokenType: "Bearer" }, NOW))
      expect(Option.getOrThrow(await run(vault.token(user, NOW + 10 ** 6, refresh))).accessToken).toBe(
        "access-y-secret",
      )
    })

    it("shares one refresh among 10 concurrent callers", async () => {
      await run(vault.put(user, tokens("1", NOW), NOW - 3600))
      let refreshes = 0
      const { open, opened } = gate()
      const refresh = () =>
        Effect.promise(async () => {
          refreshes++
          await opened
          return tokens("2", NOW + 3600)
        })
      const calls = Array.from({ length: 10 }, () => run(vault.token(user, NOW, refresh)))
      open()
      const answers = await Promise.all(calls)
      expect(refreshes).toBe(1)
      expect(answers.map((a) => Option.getOrThrow(a).accessToken)).toEqual(Array(10).fill("access-2-secret"))
    })

    it("refreshes once when two instances race", async () => {
      await run(vault.put(user, tokens("1", NOW), NOW - 3600))
      const second = await storage.open(ringA, { pollMillis: 10 })
      let refreshes = 0
      const { open, opened } = gate()
      const entered = gate()
      const refresh = (refreshToken: string) =>
        Effect.promise(async () => {
          refreshes++
          expect(refreshToken).toBe("refresh-1-secret")
          entered.open()
          await opened
          return tokens("2", NOW + 3600)
        })
      const racing = [vault, second].map((instance) => run(instance.token(user, NOW, refresh)))
      await entered.opened
      // One instance holds the lease while the provider answers; the other's later callers wait for its tokens.
      expect((await run(storage.store.getConnection(user)))?.lease).not.toBeNull()
      const waiting = [second, second].map((instance) => run(instance.token(user, NOW, refresh)))
      open()
      const answers = await Promise.all([...racing, ...waiting])
      expect(refreshes).toBe(1)
      expect(answers.map((a) => Option.getOrThrow(a).refreshToken)).toEqual(Array(4).fill("refresh-2-secret"))
      expect((await run(storage.store.getConnection(user)))?.lease).toBeNull()
    })

    it("takes over the lease of an instance that stopped before answering", async () => {
      await run(vault.put(user, tokens("1", NOW), NOW - 3600))
      const row = (await run(storage.store.getConnection(user)))!
      // As left by a crashed instance: leased until NOW + 30.
      expect(await run(storage.store.claim(user, row.version, "-crashed", NOW + 30, NOW))).toBe(true)
      const refresh = () => Effect.succeed(tokens("2", NOW + 3600))
      const answer = await run(vault.token(user, NOW + 30, refresh))
      expect(Option.getOrThrow(answer).accessToken).toBe("access-2-secret")
    })

    it("marks the connection broken when the provider rejects the refresh token", async () => {
      await run(vault.put(user, tokens("1", NOW), NOW - 3600))
      let refreshes = 0
      const rejecting = () =>
        Effect.suspend(() => {
          refreshes++
          return Effect.fail(new RefreshRejected({ message: "invalid_grant: the refresh token was revoked" }))
        })
      const error = await failureOf(vault.token(user, NOW, rejecting))
      expect(error).toBeInstanceOf(RefreshRejected)
      expect((error as RefreshRejected).message).toBe("invalid_grant: the refresh token was revoked")
      const stored = Option.getOrThrow(await run(vault.get(user)))
      expect([stored.status, stored.updatedAt]).toEqual(["broken", NOW])
      expect(Option.isNone(await run(vault.token(user, NOW, rejecting)))).toBe(true)
      expect(refreshes).toBe(1)
      await run(vault.put(user, tokens("3", NOW + 3600), NOW + 10))
      expect(Option.getOrThrow(await run(vault.get(user))).status).toBe("connected")
    })

    it("returns another refresh failure and changes nothing", async () => {
      await run(vault.put(user, tokens("1", NOW), NOW - 3600))
      const network = new VaultError({ reason: "storage", message: "provider unreachable" })
      const error = await failureOf(vault.token(user, NOW, () => Effect.fail(network)))
      expect(error).toBe(network)
      const stored = Option.getOrThrow(await run(vault.get(user)))
      expect([stored.status, stored.tokens, stored.updatedAt]).toEqual(["connected", tokens("1", NOW), NOW - 3600])
      const again = await run(vault.token(user, NOW, () => Effect.succeed(tokens("2", NOW + 3600))))
      expect(Option.getOrThrow(again).accessToken).toBe("access-2-secret")
    })

    it("marks broken on request", async () => {
      await run(vault.put(user, tokens("1", NOW + 3600), NOW))
      await run(vault.markBroken(user, NOW + 7))
      const stored = Option.getOrThrow(await run(vault.get(user)))
      expect([stored.status, stored.updatedAt]).toEqual(["broken", NOW + 7])
      expect(Option.isNone(await run(vault.token(user, NOW, () => Effect.die("not called"))))).toBe(true)
    })

    it.effect("keeps pending flows single use until they expire (TestClock)", () =>
      Effect.gen(function* () {
        const now = () => Clock.currentTimeMillis.pipe(Effect.map((ms) => Math.floor(ms / 1000)))
        const start = yield* now()
        const flow = {
          key: user,
          elicitationId: "-elicitation",
          state: "-state",
          codeVerifier: "verifier-secret-0123456789012345678901234567890",
          redirectUri: "http://127.0.0.1:1/connect/callback",
          issuer: "https://provider.example",
          expiresAt: start + 600,
        }
        yield* vault.putFlow("-reference-1", flow)
        yield* vault.putFlow("-reference-2", { ...flow, state: "-state-2" })
        expect(Option.getOrThrow(yield* vault.getFlow("-reference-1", yield* now()))).toEqual(flow)
        expect(Option.getOrThrow(yield* vault.takeFlow("-reference-1", yield* now()))).toEqual(flow)
        expect(Option.isNone(yield* vault.takeFlow("-reference-1", yield* now()))).toBe(true)
        expect(Option.isNone(yield* vault.getFlow("-reference-1", yield* now()))).toBe(true)
        expect(Option.isNone(yield* vault.getFlow("unknown", yield* now()))).toBe(true)
        yield* TestClock.adjust(599_000)
        expect(Option.getOrThrow(yield* vault.getFlow("-reference-2", yield* now())).state).toBe("-state-2")
        yield* TestClock.adjust(1_000)
        expect(Option.isNone(yield* vault.getFlow("-reference-2", yield* now()))).toBe(true)
        expect(Option.isNone(yield* vault.takeFlow("-reference-2", yield* now()))).toBe(true)
        expect(yield* vault.purgeFlows(yield* now())).toBe(2)
        expect(yield* vault.purgeFlows(yield* now())).toBe(0)
      }),
    )

    it("lets exactly one of two instances take a flow", async () => {
      const second = await storage.open(ringA)
      const flow = {
        key: user,
        elicitationId: "e",
        state: "s",
        codeVerifier: "verifier-secret",
        redirectUri: "http://127.0.0.1:1/cb",
        expiresAt: NOW + 600,
      }
      await run(vault.putFlow("-ref", flow))
      const takes = await Promise.all(
        [vault, second, vault, second, vault, second].map((instance) => run(instance.takeFlow("-ref", NOW))),
      )
      expect(takes.filter(Option.isSome).length).toBe(1)
    })

    it("refuses a record under a wrong key with a typed error", async () => {
      await run(vault.put(user, tokens("1"), NOW))
      const wrong = await storage.open(KeyRing.make({ keys: [{ id: "-a", key: keyB }] }))
      const error = await failureOf(wrong.get(user))
      expect(error).toBeInstanceOf(VaultError)
      expect([(error as VaultError).reason, (error as VaultError).message]).toEqual([
        "decrypt",
        'the record does not decrypt under vault key "-a": that ID names another key than the one that encrypted it, or the record was altered or moved from another row',
      ])
    })

    it("fails to open a ciphertext moved to another row", async () => {
      await run(vault.put(user, tokens("1"), NOW))
      await run(vault.put(stranger, tokens("2"), NOW))
      const row = (await run(storage.store.getConnection(user)))!
      await run(
        storage.store.putConnection(stranger, { keyId: row.keyId, iv: row.iv, ciphertext: row.ciphertext }, NOW),
      )
      const error = await failureOf(vault.get(stranger))
      expect((error as VaultError).reason).toBe("decrypt")
      expect(Option.getOrThrow(await run(vault.get(user))).tokens.accessToken).toBe("access-1-secret")
    })

    it("rotates: old records stay readable, are rewritten under the new key, and need the old key until then", async () => {
      await run(vault.put(user, tokens("1"), NOW))
      await run(vault.put(other, tokens("2"), NOW))
      await run(
        vault.putFlow("-ref", {
          key: user,
          elicitationId: "e",
          state: "s",
          codeVerifier: "verifier-secret",
          redirectUri: "http://127.0.0.1:1/cb",
          expiresAt: NOW + 600,
        }),
      )
      const both = KeyRing.make({
        keys: [
          { id: "b", key: keyB },
          { id: "-a", key: keyA },
        ],
      })
      const rotated = await storage.open(both)
      expect(Option.getOrThrow(await run(rotated.get(user))).tokens).toEqual(tokens("1"))
      await run(rotated.put(user, tokens("3"), NOW + 1))
      expect((await run(storage.store.getConnection(user)))!.keyId).toBe("b")
      expect((await run(storage.store.getConnection(other)))!.keyId).toBe("-a")

      const onlyB = await storage.open(KeyRing.make({ keys: [{ id: "b", key: keyB }] }))
      expect(Option.getOrThrow(await run(onlyB.get(user))).tokens).toEqual(tokens("3"))
      const error = await failureOf(onlyB.get(other))
      expect(error).toBeInstanceOf(VaultError)
      expect([(error as VaultError).reason, (error as VaultError).message]).toEqual([
        "unknown-key",
        'the record is encrypted under vault key "-a", which is not in the key ring (b): add that key back to read it',
      ])

      expect(await run(rotated.reencrypt())).toBe(2)
      expect(await run(rotated.reencrypt())).toBe(0)
      expect(Option.getOrThrow(await run(onlyB.get(other))).tokens).toEqual(tokens("2"))
      expect(Option.getOrThrow(await run(onlyB.getFlow("-ref", NOW))).codeVerifier).toBe("verifier-secret")
    })
  })
}
