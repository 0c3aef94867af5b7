import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { createProtectedResource, jwt, Node } from "@keyway/resource-server/node"
import { freePort, type PostgresServer, startPostgres, thrownBy } from "@keyway/testing"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { postgresReplayCache, type ReplayCache, ReplayStoreError, sqliteReplayCache } from "../src/node.js"
import { dpopScheme, memoryReplayCache } from "../src/resource-server.js"
import { callWith, proofFor, startIssuer } from "./support/issuer.js"
import { makeKey } from "./support/keys.js"

/**
 * The contract of a replay store (RFC 9449 §11.1), run against each: the in-memory cache, a SQLite file and
 * PostgreSQL. `a` and `b` are two handles on one store (for the shared stores, two connections, as two processes
 * have), so what one records the other sees.
 */
interface Opened {
  readonly a: ReplayCache
  readonly b: ReplayCache
  /** The entries the store holds. */
  readonly rows: () => Promise<number>
  readonly close: () => Promise<void>
}

let postgres: PostgresServer
const dir = mkdtempSync(join(tmpdir(), "keyway-dpop-replay-"))
const cleanups: Array<() => Promise<void>> = []

beforeAll(async () => {
  postgres = await startPostgres()
})

afterAll(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
  postgres.stop()
  rmSync(dir, { recursive: true, force: true })
})

let opened = 0
const backends: ReadonlyArray<readonly [string, () => Promise<Opened>]> = [
  [
    "memory",
    async () => {
      const cache = memoryReplayCache(1000)
      return { a: cache, b: cache, rows: async () => cache.size(), close: async () => undefined }
    },
  ],
  [
    "SQLite",
    async () => {
      const path = join(dir, `replay-${++opened}.db`)
      const a = sqliteReplayCache({ path })
      const b = sqliteReplayCache({ path })
      const reader = new DatabaseSync(path)
      return {
        a,
        b,
        rows: async () => Number(reader.prepare("SELECT count(*) AS n FROM dpop_replay").get()?.n),
        close: async () => {
          reader.close()
          await a.close()
          await b.close()
        },
      }
    },
  ],
  [
    "PostgreSQL",
    async () => {
      const connectionString = postgres.createDatabase(`replay_${++opened}`)
      const a = await postgresReplayCache({ connectionString })
      const b = await postgresReplayCache({ connectionString })
      const reader = new pg.Pool({ connectionString, max: 1 })
      return {
        a,
        b,
        rows: async () => Number((await reader.query("SELECT count(*) AS n FROM dpop_replay")).rows[0]?.n),
        close: async () => {
          await reader.end()
          await a.close()
          await b.close()
        },
      }
    },
  ],
]

const open = async (make: () => Promise<Opened>): Promise<Opened> => {
  const store = await make()
  cleanups.push(store.close)
  return store
}

describe.each(backends)("the %s replay store (RFC 9449 §11.1)", (_, make) => {
  it("records a key if absent: true the first time, false while it is held, through either handle", async () => {
    const { a, b } = await open(make)
    expect(await a.remember("jti-1", 160, 100)).toBe(true)
    expect(await b.remember("jti-1", 160, 150)).toBe(false)
    expect(await a.remember("jti-1", 160, 159)).toBe(false)
    expect(await b.remember("jti-2", 160, 100)).toBe(true)
  })

  it("holds a key until its expiry, then records it again with its new expiry", async () => {
    const { a, b } = await open(make)
    expect(await a.remember("jti", 160, 100)).toBe(true)
    expect(await b.remember("jti", 220, 160)).toBe(true)
    expect(await a.remember("jti", 220, 219)).toBe(false)
    expect(await b.remember("jti", 280, 220)).toBe(true)
  })

  it("keeps a fractional expiry (a proof's iat may have one) at least until that second has passed", async () => {
    const { a, b } = await open(make)
    expect(await a.remember("jti", 160.25, 100)).toBe(true)
    expect(await b.remember("jti", 220, 160)).toBe(false)
    expect(await b.remember("jti", 220, 161)).toBe(true)
  })

  it("stores every key as given: edge values are distinct keys and no key is read as SQL", async () => {
    const { a, b } = await open(make)
    const keys = [
      "-jti",
      "--",
      "'; DROP TABLE dpop_replay; --",
      '"quoted"',
      "%_",
      "",
      " ",
      "a\u0000b",
      "a",
      "A",
      "\ud800",
      "\ud801",
      "ключ",
      "x".repeat(256),
    ]
    for (const key of keys) expect(await a.remember(key, 160, 100)).toBe(true)
    for (const key of keys) expect(await b.remember(key, 160, 100)).toBe(false)
  })

  it("tells exactly one of many simultaneous inserts of one key, through both handles, that it was new", async () => {
    const { a, b } = await open(make)
    const race = (key: string, expiresAt: number, now: number) =>
      Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? a : b).remember(key, expiresAt, now)))
    expect((await race("new", 160, 100)).filter(Boolean)).toHaveLength(1)
    // The same over an expired entry, which every one of them would replace.
    expect(await a.remember("expired", 150, 100)).toBe(true)
    expect((await race("expired", 260, 200)).filter(Boolean)).toHaveLength(1)
  })
})

