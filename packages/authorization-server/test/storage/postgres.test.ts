import { type PostgresServer, startPostgres } from "@keyway/testing"
import { Context, Effect, Layer, Result, type Scope } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  ClientStore,
  CodeAlreadyUsed,
  GrantStore,
  KeyStore,
  layerPostgres,
  type PostgresOptions,
  purgeExpired,
  RefreshTokenReused,
  RefreshTokenRevoked,
  StorageError,
} from "../../src/storage/index.js"
import { MIGRATIONS } from "../../src/storage/internal/postgres.js"
import { NOW, newClient, newCode, runWith, secret, signingKey, storageContract } from "./contract.js"
import { rateLimitContract } from "./rateLimitContract.js"
import { recordContract } from "./recordContract.js"

let server: PostgresServer
/** One database for the contract suite; every test gets its own schema in it, so each starts empty. */
let contractUrl: string

beforeAll(async () => {
  server = await startPostgres()
  contractUrl = server.createDatabase("contract")
}, 300_000)
afterAll(() => server?.stop())

let schemas = 0
storageContract("postgres", () => layerPostgres({ connectionString: contractUrl, schema: `contract_${++schemas}` }))
rateLimitContract("postgres", () => layerPostgres({ connectionString: contractUrl, schema: `contract_${++schemas}` }))
recordContract("postgres", () => layerPostgres({ connectionString: contractUrl, schema: `contract_${++schemas}` }))

let databases = 0
const freshDatabase = () => server.createDatabase(`keyway_${++databases}`)

/** The three stores of one layer (one pool), kept for the rest of the scope. */
const connect = (options: PostgresOptions) =>
  Effect.map(Layer.build(layerPostgres(options)), (context) => ({
    clients: Context.get(context, ClientStore),
    grants: Context.get(context, GrantStore),
    keys: Context.get(context, KeyStore),
  }))

