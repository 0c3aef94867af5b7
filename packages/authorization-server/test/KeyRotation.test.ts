import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Logger, Scope } from "effect"
import { TestClock } from "effect/testing"
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose"
import { afterAll, afterEach, beforeAll, describe, expect } from "vitest"
import { ConfigError, resolve } from "../src/Config.js"
import { maintain, type RotationPolicy, rotate, rotationJob } from "../src/KeyRotation.js"
import { StorageError } from "../src/storage/Errors.js"
import { KeyStore, layerMemory, layerSqlite } from "../src/storage/Storage.js"
import { NOW, signingKey } from "./storage/contract.js"
import { type EffectTestServer, startEffectServer } from "./support/effectServer.js"
import { eventually } from "./support/eventually.js"
import { MCP, startServer, type TestServer } from "./support/server.js"
import { introspect, issueTokens } from "./support/tokens.js"

const policy: RotationPolicy = {
  rotateEvery: 3600,
  publishAhead: 600,
  accessTokenTtl: 300,
  clockSkew: 60,
  algorithm: "ES256",
}

const onStore = <A, E>(program: Effect.Effect<A, E, KeyStore>) =>
  Effect.runPromise(Effect.provide(program, layerMemory))

const kidOf = (token: string) => decodeProtectedHeader(token).kid
/** Key order only follows creation time, and keys created in the same second tie: compare kids as sets. */
const sorted = (kids: ReadonlyArray<string | undefined>) => [...kids].sort()

/**
 * Verifies like a resource server: signature against the JWK Set the server serves now, issuer and audience. The
 * resource server keeps its own (real) clock; the server's test clock starts at real time and only moves forward, so
 * every token the server issues here is still unexpired for it.
 */
const verifyAtJwks = async (server: TestServer, token: string) => {
  const jwks = (await (await fetch(`${server.issuer}/jwks`)).json()) as JSONWebKeySet
  return jwtVerify(token, createLocalJWKSet(jwks), { issuer: server.issuer, audience: MCP, typ: "at+jwt" })
}