describe("the memory replay cache's bounds", () => {
  it("drops expired entries as new ones come", () => {
    const cache = memoryReplayCache(100)
    for (let i = 0; i < 50; i++) cache.remember(`old-${i}`, 110, 100)
    expect(cache.size()).toBe(50)
    cache.remember("new", 200, 111)
    expect(cache.size()).toBe(1)
  })

  it("holds at most maxEntries: beyond, the oldest go first", () => {
    const cache = memoryReplayCache(3)
    for (const jti of ["a", "b", "c", "d"]) expect(cache.remember(jti, 1000, 100)).toBe(true)
    expect(cache.size()).toBe(3)
    expect(cache.remember("d", 1000, 100)).toBe(false)
    // "a" was evicted early: remembered again (its proof's iat still bounds how long it can be replayed).
    expect(cache.remember("a", 1000, 100)).toBe(true)
  })

  it("refuses a replay of the oldest entry of a full cache", () => {
    const cache = memoryReplayCache(2)
    expect(cache.remember("a", 1000, 100)).toBe(true)
    expect(cache.remember("b", 1000, 100)).toBe(true)
    expect(cache.remember("a", 1000, 100)).toBe(false)
    expect(cache.size()).toBe(2)
  })

  it("sweeps in the order entries were recorded, also for a key recorded again after it expired", () => {
    const cache = memoryReplayCache(3)
    expect(cache.remember("b", 1000, 100)).toBe(true)
    expect(cache.remember("a", 110, 100)).toBe(true)
    expect(cache.remember("c", 1000, 100)).toBe(true)
    // "a" expired at 110 and is recorded again: it is now the newest, so "b" and then "c" are the oldest.
    expect(cache.remember("a", 1000, 120)).toBe(true)
    expect(cache.remember("d", 1000, 120)).toBe(true)
    expect(cache.remember("e", 1000, 120)).toBe(true)
    expect(cache.size()).toBe(3)
    expect(cache.remember("a", 1000, 120)).toBe(false)
    expect(cache.remember("c", 1000, 120)).toBe(true)
  })
})

describe.each(backends.slice(1))("the %s replay store's purge", (_, make) => {
  it("deletes up to two expired entries with each insert, never one still held", async () => {
    const { a, rows } = await open(make)
    for (let i = 0; i < 10; i++) expect(await a.remember(`old-${i}`, 110, 100)).toBe(true)
    expect(await a.remember("held", 1000, 100)).toBe(true)
    expect(await rows()).toBe(11)
    for (let i = 0; i < 3; i++) expect(await a.remember(`new-${i}`, 1000, 111)).toBe(true)
    expect(await rows()).toBe(11 + 3 - 6)
    for (let i = 3; i < 10; i++) expect(await a.remember(`new-${i}`, 1000, 111)).toBe(true)
    // The ten expired entries are gone; the held one and the new ones stay.
    expect(await rows()).toBe(11)
    expect(await a.remember("held", 1000, 111)).toBe(false)
  })
})

