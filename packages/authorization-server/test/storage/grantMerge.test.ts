/**
 * A database written before one live grant per user, client and resource (every authorization opened its own grant)
 * opens with this Keyway: the schema is built with the migrations that came before (their own SQL), rows are written
 * as that Keyway wrote them, and opening merges the duplicates into one grant per user, client and resource without
 * losing a code, a token or a family, then keeps the rule with a unique index. SQLite and PostgreSQL.
 */
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { Effect, type Layer, Option } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  GrantNotFound,
  GrantStore,
  layerPostgres,
  layerSqlite,
  RefreshTokenRevoked,
  type StorageError,
  type Stores,
} from "../../src/storage/index.js"
import * as Postgres from "../../src/storage/internal/postgres.js"
import type { Driver } from "../../src/storage/internal/sql.js"
import * as Sqlite from "../../src/storage/internal/sqlite.js"
import { mergeDuplicateGrants } from "../../src/storage/internal/store.js"
import { NOW, runWith, secret } from "./contract.js"

const hash = (raw: string) => createHash("sha256").update(raw, "utf8").digest("base64url")

/** The last schema version before the merge. */
const BEFORE = 4
const RESOURCE = "https://mcp.example.com/mcp"
const OTHER_RESOURCE = "https://other.example.com/mcp"
const raw = { t0: secret(), t1: secret(), t2: secret(), c2: secret(), c3: secret() }

type Seed = ReadonlyArray<readonly [string, Record<string, string | number | null>]>

const grant = (grant_id: string, subject: string, scope: string, created_at: number, auth_time: number) =>
  [
    "grants",
    { grant_id, client_id: "client-a", subject, resource: RESOURCE, scope, auth_time, created_at, revoked_at: null },
  ] as const
const family = (family_id: string, grant_id: string, created_at: number, revoked_at: number | null = null) =>
  ["refresh_families", { family_id, grant_id, created_at, revoked_at }] as const
const refresh = (token: string, family_id: string, scope: string, issued_at: number) =>
  [
    "refresh_tokens",
    { token_hash: hash(token), family_id, scope, issued_at, expires_at: NOW + 86_400, rotated_at: null },
  ] as const
const code = (value: string, grant_id: string, scope: string, issued_at: number) =>
  [
    "authorization_codes",
    {
      code_hash: hash(value),
      grant_id,
      client_id: "client-a",
      redirect_uri: "https://app.example.com/callback",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope,
      subject: "alice",
      auth_time: issued_at - 5,
      issued_at,
      expires_at: NOW + 60,
      nonce: null,
      consumed_at: null,
    },
  ] as const

/**
 * Alice authorized client-a three times at one resource (g1, g2, g3: a family, access tokens, unused codes), after a
 * grant since revoked (g0); a grant at another resource (g4) and bob's (g5) stand alone; a user whose name and grant
 * ids begin with "-" authorized twice.
 */
const seed: Seed = [
  ["grants", { ...grant("g0", "alice", "old", NOW - 400, NOW - 410)[1], revoked_at: NOW - 350 }],
  family("f0", "g0", NOW - 400, NOW - 350),
  refresh(raw.t0, "f0", "old", NOW - 400),
  grant("g1", "alice", "files:read", NOW - 300, NOW - 310),
  family("f1", "g1", NOW - 300),
  refresh(raw.t1, "f1", "files:read", NOW - 300),
  ["access_tokens", { jti: "a1", grant_id: "g1", expires_at: NOW + 600 }],
  grant("g2", "alice", "files:write files:read", NOW - 200, NOW - 210),
  family("f2", "g2", NOW - 200),
  refresh(raw.t2, "f2", "files:write files:read", NOW - 200),
  ["access_tokens", { jti: "a2", grant_id: "g2", expires_at: NOW + 600 }],
  code(raw.c2, "g2", "files:write files:read", NOW - 20),
  grant("g3", "alice", "admin", NOW - 100, NOW - 150),
  code(raw.c3, "g3", "admin", NOW - 10),
  ["grants", { ...grant("g4", "alice", "files:read", NOW - 250, NOW - 260)[1], resource: OTHER_RESOURCE }],
  grant("g5", "bob", "files:read", NOW - 250, NOW - 260),
  grant("-g7", "-carol", "b", NOW - 50, NOW - 60),
  grant("-g6", "-carol", "a", NOW - 90, NOW - 95),
]