describe("KeyRotation.rotate and maintain (store level, explicit time)", () => {
  it("publishes the new key at once and lets it sign only from now + publishAhead; a second request reuses it", () =>
    onStore(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        yield* keys.add(signingKey("old"))
        const first = yield* rotate(policy, NOW + 10)
        expect(first).toMatchObject({ alg: "ES256", activatesAt: NOW + 610, created: true })
        expect((yield* keys.published(NOW + 10)).map((k) => k.kid)).toEqual(["old", first.kid])
        expect((yield* keys.current(NOW + 609)).kid).toBe("old")
        expect((yield* keys.current(NOW + 610)).kid).toBe(first.kid)
        expect(yield* rotate(policy, NOW + 20)).toEqual({ ...first, created: false })
        expect(yield* keys.list()).toHaveLength(2)
      }),
    ))

  it("retires the replaced key once the new one has signed for clockSkew, until its last token has expired", () =>
    onStore(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        yield* keys.add(signingKey("old"))
        const { kid, activatesAt } = yield* rotate(policy, NOW + 1)
        // Not yet: an instance whose clock is behind may still sign with the old key.
        expect(yield* maintain(policy, activatesAt + 59)).toEqual({ retired: [], withdrawn: [] })
        expect((yield* keys.get("old")).status).toBe("active")
        expect(yield* maintain(policy, activatesAt + 60)).toEqual({ retired: ["old"], withdrawn: [] })
        const retiresAt = activatesAt + policy.accessTokenTtl + policy.clockSkew
        expect(yield* keys.get("old")).toMatchObject({ status: "retired", retires_at: retiresAt })
        expect((yield* keys.published(retiresAt - 1)).map((k) => k.kid)).toEqual(["old", kid])
        expect((yield* keys.published(retiresAt)).map((k) => k.kid)).toEqual([kid])
        // Idempotent: another instance running the same round changes nothing.
        expect(yield* maintain(policy, activatesAt + 61)).toEqual({ retired: [], withdrawn: [] })
      }),
    ))

  it("withdraws duplicate waiting keys, keeping the earliest created, the same from every instance", () =>
    onStore(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        yield* keys.add(signingKey("current"))
        yield* keys.add(signingKey("b-second", { created_at: NOW + 5, activates_at: NOW + 605 }))
        yield* keys.add(signingKey("a-first", { created_at: NOW + 5, activates_at: NOW + 605 }))
        yield* keys.add(signingKey("c-later", { created_at: NOW + 6, activates_at: NOW + 606 }))
        expect(yield* maintain(policy, NOW + 7)).toEqual({ retired: [], withdrawn: ["b-second", "c-later"] })
        expect(yield* maintain(policy, NOW + 7)).toEqual({ retired: [], withdrawn: [] })
        expect((yield* keys.published(NOW + 7)).map((k) => k.kid)).toEqual(["current", "a-first"])
        expect(yield* keys.get("b-second")).toMatchObject({ status: "retired", retires_at: NOW + 7 })
        expect((yield* keys.current(NOW + 605)).kid).toBe("a-first")
      }),
    ))

  it("rotates when the newest key is rotateEvery old, not a second earlier, and never with rotateEvery false", () =>
    onStore(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        yield* keys.add(signingKey("k0"))
        expect(yield* maintain({ ...policy, rotateEvery: false }, NOW + 10 * 3600)).toEqual({
          retired: [],
          withdrawn: [],
        })
        expect(yield* maintain(policy, NOW + 3599)).toEqual({ retired: [], withdrawn: [] })
        const report = yield* maintain(policy, NOW + 3600)
        const created = (yield* keys.list()).find((k) => k.kid !== "k0")
        expect(report).toEqual({ created: created?.kid, retired: [], withdrawn: [] })
        expect(created).toMatchObject({ created_at: NOW + 3600, activates_at: NOW + 4200, status: "active" })
        // The waiting key is the newest now, so the next round does not rotate again.
        expect(yield* maintain(policy, NOW + 3601)).toEqual({ retired: [], withdrawn: [] })
      }),
    ))

  it("creates a key that signs at once when none can sign", () =>
    onStore(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        yield* keys.add(signingKey("gone", { status: "retired", retires_at: NOW + 100 }))
        const report = yield* maintain(policy, NOW)
        const current = yield* keys.current(NOW)
        expect(report).toEqual({ created: current.kid, retired: [], withdrawn: [] })
        expect(current).toMatchObject({ created_at: NOW, activates_at: NOW, status: "active" })
      }),
    ))
})

describe("KeyRotation.rotationJob", () => {
  it.effect("logs a failed round and carries on with the next; closing its scope interrupts it", () =>
    Effect.gen(function* () {
      let rounds = 0
      // A store whose reads fail on the first two rounds, as a database that is briefly unreachable would.
      const flaky = Layer.effect(
        KeyStore,
        Effect.map(KeyStore, (inner) =>
          KeyStore.of({
            ...inner,
            list: () =>
              Effect.suspend(() => {
                rounds++
                return rounds <= 2
                  ? Effect.fail(new StorageError({ operation: "KeyStore.list", message: "connection refused" }))
                  : inner.list()
              }),
          }),
        ),
      ).pipe(Layer.provide(KeyStore.layerMemory))
      const warnings: Array<unknown> = []
      const capture = Logger.layer([
        Logger.make(({ logLevel, message }) => {
          if (logLevel === "Warn") warnings.push(message)
        }),
      ])
      const { exit, keys } = yield* Effect.gen(function* () {
        const scope = yield* Scope.make()
        const fiber = yield* Effect.forkIn(rotationJob(policy, "1 minute"), scope)
        // One round a minute of the test clock. The round that creates a key finishes on real crypto, so each step
        // leaves it a moment of real time before reading the count.
        yield* Effect.repeat(
          TestClock.adjust("1 minute").pipe(
            Effect.andThen(TestClock.withLive(Effect.sleep("5 millis"))),
            Effect.map(() => rounds >= 4),
          ),
          { until: (done) => done },
        )
        yield* Scope.close(scope, Exit.void)
        return { exit: yield* Fiber.await(fiber), keys: yield* Effect.flatMap(KeyStore, (k) => k.list()) }
      }).pipe(Effect.provide(Layer.merge(flaky, capture)))
      expect(warnings.slice(0, 2)).toEqual(
        Array.from({ length: 2 }, () => [
          "signing-key maintenance failed; retrying at the next interval",
          new StorageError({ operation: "KeyStore.list", message: "connection refused" }),
        ]),
      )
      expect(warnings).toHaveLength(2)
      // The third round found no key able to sign and created one; the fourth had nothing to do.
      expect(keys).toHaveLength(1)
      expect(Exit.hasInterrupts(exit)).toBe(true)
    }),
  )
})

