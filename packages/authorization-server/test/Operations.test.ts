import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { createAuthorizationServer } from "../src/AuthorizationServer.js"
import { readiness, type SecurityEvent } from "../src/Operations.js"
import { StorageError } from "../src/storage/Errors.js"
import { KeyStore } from "../src/storage/Storage.js"
import { MCP } from "./support/server.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const options = {
  issuer: "http://127.0.0.1:9",
  development: { allowHttpLoopbackIssuer: true },
  warn: () => undefined,
  resources: [{ uri: MCP, scopes: { read: "Read" } }],
} as const

describe("readiness", () => {
  it("is ready with a database that answers and a key that signs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keyway-ops-"))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const timings: Array<[string, boolean]> = []
    const as = createAuthorizationServer({
      ...options,
      storage: { type: "sqlite", path: join(dir, "keyway.db") },
      onStorageOperation: (operation, seconds, ok) => {
        expect(seconds).toBeGreaterThanOrEqual(0)
        timings.push([operation, ok])
      },
    })
    cleanups.push(() => as.close())
    expect(await as.readiness()).toEqual({ ready: true, database: "ok", signingKey: "ok" })
    // Every storage operation is timed: the start-up's key check and the readiness check's own.
    expect(timings.filter(([operation]) => operation === "KeyStore.current").length).toBeGreaterThanOrEqual(2)
    expect(timings.every(([, ok]) => ok)).toBe(true)
  })

  it("is not ready when no key can sign", async () => {
    const result = await Effect.runPromise(readiness.pipe(Effect.provide(KeyStore.layerMemory)))
    expect(result).toEqual({ ready: false, database: "ok", signingKey: "missing" })
  })

  it("is not ready when the database fails", async () => {
    const failing = Layer.succeed(KeyStore)(
      KeyStore.of({
        add: () => Effect.die("unused"),
        get: () => Effect.die("unused"),
        list: () => Effect.die("unused"),
        published: () => Effect.die("unused"),
        current: () => Effect.fail(new StorageError({ operation: "KeyStore.current", message: "connection refused" })),
        retire: () => Effect.die("unused"),
        purgeExpired: () => Effect.die("unused"),
      }),
    )
    const result = await Effect.runPromise(readiness.pipe(Effect.provide(failing)))
    expect(result).toEqual({ ready: false, database: "failed", signingKey: "unknown" })
  })

  it("is not ready when the storage cannot be opened", async () => {
    const as = createAuthorizationServer({
      ...options,
      storage: { type: "sqlite", path: "/nonexistent/dir/keyway.db" },
    })
    cleanups.push(() => as.close().catch(() => undefined))
    expect(await as.readiness()).toEqual({ ready: false, database: "failed", signingKey: "unknown" })
  })
})

describe("security events", () => {
  it("reports a signing key created on demand", async () => {
    const events: Array<SecurityEvent> = []
    const as = createAuthorizationServer({ ...options, onSecurityEvent: (event) => events.push(event) })
    cleanups.push(() => as.close())
    await as.ready()
    expect(events).toEqual([])
    const rotation = await as.rotateSigningKey()
    expect(events).toEqual([{ event: "key_rotated", kid: rotation.kid, activates_at: rotation.activatesAt }])
    // A rotation already waiting is no new key.
    await as.rotateSigningKey()
    expect(events.length).toBe(1)
  })
})