const run = <A, E>(program: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(Effect.scoped(program))

/** A plain pool for looking at the database from outside the stores. */
const inspect = async <A>(url: string, f: (pool: pg.Pool) => Promise<A>): Promise<A> => {
  const pool = new pg.Pool({ connectionString: url, max: 1 })
  try {
    return await f(pool)
  } finally {
    await pool.end()
  }
}

const migrations = (url: string, schema = "public") =>
  inspect(
    url,
    async (pool) =>
      (
        await pool.query(
          `SELECT version, name, applied_at::text AS applied_at FROM "${schema}".keyway_migrations ORDER BY version`,
        )
      ).rows,
  )

describe("postgres: migrations, pools, schemas", () => {
  it("persists across close and reopen, and reopening applies no migration again", async () => {
    const url = freshDatabase()
    const code = newCode()
    const clientSecret = secret()
    const grantId = await runWith(() => layerPostgres({ connectionString: url }))(
      Effect.gen(function* () {
        yield* (yield* ClientStore).create(newClient({ client_id: "persisted", client_secret: clientSecret }))
        yield* (yield* KeyStore).add(signingKey("k1"))
        return (yield* (yield* GrantStore).createCode(code)).grant_id
      }),
    )
    const before = await migrations(url)
    expect(before).toEqual(
      MIGRATIONS.map(({ version, name }) => ({ version, name, applied_at: before[0]?.applied_at })),
    )

    await runWith(() => layerPostgres({ connectionString: url }))(
      Effect.gen(function* () {
        expect(yield* (yield* ClientStore).verifySecret("persisted", clientSecret, NOW)).toBe(true)
        expect((yield* (yield* KeyStore).current(NOW)).kid).toBe("k1")
        expect((yield* (yield* GrantStore).consumeCode(code.code, NOW + 1)).grant_id).toBe(grantId)
      }),
    )
    await runWith(() => layerPostgres({ connectionString: url }))(
      Effect.gen(function* () {
        const replay = yield* Effect.flip((yield* GrantStore).consumeCode(code.code, NOW + 2))
        expect(replay).toEqual(new CodeAlreadyUsed({ grant_id: grantId }))
      }),
    )
    expect(await migrations(url)).toEqual(before)
  })

  it("migrates a fresh database once when several pools start at the same moment", async () => {
    const url = freshDatabase()
    await run(
      Effect.gen(function* () {
        const stores = yield* Effect.all(
          Array.from({ length: 4 }, () => connect({ connectionString: url, schema: "shared" })),
          { concurrency: "unbounded" },
        )
        // Each pool sees the one schema: what one writes, the others read.
        yield* stores[0]!.clients.create(newClient({ client_id: "from-first" }))
        for (const s of stores) expect((yield* s.clients.list()).map((c) => c.client_id)).toEqual(["from-first"])
      }),
    )
    const applied = await migrations(url, "shared")
    expect(applied).toEqual(
      MIGRATIONS.map(({ version, name }) => ({ version, name, applied_at: applied[0]?.applied_at })),
    )
    const tables = await inspect(
      url,
      async (pool) =>
        (
          await pool.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'shared' ORDER BY table_name",
          )
        ).rows,
    )
    expect(tables.map((t) => t.table_name)).toEqual([
      "access_tokens",
      "assertion_jtis",
      "authorization_codes",
      "clients",
      "consents",
      "extension_records",
      "grants",
      "issuer",
      "keyway_migrations",
      "rate_limits",
      "refresh_families",
      "refresh_tokens",
      "revoked_access_tokens",
      "signing_keys",
    ])
  })

  it("keeps schemas apart, quoting an unusual schema name", async () => {
    const url = freshDatabase()
    await run(
      Effect.gen(function* () {
        const a = yield* connect({ connectionString: url, schema: 'Tenant "A"' })
        const b = yield* connect({ connectionString: url, schema: "tenant_b" })
        yield* a.clients.create(newClient({ client_id: "only-in-a" }))
        expect((yield* a.clients.list()).map((c) => c.client_id)).toEqual(["only-in-a"])
        expect(yield* b.clients.list()).toEqual([])
      }),
    )
    expect(await migrations(url, 'Tenant ""A""')).toHaveLength(MIGRATIONS.length)
  })

  it("uses a caller's pool without ending it, and ends its own pool when the scope closes", async () => {
    const url = freshDatabase()
    const database = new URL(url).pathname.slice(1)
    const connections = () =>
      inspect(server.url, async (pool) =>
        Number(
          (
            await pool.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = $2", [
              database,
              "client backend",
            ])
          ).rows[0]?.n,
        ),
      )

    const own = new pg.Pool({ connectionString: url, max: 2 })
    try {
      await runWith(() => layerPostgres({ pool: own }))(
        Effect.gen(function* () {
          yield* (yield* ClientStore).create(newClient({ client_id: "via-pool" }))
        }),
      )
      // Still usable after the layer's scope closed: it was not the layer's to end.
      expect((await own.query("SELECT client_id FROM public.clients")).rows).toEqual([{ client_id: "via-pool" }])
    } finally {
      await own.end()
    }

    await run(
      Effect.gen(function* () {
        const { clients } = yield* connect({ connectionString: url, max: 3 })
        yield* Effect.all(
          Array.from({ length: 6 }, () => clients.list()),
          { concurrency: "unbounded" },
        )
        expect(yield* Effect.promise(connections)).toBeGreaterThan(0)
      }),
    )
    // The server notices a closed connection a moment after the client side has ended, so wait for it (bounded).
    let left = await connections()
    for (let i = 0; left > 0 && i < 100; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      left = await connections()
    }
    expect(left).toBe(0)
  })

  it("refuses a database written by a newer schema version", async () => {
    const url = freshDatabase()
    await runWith(() => layerPostgres({ connectionString: url }))(Effect.void)
    await inspect(url, (pool) =>
      pool.query("INSERT INTO public.keyway_migrations (version, name, applied_at) VALUES (99, 'future', 0)"),
    )
    const error = await Effect.runPromise(
      Effect.flip(Effect.provide(Effect.void, layerPostgres({ connectionString: url }))),
    )
    expect(error).toEqual(
      new StorageError({
        operation: "open",
        message: "database schema version 99 is newer than this Keyway (knows up to 1)",
      }),
    )
  })

  it("answers StorageError when the server cannot be reached or the schema name is invalid", async () => {
    const unreachable = `postgres://${server.user}@127.0.0.1:1/postgres`
    const error = await Effect.runPromise(
      Effect.flip(Effect.provide(Effect.void, layerPostgres({ connectionString: unreachable }))),
    )
    expect(error).toEqual(new StorageError({ operation: "open", message: "connect ECONNREFUSED 127.0.0.1:1" }))

    const empty = await Effect.runPromise(
      Effect.flip(Effect.provide(Effect.void, layerPostgres({ connectionString: contractUrl, schema: "" }))),
    )
    expect(empty).toEqual(new StorageError({ operation: "open", message: "schema name must be 1 to 63 bytes long" }))
  })

  it("answers StorageError, with the operation, when the server rejects a write", async () => {
    const error = await runWith(() => layerPostgres({ connectionString: contractUrl, schema: "rejects" }))(
      Effect.gen(function* () {
        const grants = yield* GrantStore
        const { grant_id } = yield* grants.createCode(newCode())
        yield* grants.recordAccessToken({ grant_id, jti: "same", expires_at: NOW + 60 })
        return yield* Effect.flip(grants.recordAccessToken({ grant_id, jti: "same", expires_at: NOW + 60 }))
      }),
    )
    expect(error).toEqual(
      new StorageError({
        operation: "GrantStore.recordAccessToken",
        message: 'duplicate key value violates unique constraint "access_tokens_pkey"',
      }),
    )
  })

  it("never stores a raw code, refresh token, client secret or registration token", async () => {
    const url = freshDatabase()
    const code = newCode()
    const refreshToken = secret()
    const rotated = secret()
    const clientSecret = secret()
    const registrationToken = secret()
    await runWith(() => layerPostgres({ connectionString: url }))(
      Effect.gen(function* () {
        const grants = yield* GrantStore
        yield* (yield* ClientStore).create(
          newClient({ client_id: "c", client_secret: clientSecret, registration_access_token: registrationToken }),
        )
        const created = yield* grants.createCode(code)
        yield* grants.consumeCode(code.code, NOW + 1)
        yield* grants.createRefresh({ grant_id: created.grant_id, token: refreshToken, scope: "", issued_at: NOW })
        yield* grants.rotate({
          token: refreshToken,
          new_token: rotated,
          client_id: code.client_id,
          scope: "",
          now: NOW,
        })
      }),
    )
    const everything = await inspect(url, async (pool) => {
      const tables = await pool.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
      const dumps = await Promise.all(
        tables.rows.map(
          async ({ table_name }) =>
            (await pool.query(`SELECT row_to_json(t)::text AS j FROM public."${table_name}" t`)).rows,
        ),
      )
      return dumps
        .flat()
        .map((r) => r.j)
        .join("\n")
    })
    expect(everything).toContain("https://mcp.example.com/mcp")
    for (const raw of [code.code, refreshToken, rotated, clientSecret, registrationToken]) {
      expect(everything).not.toContain(raw)
    }
  })

  it("purges every store at once", async () => {
    await runWith(() => layerPostgres({ connectionString: contractUrl, schema: "purge" }))(
      Effect.gen(function* () {
        const grants = yield* GrantStore
        yield* (yield* ClientStore).create(
          newClient({ client_id: "cached", origin: "metadata-document", expires_at: NOW + 10 }),
        )
        yield* (yield* ClientStore).create(newClient({ client_id: "registered" }))
        yield* (yield* KeyStore).add(signingKey("old", { status: "retired", retires_at: NOW + 10 }))
        yield* (yield* KeyStore).add(signingKey("new"))
        const expiring = newCode({ expires_at: NOW + 10 })
        yield* grants.createCode(expiring)
        // Another user's, so the expiring code's grant is left empty.
        const live = newCode({ subject: "bob", expires_at: NOW + 100 })
        yield* grants.createCode(live)

        expect(yield* purgeExpired(NOW + 9)).toEqual({ clients: 0, grants: 0, keys: 0, rateLimits: 0, records: 0 })
        // The expired code and the grant it leaves empty.
        expect(yield* purgeExpired(NOW + 10)).toEqual({ clients: 1, grants: 2, keys: 1, rateLimits: 0, records: 0 })
        expect(yield* purgeExpired(NOW + 10)).toEqual({ clients: 0, grants: 0, keys: 0, rateLimits: 0, records: 0 })
        expect((yield* grants.consumeCode(live.code, NOW + 11)).expires_at).toBe(NOW + 100)
        expect((yield* (yield* ClientStore).list()).map((c) => c.client_id)).toEqual(["registered"])
        expect((yield* (yield* KeyStore).list()).map((k) => k.kid)).toEqual(["new"])
      }),
    )
  })

  it("redeems a code once and rotates a token once across two pools on one database", async () => {
    const url = freshDatabase()
    await run(
      Effect.gen(function* () {
        const a = yield* connect({ connectionString: url, max: 10 })
        // The second "process" brings its own pg.Pool.
        const ownPool = yield* Effect.acquireRelease(
          Effect.sync(() => new pg.Pool({ connectionString: url, max: 10 })),
          (pool) => Effect.promise(() => pool.end()),
        )
        const b = yield* connect({ pool: ownPool })
        const code = newCode()
        const created = yield* a.grants.createCode(code)
        const redemptions = yield* Effect.all(
          Array.from({ length: 50 }, (_, i) => Effect.result((i % 2 === 0 ? a : b).grants.consumeCode(code.code, NOW))),
          { concurrency: "unbounded" },
        )
        expect(redemptions.filter(Result.isSuccess)).toHaveLength(1)
        expect(redemptions.filter(Result.isFailure).map((r) => r.failure)).toEqual(
          Array.from({ length: 49 }, () => new CodeAlreadyUsed({ grant_id: created.grant_id })),
        )
        expect((yield* b.grants.getGrant(created.grant_id)).revoked_at).toBe(NOW)

        const fresh = newCode()
        const grant = yield* b.grants.createCode(fresh)
        yield* a.grants.consumeCode(fresh.code, NOW)
        const token = secret()
        const refresh = yield* a.grants.createRefresh({ grant_id: grant.grant_id, token, scope: "", issued_at: NOW })
        const successors = Array.from({ length: 50 }, () => secret())
        const rotations = yield* Effect.all(
          successors.map((next, i) =>
            Effect.result(
              (i % 2 === 0 ? a : b).grants.rotate({
                token,
                new_token: next,
                client_id: fresh.client_id,
                scope: "",
                now: NOW + 1,
              }),
            ),
          ),
          { concurrency: "unbounded" },
        )
        const winners = rotations.flatMap((r, i) => (Result.isSuccess(r) ? [successors[i] ?? ""] : []))
        expect(winners).toHaveLength(1)
        expect(rotations.filter(Result.isFailure).map((r) => r.failure)).toEqual(
          Array.from(
            { length: 49 },
            () => new RefreshTokenReused({ family_id: refresh.family_id, grant_id: grant.grant_id }),
          ),
        )
        expect((yield* b.grants.getGrant(grant.grant_id)).revoked_at).toBe(NOW + 1)
        expect(yield* Effect.flip(a.grants.getRefresh(winners[0] ?? "", NOW + 2))).toEqual(
          new RefreshTokenRevoked({ family_id: refresh.family_id, grant_id: grant.grant_id }),
        )
      }),
    )
  })

  it("lets exactly one of concurrent uses of an assertion jti through across two pools", async () => {
    const url = freshDatabase()
    await run(
      Effect.gen(function* () {
        const a = yield* connect({ connectionString: url })
        const b = yield* connect({ connectionString: url })
        const fresh = yield* Effect.all(
          Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).grants.rememberJti("client-a", "jti", NOW + 60)),
          { concurrency: "unbounded" },
        )
        expect(fresh.filter((f) => f)).toHaveLength(1)
      }),
    )
  })

  it("merges concurrent consents from two pools instead of losing one", async () => {
    const url = freshDatabase()
    await run(
      Effect.gen(function* () {
        const a = yield* connect({ connectionString: url })
        const b = yield* connect({ connectionString: url })
        const scopes = Array.from({ length: 20 }, (_, i) => `scope:${String(i).padStart(2, "0")}`)
        yield* Effect.all(
          scopes.map((scope, i) =>
            (i % 2 === 0 ? a : b).grants.grantConsent({
              subject: "alice",
              client_id: "client-a",
              resource: "https://mcp.example.com/mcp",
              scopes: [scope],
              granted_at: NOW + i,
            }),
          ),
          { concurrency: "unbounded" },
        )
        const consent = yield* a.grants.getConsent("alice", "client-a", "https://mcp.example.com/mcp")
        expect(consent._tag === "Some" ? consent.value : undefined).toEqual({
          subject: "alice",
          client_id: "client-a",
          resource: "https://mcp.example.com/mcp",
          scopes,
          granted_at: NOW + 19,
        })
      }),
    )
  })
})