describe("the shared replay stores' failures", () => {
  it("SQLite: a file that cannot be opened is a ReplayStoreError", () => {
    expect(thrownBy(() => sqliteReplayCache({ path: join(dir, "missing", "replay.db") }))).toEqual(
      new ReplayStoreError({ operation: "open", message: "unable to open database file" }),
    )
  })

  it("SQLite: remembering after close is a ReplayStoreError", async () => {
    const cache = sqliteReplayCache({ path: join(dir, `closed-${++opened}.db`) })
    await cache.close()
    expect(thrownBy(() => cache.remember("jti", 160, 100))).toEqual(
      new ReplayStoreError({ operation: "remember", message: "database is not open" }),
    )
  })

  it("PostgreSQL: a server that does not answer is a ReplayStoreError", async () => {
    const port = await freePort()
    await expect(postgresReplayCache({ connectionString: `postgres://nobody@127.0.0.1:${port}/none` })).rejects.toEqual(
      new ReplayStoreError({ operation: "open", message: `connect ECONNREFUSED 127.0.0.1:${port}` }),
    )
  })

  it("PostgreSQL: a schema name of 0 or more than 63 bytes is a ReplayStoreError", async () => {
    const connectionString = postgres.createDatabase(`replay_${++opened}`)
    for (const schema of ["", "é".repeat(32)]) {
      await expect(postgresReplayCache({ connectionString, schema })).rejects.toEqual(
        new ReplayStoreError({ operation: "open", message: "the schema name must be 1 to 63 bytes long" }),
      )
    }
  })

  it("PostgreSQL: any schema name of 1 to 63 bytes is created and used as given", async () => {
    const connectionString = postgres.createDatabase(`replay_${++opened}`)
    const pool = new pg.Pool({ connectionString, max: 2 })
    cleanups.push(() => pool.end())
    for (const schema of ['-we"ird; schema', "é".repeat(31)]) {
      const cache = await postgresReplayCache({ pool, schema })
      expect(await cache.remember("jti", 160, 100)).toBe(true)
      expect(await cache.remember("jti", 160, 100)).toBe(false)
      await cache.close()
      const held = await pool.query("SELECT count(*) AS n FROM pg_namespace WHERE nspname = $1", [schema])
      expect(Number(held.rows[0]?.n)).toBe(1)
    }
    // A pool passed in is the caller's: still open after close.
    expect((await pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }])
  })

  it("PostgreSQL: remembering after close is a ReplayStoreError", async () => {
    const cache = await postgresReplayCache({ connectionString: postgres.createDatabase(`replay_${++opened}`) })
    await cache.close()
    await expect(cache.remember("jti", 160, 100)).rejects.toEqual(
      new ReplayStoreError({ operation: "remember", message: "Cannot use a pool after calling end on the pool" }),
    )
  })
})

describe("a DPoP scheme whose replay store fails", () => {
  it("answers 500 without detail and reports the ReplayStoreError: the proof is never accepted", async () => {
    const issuer = await startIssuer()
    cleanups.push(issuer.close)
    const replayCache = sqliteReplayCache({ path: join(dir, `failing-${++opened}.db`) })
    await replayCache.close()
    const resource = "https://mcp.example.com/mcp"
    const protectedResource = createProtectedResource({
      resource,
      authorizationServers: [issuer.issuer],
      verifier: jwt({ jwksUri: issuer.jwksUri }),
      presentationSchemes: [dpopScheme({ replayCache })],
    })
    cleanups.push(() => protectedResource.close())
    const reported: Array<unknown> = []
    const running = await Node.listen(
      protectedResource.protect(() => Response.json({ jsonrpc: "2.0", id: 1, result: {} })),
      { publicUrl: "https://mcp.example.com", onError: (error) => reported.push(error) },
    )
    cleanups.push(running.close)
    const key = await makeKey()
    const token = await issuer.mint(resource, key)
    const answer = await callWith(`${running.url}/mcp`, token, await proofFor(key, resource, token))
    expect(answer.status).toBe(500)
    expect(await answer.text()).toBe("Internal Server Error: the server could not answer this request\n")
    expect(reported).toEqual([new ReplayStoreError({ operation: "remember", message: "database is not open" })])
  })
})