describe("signing-key rotation through the server", () => {
  const servers: Array<{ close: () => Promise<void> }> = []
  const dirs: Array<string> = []
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close()
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
  })
  const track = <S extends { close: () => Promise<void> }>(server: S) => {
    servers.push(server)
    return server
  }
  const sqlitePath = () => {
    const dir = mkdtempSync(join(tmpdir(), "keyway-rotation-"))
    dirs.push(dir)
    return join(dir, "as.db")
  }
  // Every server runs on its own TestClock: these move them forward in steps of 5 s, one after the other, so they
  // never differ by more than a step (well within clockSkew), as the clocks of instances sharing a database would.
  const advance = async (seconds: number, ...all: ReadonlyArray<EffectTestServer>) => {
    for (let done = 0; done < seconds; done += 5) {
      for (const server of all) await server.adjust(Math.min(5, seconds - done))
    }
  }
  // The purge is off so that retired keys stay listed for the assertions.
  const options = {
    signingKeys: { checkEvery: 30, rotateEvery: 3600, publishAhead: 600, clockSkew: 60 },
    maintenance: { purgeEvery: false },
  } as const

  it("publishes the new key before any token carries its kid; old tokens verify until they expire", async () => {
    const server = track(await startEffectServer(layerMemory, { ...options, lifetimes: { accessToken: 300 } }))
    const [oldKid] = await server.jwksKids()
    const before = await issueTokens(server)
    expect(kidOf(before.access_token)).toBe(oldKid)

    const rotation = await server.rotate()
    expect(rotation).toMatchObject({ created: true, activatesAt: server.now() + 600 })
    expect(sorted(await server.jwksKids())).toEqual(sorted([oldKid, rotation.kid]))
    // Published, but not signing yet, up to the last second before activation.
    await server.adjust(599)
    const during = await issueTokens(server)
    expect(kidOf(during.access_token)).toBe(oldKid)

    await server.adjust(1)
    const after = await issueTokens(server)
    expect(kidOf(after.access_token)).toBe(rotation.kid)
    for (const token of [before, during, after]) {
      expect((await verifyAtJwks(server, token.access_token)).payload.aud).toBe(MCP)
    }

    // The background check retires the old key with the time its last token expires (activation + TTL + skew).
    await server.adjust(60)
    const retiresAt = rotation.activatesAt + 300 + 60
    await eventually(
      async () => (await server.keys()).find((k) => k.kid === oldKid)?.status === "retired",
      "old key retired",
    )
    expect((await server.keys()).find((k) => k.kid === oldKid)?.retires_at).toBe(retiresAt)
    expect(sorted(await server.jwksKids())).toEqual(sorted([oldKid, rotation.kid]))
    expect((await verifyAtJwks(server, during.access_token)).payload.aud).toBe(MCP)
    expect((await introspect(server, during.access_token)).active).toBe(true)

    // At retires_at every token it signed has expired: the key leaves the JWK Set.
    await server.adjust(retiresAt - server.now())
    expect(await server.jwksKids()).toEqual([rotation.kid])
    await expect(verifyAtJwks(server, during.access_token)).rejects.toMatchObject({
      code: "ERR_JWKS_NO_MATCHING_KEY",
    })
    expect(await introspect(server, during.access_token)).toEqual({ active: false })
    expect((await verifyAtJwks(server, after.access_token)).payload.aud).toBe(MCP)
  })

  it("rotates on schedule when the newest key is rotateEvery old", async () => {
    const server = track(await startEffectServer(layerMemory, options))
    const [first] = await server.keys()
    await server.adjust(3600)
    await eventually(async () => (await server.jwksKids()).length === 2, "scheduled rotation")
    const second = (await server.keys())[1]
    expect(second?.created_at).toBeGreaterThanOrEqual((first?.created_at ?? 0) + 3600)
    expect(second?.activates_at).toBe((second?.created_at ?? 0) + 600)
    // Still the old key signs until activation.
    expect(kidOf((await issueTokens(server)).access_token)).toBe(first?.kid)
  })

  it("two servers on one database rotating on schedule converge on one new key", async () => {
    const path = sqlitePath()
    const start = Math.floor(Date.now() / 1000)
    const often = { ...options, signingKeys: { ...options.signingKeys, checkEvery: 5 } }
    const a = track(await startEffectServer(layerSqlite({ path }), often, start))
    // Instances behind one issuer, as a database serves one.
    const b = track(await startEffectServer(layerSqlite({ path }), { ...often, issuer: a.issuer }, start))
    expect(await b.jwksKids()).toEqual(await a.jwksKids())
    const [oldKid] = await a.jwksKids()
    expect((await a.keys()).length).toBe(1)

    await advance(3600, a, b)
    // Both may create a key at the same moment; a duplicate is withdrawn by the next check of either. Creating a key
    // takes real time while the test clock stands still, so one agreeing look is not enough: the sets must still agree
    // after a further check of each, when no creation started before can still land.
    let agreed = 0
    await eventually(async () => {
      const kids = await a.jwksKids()
      agreed = kids.length === 2 && JSON.stringify(kids) === JSON.stringify(await b.jwksKids()) ? agreed + 1 : 0
      if (agreed >= 2) return true
      await advance(5, a, b)
      return false
    }, "one new key in both JWK Sets")
    const [, newKid] = await a.jwksKids()
    expect((await a.keys()).filter((k) => k.status === "active" && k.activates_at > a.now()).map((k) => k.kid)).toEqual(
      [newKid],
    )

    await advance(600 + 60, a, b)
    await eventually(
      async () => (await a.keys()).find((k) => k.kid === oldKid)?.status === "retired",
      "old key retired",
    )
    expect(kidOf((await issueTokens(a)).access_token)).toBe(newKid)
    expect(kidOf((await issueTokens(b)).access_token)).toBe(newKid)
    expect(await b.jwksKids()).toEqual([oldKid, newKid])
    expect(await a.jwksKids()).toEqual([oldKid, newKid])
  })

  it("keeps keys and schedule across a restart on SQLite", async () => {
    const path = sqlitePath()
    const start = Math.floor(Date.now() / 1000)
    const first = await startEffectServer(layerSqlite({ path }), options, start)
    const [oldKid] = await first.jwksKids()
    const token = await issueTokens(first)
    const rotation = await first.rotate()
    await first.close()

    // Restarted behind the same issuer (on another port).
    const second = track(await startEffectServer(layerSqlite({ path }), { ...options, issuer: first.issuer }, start))
    expect(sorted(await second.jwksKids())).toEqual(sorted([oldKid, rotation.kid]))
    expect(await second.rotate()).toEqual({ ...rotation, created: false })
    const jwks = (await (await fetch(`${second.issuer}/jwks`)).json()) as JSONWebKeySet
    expect((await jwtVerify(token.access_token, createLocalJWKSet(jwks))).protectedHeader.kid).toBe(oldKid)
    await second.close()
    servers.splice(0)

    // Down for an hour: on start the schedule sees the newest key is rotateEvery old and rotates at once.
    const third = track(
      await startEffectServer(layerSqlite({ path }), { ...options, issuer: first.issuer }, start + 3600),
    )
    await eventually(async () => (await third.keys()).length === 3, "rotation after restart")
    const keys = await third.keys()
    const fresh = keys.find((k) => k.kid !== oldKid && k.kid !== rotation.kid)
    expect(keys.find((k) => k.kid === oldKid)?.status).toBe("retired")
    expect(keys.find((k) => k.kid === rotation.kid)?.status).toBe("active")
    expect(fresh?.status).toBe("active")
    expect(fresh?.created_at).toBeGreaterThanOrEqual(rotation.activatesAt - 600 + 3600)
    expect(fresh?.activates_at).toBe((fresh?.created_at ?? 0) + 600)
    expect(await third.jwksKids()).toEqual([rotation.kid, fresh?.kid])
    expect(kidOf((await issueTokens(third)).access_token)).toBe(rotation.kid)
  })
})

