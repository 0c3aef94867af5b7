import { type PostgresServer, startPostgres } from "@keyway/testing"
import { Context, Effect, Exit, Layer, Option, Scope } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { layerPostgresVault, postgresVault } from "../src/node/postgres.js"
import { Vault } from "../src/Vault.js"
import { sqlStore } from "../src/vault/sql.js"
import { ringA, tokens, user, vaultContract } from "./vaultContract.js"

let server: PostgresServer
let databases = 0
beforeAll(async () => {
  server = await startPostgres()
})
afterAll(() => server?.stop())

const freshDatabase = () => server.createDatabase(`vault_${++databases}`)

vaultContract({
  name: "PostgreSQL",
  fresh: async () => {
    const connectionString = freshDatabase()
    const raw = new pg.Pool({ connectionString })
    const handles: Array<{ close: () => Promise<void> }> = []
    // Two instances are two vaults with pools of their own on one database.
    handles.push(await postgresVault({ connectionString, keyRing: ringA }))
    return {
      store: sqlStore({
        rows: async (sql, params) => (await raw.query(sql, [...params])).rows,
        count: async (sql, params) => (await raw.query(sql, [...params])).rowCount ?? 0,
      }),
      open: async (keyRing, options) => {
        const handle = await postgresVault({ connectionString, keyRing, ...options })
        handles.push(handle)
        return handle
      },
      close: async () => {
        for (const handle of handles) await handle.close()
        await raw.end()
      },
    }
  },
})

describe("PostgreSQL vault at rest", () => {
  it("keeps no token, refresh token or code verifier in clear in any column", async () => {
    const connectionString = freshDatabase()
    const pool = new pg.Pool({ connectionString })
    // A pool of the caller's: the vault uses it and leaves it open.
    const vault = await postgresVault({ pool, keyRing: ringA })
    await Effect.runPromise(vault.put(user, tokens("1", 1_800_003_600), 1_800_000_000))
    await Effect.runPromise(
      vault.putFlow("-reference-secret", {
        key: user,
        elicitationId: "e",
        state: "state-secret",
        codeVerifier: "verifier-secret",
        redirectUri: "http://127.0.0.1:1/cb",
        expiresAt: 1_800_000_600,
      }),
    )
    const dump = [
      ...(await pool.query("SELECT t::text AS row FROM keyway_connections t")).rows,
      ...(await pool.query("SELECT t::text AS row FROM keyway_connection_flows t")).rows,
    ]
      .map((r) => String(r.row))
      .join("\n")
    expect(dump).toContain("-a")
    for (const secret of [
      "access-1-secret",
      "refresh-1-secret",
      "verifier-secret",
      "state-secret",
      "-reference-secret",
    ])
      expect(dump).not.toContain(secret)
    await vault.close()
    expect(Option.getOrThrow(await Effect.runPromise(vault.get(user))).tokens.accessToken).toBe("access-1-secret")
    await pool.end()
  })

  it("migrates once when two instances start together, and refuses an unreachable server with a typed error", async () => {
    const connectionString = freshDatabase()
    const [one, two] = await Promise.all([
      postgresVault({ connectionString, keyRing: ringA }),
      postgresVault({ connectionString, keyRing: ringA }),
    ])
    await one.close()
    await two.close()
    const error = await postgresVault({
      connectionString: `postgres://${server.user}@127.0.0.1:1/postgres`,
      keyRing: ringA,
    }).catch((e) => e)
    expect([error._tag, error.reason, error.message]).toEqual([
      "VaultError",
      "storage",
      "vault storage failed (open): connect ECONNREFUSED 127.0.0.1:1",
    ])
  })

  it("as a layer: serves the database while its scope is open, ends its own pool with the scope, and fails typed when the server cannot be reached", async () => {
    const connectionString = freshDatabase()
    const scope = await Effect.runPromise(Scope.make())
    const context = await Effect.runPromise(
      Layer.buildWithScope(layerPostgresVault({ connectionString, keyRing: ringA }), scope),
    )
    const vault = Context.get(context, Vault)
    await Effect.runPromise(vault.put(user, tokens("layer"), 1_000))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    // The pool the layer made is ended with its scope: the vault can no longer use it.
    const afterClose = await Effect.runPromise(Effect.flip(vault.get(user)))
    expect([afterClose._tag, afterClose.reason, afterClose.message]).toEqual([
      "VaultError",
      "storage",
      "vault storage failed (get): Cannot use a pool after calling end on the pool",
    ])
    const again = await postgresVault({ connectionString, keyRing: ringA })
    const read = Option.getOrThrow(await Effect.runPromise(again.get(user)))
    expect(read.tokens.accessToken).toBe(tokens("layer").accessToken)
    await again.close()
    const error = await Effect.runPromise(
      Effect.flip(
        Layer.build(
          layerPostgresVault({ connectionString: `postgres://${server.user}@127.0.0.1:1/postgres`, keyRing: ringA }),
        ).pipe(Effect.scoped),
      ),
    )
    expect([error._tag, error.reason, error.message]).toEqual([
      "VaultError",
      "storage",
      "vault storage failed (open): connect ECONNREFUSED 127.0.0.1:1",
    ])
  })
})