/** Counts of the rows that must all survive the merge (then the check adds the next authorization's code). */
const COUNTS = `SELECT (SELECT COUNT(*) FROM refresh_families) AS families, (SELECT COUNT(*) FROM refresh_tokens) AS tokens,
  (SELECT COUNT(*) FROM authorization_codes) AS codes, (SELECT COUNT(*) FROM access_tokens) AS access_tokens`
const AFTER_CHECK = { families: 3, tokens: 3, codes: 2 + 1, access_tokens: 2 }

/** What the merged database holds and does, through the stores. */
const check = (layer: () => Layer.Layer<Stores, StorageError>) =>
  runWith(layer)(
    Effect.gen(function* () {
      const grants = yield* GrantStore
      const merged = {
        grant_id: "g1",
        client_id: "client-a",
        subject: "alice",
        resource: RESOURCE,
        scope: "files:read files:write admin",
        auth_time: NOW - 150,
        created_at: NOW - 300,
      }
      // One grant per user, client and resource: the oldest, with the union of the scopes in the order they came,
      // the latest auth_time, and the latest authorization as its last use.
      expect(yield* grants.listGrants()).toEqual([
        { ...merged, last_used_at: NOW - 100 },
        {
          ...merged,
          grant_id: "g4",
          resource: OTHER_RESOURCE,
          scope: "files:read",
          auth_time: NOW - 260,
          created_at: NOW - 250,
          last_used_at: NOW - 250,
        },
        {
          ...merged,
          grant_id: "g5",
          subject: "bob",
          scope: "files:read",
          auth_time: NOW - 260,
          created_at: NOW - 250,
          last_used_at: NOW - 250,
        },
        {
          ...merged,
          grant_id: "-g6",
          subject: "-carol",
          scope: "a b",
          auth_time: NOW - 60,
          created_at: NOW - 90,
          last_used_at: NOW - 50,
        },
      ])
      for (const gone of ["g2", "g3", "-g7"]) {
        expect(yield* Effect.flip(grants.getGrant(gone))).toEqual(new GrantNotFound({ grant_id: gone }))
      }
      // A revoked grant is left as it was.
      expect(yield* grants.getGrant("g0")).toEqual({
        ...merged,
        grant_id: "g0",
        scope: "old",
        auth_time: NOW - 410,
        created_at: NOW - 400,
        revoked_at: NOW - 350,
      })

      // Every family refreshes on under the merged grant, with its own scope and the auth_time of its own login.
      const status = (token: string) =>
        Effect.map(grants.findRefresh(token, NOW), (found) =>
          Option.map(found, (t) => [t.grant_id, t.family_id, t.scope, t.auth_time, t.active]),
        )
      expect(yield* status(raw.t1)).toEqual(Option.some(["g1", "f1", "files:read", NOW - 310, true]))
      expect(yield* status(raw.t2)).toEqual(Option.some(["g1", "f2", "files:write files:read", NOW - 210, true]))
      expect(yield* status(raw.t0)).toEqual(Option.some(["g0", "f0", "old", NOW - 410, false]))
      // Unused codes of the merged grants are redeemed under the survivor.
      expect((yield* grants.consumeCode(raw.c2, NOW)).grant_id).toBe("g1")
      expect((yield* grants.consumeCode(raw.c3, NOW)).grant_id).toBe("g1")
      // The next authorization widens the survivor.
      const next = yield* grants.createCode({
        code: secret(),
        client_id: "client-a",
        redirect_uri: "https://app.example.com/callback",
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
        resource: RESOURCE,
        scope: "files:delete",
        subject: "alice",
        auth_time: NOW - 1,
        issued_at: NOW,
        expires_at: NOW + 60,
      })
      expect(next.grant_id).toBe("g1")
      expect((yield* grants.getGrant("g1")).scope).toBe("files:read files:write admin files:delete")
      // Revoking it reaches everything the merged grants had issued.
      yield* grants.revokeGrant("g1", NOW + 1)
      expect([yield* grants.isAccessTokenRevoked("a1"), yield* grants.isAccessTokenRevoked("a2")]).toEqual([true, true])
      expect(yield* Effect.flip(grants.getRefresh(raw.t2, NOW + 2))).toEqual(
        new RefreshTokenRevoked({ family_id: "f2", grant_id: "g1" }),
      )
    }),
  )