describe("rotateSigningKey on the plain face", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer()
  })
  afterAll(() => server.close())

  it("rotates on demand: the new key is in the JWK Set at once, signs after publishAhead", async () => {
    const before = (await (await fetch(`${server.issuer}/jwks`)).json()) as JSONWebKeySet
    expect(before.keys).toHaveLength(1)
    const startedAt = Math.floor(Date.now() / 1000)
    const rotation = await server.as.rotateSigningKey()
    expect(rotation.created).toBe(true)
    expect(rotation.activatesAt - startedAt).toBeGreaterThanOrEqual(600)
    expect(rotation.activatesAt - startedAt).toBeLessThanOrEqual(601)
    const after = (await (await fetch(`${server.issuer}/jwks`)).json()) as JSONWebKeySet
    expect(sorted(after.keys.map((k) => k.kid))).toEqual(sorted([before.keys[0]?.kid, rotation.kid]))
    expect(after.keys[1]).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" })
    expect(after.keys[1]).not.toHaveProperty("d")
    expect(await server.as.rotateSigningKey()).toEqual({ ...rotation, created: false })
    expect(kidOf((await issueTokens(server)).access_token)).toBe(before.keys[0]?.kid)
  })
})

describe("signing-key, maintenance and session options", () => {
  const base = { issuer: "https://as.example.com", resources: [{ uri: MCP, scopes: { read: "Read" } }] }

  it("has defaults: rotate every 30 days, publish 10 minutes ahead, check every minute, purge every 5 minutes", () => {
    const config = resolve(base)
    expect(config.signingKeys).toEqual({ rotateEvery: 2592000, publishAhead: 600, checkEvery: 60, clockSkew: 60 })
    expect(config.purgeEvery).toBe(300)
    expect(resolve({ ...base, signingKeys: { rotateEvery: false }, maintenance: { purgeEvery: false } })).toMatchObject(
      {
        signingKeys: { rotateEvery: false },
        purgeEvery: false,
      },
    )
  })

  const refusals: ReadonlyArray<[string, Record<string, unknown>, string]> = [
    [
      "publishAhead not shorter than rotateEvery",
      { signingKeys: { rotateEvery: 600, publishAhead: 600 } },
      "signingKeys.publishAhead: must be shorter than rotateEvery (600 s)",
    ],
    [
      "a negative publishAhead",
      { signingKeys: { publishAhead: -1 } },
      "signingKeys.publishAhead: must not be negative",
    ],
    ["a zero rotateEvery", { signingKeys: { rotateEvery: 0 } }, "signingKeys.rotateEvery: must be positive"],
    ["a fractional clockSkew", { signingKeys: { clockSkew: 0.5 } }, "signingKeys.clockSkew: must be a whole number"],
    ["a zero checkEvery", { signingKeys: { checkEvery: 0 } }, "signingKeys.checkEvery: must be positive"],
    ["a short sessionSecret", { sessionSecret: "too-short" }, "sessionSecret: must be at least 32 random characters"],
    ["a negative purgeEvery", { maintenance: { purgeEvery: -5 } }, "maintenance.purgeEvery: must be positive"],
    [
      "a rotateEvery not longer than the default publishAhead",
      { signingKeys: { rotateEvery: 600 } },
      "signingKeys.rotateEvery: must be longer than publishAhead (600 s)",
    ],
  ]
  it.each(refusals)("refuses %s", (_, options, message) => {
    // The message itself: toThrow(error) does not compare the messages of these tagged errors.
    let error: unknown
    try {
      resolve({ ...base, ...options })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).message).toBe(message)
  })
})
