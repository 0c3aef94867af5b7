/**
 * The connections' scheduled purge of connect flows, on the TestClock over a real SQLite vault file: expired flows
 * disappear from the file at the next interval without anyone calling `purgeFlows`, and a failing purge is logged and
 * tried again at the next interval.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Effect, Layer, Logger, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import { afterEach, describe, expect, it } from "vitest"
import { ConnectionRequired, Connections } from "../src/Connections.js"
import * as KeyRing from "../src/KeyRing.js"
import { sqliteVault } from "../src/node/sqlite.js"
import { Vault, VaultError } from "../src/Vault.js"
import { FLOWS } from "../src/vault/sql.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const USER = { issuer: "https://as.example", subject: "-bob" }

const start = async (purgeEvery: number | false) => {
  const dir = mkdtempSync(join(tmpdir(), "keyway-purge-"))
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, "vault.db")
  const vault = await sqliteVault({
    path,
    keyRing: KeyRing.make({ keys: [{ id: "-k1", key: KeyRing.generateKey() }] }),
  })
  cleanups.push(() => vault.close().catch(() => undefined))
  const raw = new DatabaseSync(path)
  cleanups.push(async () => raw.close())
  const warnings: Array<unknown> = []
  const capture = Logger.layer([
    Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") warnings.push(message)
    }),
  ])
  const runtime = ManagedRuntime.make(
    Connections.layer({
      baseUrl: "http://127.0.0.1:1",
      serverName: "Purge test",
      // A provider by endpoints: nothing is discovered, and no flow here ever reaches it.
      providers: {
        host: {
          name: "Host",
          endpoints: { authorization: "http://127.0.0.1:1/auth", token: "http://127.0.0.1:1/token" },
          clientId: "-client",
          scopes: ["read"],
          apiBase: "http://127.0.0.1:1/api",
        },
      },
      flowTtl: 30,
      purgeEvery,
    }).pipe(
      Layer.provideMerge(Layer.succeed(Vault, vault)),
      Layer.provideMerge(capture),
      Layer.provideMerge(TestClock.layer({ warningDelay: "1 hour" })),
    ),
  )
  cleanups.push(() => runtime.dispose())
  const service = await runtime.runPromise(Connections.useSync((s) => s))
  const flows = () => Number((raw.prepare(`SELECT count(*) AS n FROM ${FLOWS}`).get() as { n: number }).n)
  const adjust = (seconds: number) => runtime.runPromise(TestClock.adjust(`${seconds} seconds`))
  const elicit = async () => {
    const error = await runtime.runPromise(Effect.flip(service.fetch(USER, "host")))
    expect(error).toBeInstanceOf(ConnectionRequired)
  }
  return { vault, flows, adjust, elicit, warnings }
}

describe("the scheduled purge of connect flows (purgeEvery)", () => {
  it("deletes expired flows at the next interval, on the Clock, without a call to purgeFlows", async () => {
    const stack = await start(60)
    await stack.elicit()
    await stack.elicit()
    expect(stack.flows()).toBe(2)
    // Expired after 30 s, but the next purge is due at 60 s.
    await stack.adjust(31)
    expect(stack.flows()).toBe(2)
    // One more at 40 s, still alive at the round of 60 s (it expires at 70 s).
    await stack.adjust(9)
    await stack.elicit()
    expect(stack.flows()).toBe(3)
    await stack.adjust(20)
    expect(stack.flows()).toBe(1)
    await stack.adjust(60)
    expect(stack.flows()).toBe(0)
    expect(stack.warnings).toEqual([])
  })

  it("purges nothing with purgeEvery false", async () => {
    const stack = await start(false)
    await stack.elicit()
    await stack.adjust(3600)
    expect(stack.flows()).toBe(1)
  })

  it("logs a failed purge as a warning and tries again at the next interval", async () => {
    const stack = await start(60)
    // The first round (at once) on the open vault, then the vault goes away.
    await stack.adjust(1)
    await stack.vault.close()
    await stack.adjust(60)
    await stack.adjust(60)
    expect(stack.warnings).toEqual(
      Array.from({ length: 2 }, () => [
        "connect flow purge failed; retrying at the next interval",
        expect.any(VaultError),
      ]),
    )
  })
})