/** The merge run again over a database already merged finds nothing, and the store's view stays as it was. */
const mergeAgain = (driver: Driver) =>
  Effect.runPromise(driver.run("merge again", "transaction", () => mergeDuplicateGrants(driver.tables)))

const DUPLICATE = `INSERT INTO grants (grant_id, client_id, subject, resource, scope, auth_time, created_at, revoked_at)
  VALUES ($1, 'client-a', 'bob', '${RESOURCE}', 'x', 1, 1, $2)`

describe("merging the grants of a SQLite file written before one grant per user, client and resource", () => {
  const dir = mkdtempSync(join(tmpdir(), "keyway-merge-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("merges the duplicates, loses nothing, keeps working, and the database refuses a second live grant", async () => {
    const path = join(dir, "v4.sqlite")
    const db = new DatabaseSync(path)
    db.exec("PRAGMA journal_mode = WAL")
    db.exec(
      "CREATE TABLE keyway_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    )
    for (const m of Sqlite.MIGRATIONS.filter((m) => m.version <= BEFORE)) {
      db.exec(m.sql)
      db.prepare("INSERT INTO keyway_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(
        m.version,
        m.name,
        NOW,
      )
    }
    for (const [table, values] of seed) {
      const columns = Object.keys(values)
      db.prepare(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`).run(
        ...Object.values(values),
      )
    }
    db.close()

    await check(() => layerSqlite({ path }))

    const after = Sqlite.open({ path }, NOW)
    try {
      expect({ ...after.prepare(COUNTS).get() }).toEqual(AFTER_CHECK)
      expect(after.prepare("SELECT MAX(version) AS v FROM keyway_migrations").get()).toEqual({
        v: Sqlite.MIGRATIONS.at(-1)?.version,
      })
      const grantIds = () => after.prepare("SELECT grant_id FROM grants ORDER BY grant_id").all()
      const before = grantIds()
      expect(await mergeAgain(Sqlite.driver(after))).toBe(0)
      expect(grantIds()).toEqual(before)
      const insert = after.prepare(DUPLICATE.replace(/\$(\d)/g, "?$1"))
      insert.run("revoked-twin", NOW)
      expect(() => insert.run("live-twin", null)).toThrow(
        "UNIQUE constraint failed: grants.subject, grants.client_id, grants.resource",
      )
    } finally {
      after.close()
    }
  })
})

describe("merging the grants of a PostgreSQL schema written before one grant per user, client and resource", () => {
  let server: PostgresServer
  beforeAll(async () => {
    server = await startPostgres()
  }, 300_000)
  afterAll(() => server?.stop())

  it("merges the duplicates, loses nothing, keeps working, and the database refuses a second live grant", async () => {
    const url = server.createDatabase("merge")
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    try {
      await pool.query('CREATE SCHEMA "-old"')
      await pool.query('SET search_path TO "-old"')
      await pool.query(
        "CREATE TABLE keyway_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)",
      )
      for (const m of Postgres.MIGRATIONS.filter((m) => m.version <= BEFORE)) {
        await pool.query(m.sql)
        await pool.query("INSERT INTO keyway_migrations (version, name, applied_at) VALUES ($1, $2, $3)", [
          m.version,
          m.name,
          NOW,
        ])
      }
      for (const [table, values] of seed) {
        const columns = Object.keys(values)
        await pool.query(
          `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`,
          Object.values(values),
        )
      }
    } finally {
      await pool.end()
    }

    await check(() => layerPostgres({ connectionString: url, schema: "-old" }))

    const after = new pg.Pool({ connectionString: url, max: 1 })
    const database = await Postgres.open({ pool: after, schema: "-old" }, NOW)
    try {
      await after.query('SET search_path TO "-old"')
      const counts = (await after.query(COUNTS)).rows[0] as Record<string, string>
      expect(Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, Number(v)]))).toEqual(AFTER_CHECK)
      const grantIds = async () => (await after.query('SELECT grant_id FROM "-old".grants ORDER BY grant_id')).rows
      const before = await grantIds()
      expect(await mergeAgain(Postgres.driver(database))).toBe(0)
      expect(await grantIds()).toEqual(before)
      await after.query(DUPLICATE, ["revoked-twin", NOW])
      await expect(after.query(DUPLICATE, ["live-twin", null])).rejects.toThrow(
        'duplicate key value violates unique constraint "grants_live"',
      )
    } finally {
      await database.close()
      await after.end()
    }
  })
})
