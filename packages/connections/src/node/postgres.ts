/**
 * The vault in PostgreSQL through node-postgres (`pg`, an optional peer, loaded only when a vault is opened), for
 * several MCP server instances sharing one database. Each method is one statement: the refresh lease and the taking
 * of a flow are conditional `UPDATE`s that PostgreSQL re-checks once the competing writer's row lock is released.
 *
 * @see {@link https://node-postgres.com/apis/pool | node-postgres Pool}
 * @see {@link https://www.postgresql.org/docs/current/transaction-iso.html#XACT-READ-COMMITTED | PostgreSQL READ COMMITTED}
 * @module
 */
import { Effect, Layer } from "effect"
import type { KeyRing } from "../KeyRing.js"
import { Vault, type VaultError } from "../Vault.js"
import { makeVault, storageError, type VaultOptions } from "../vault/service.js"
import { CONNECTIONS, FLOWS, type SqlRunner, sqlStore } from "../vault/sql.js"
import type { VaultHandle } from "./sqlite.js"

/** The result of a query, as node-postgres answers it. */
export interface PostgresResult {
  readonly rows: Array<Record<string, unknown>>
  readonly rowCount: number | null
}

/** A connection checked out of a {@link PostgresPool}; a node-postgres `PoolClient` fits. */
export interface PostgresClient {
  query(text: string, values?: Array<unknown>): Promise<PostgresResult>
  release(error?: Error | boolean): void
}

/** The part of a node-postgres `Pool` the vault uses, so that its types do not require `pg`; a `pg.Pool` fits. */
export interface PostgresPool {
  query(text: string, values?: Array<unknown>): Promise<PostgresResult>
  connect(): Promise<PostgresClient>
}

/** Where the vault lives and how it seals: a connection string (the vault owns its pool) or a pool of yours. */
export type PostgresVaultOptions = VaultOptions & { readonly keyRing: KeyRing } & (
    | { readonly connectionString: string }
    | { readonly pool: PostgresPool }
  )

// Schema versions, applied in order, each once. Never edit a released entry.
const MIGRATIONS: ReadonlyArray<string> = [
  `CREATE TABLE ${CONNECTIONS} (
     issuer text NOT NULL,
     subject text NOT NULL,
     provider text NOT NULL,
     status text NOT NULL,
     key_id text NOT NULL,
     iv text NOT NULL,
     ciphertext text NOT NULL,
     connected_at bigint NOT NULL,
     updated_at bigint NOT NULL,
     version bigint NOT NULL,
     lease text,
     lease_until bigint NOT NULL,
     PRIMARY KEY (issuer, subject, provider)
   );
   CREATE INDEX ${CONNECTIONS}_key_id ON ${CONNECTIONS} (key_id);
   CREATE TABLE ${FLOWS} (
     reference_hash text PRIMARY KEY,
     key_id text NOT NULL,
     iv text NOT NULL,
     ciphertext text NOT NULL,
     expires_at bigint NOT NULL,
     taken integer NOT NULL
   );
   CREATE INDEX ${FLOWS}_expires_at ON ${FLOWS} (expires_at);`,
]

const migrate = async (pool: PostgresPool): Promise<void> => {
  const client = await pool.connect()
  try {
    await client.query("BEGIN")
    // Instances starting together migrate one at a time.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('keyway_vault_schema'))")
    await client.query("CREATE TABLE IF NOT EXISTS keyway_vault_schema (version integer NOT NULL)")
    const found = await client.query("SELECT version FROM keyway_vault_schema")
    const version = Number(found.rows[0]?.version ?? 0)
    for (const [index, sql] of MIGRATIONS.entries()) if (index >= version) await client.query(sql)
    if (found.rows.length === 0)
      await client.query("INSERT INTO keyway_vault_schema (version) VALUES ($1)", [MIGRATIONS.length])
    else await client.query("UPDATE keyway_vault_schema SET version = $1", [MIGRATIONS.length])
    await client.query("COMMIT")
    client.release()
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined)
    client.release(true)
    throw error
  }
}

const open = async (options: PostgresVaultOptions): Promise<{ runner: SqlRunner; close: () => Promise<void> }> => {
  let pool: PostgresPool
  let close: () => Promise<void>
  if ("pool" in options) {
    pool = options.pool
    close = async () => {}
  } else {
    const { default: pg } = await import("pg")
    const owned = new pg.Pool({ connectionString: options.connectionString })
    pool = owned as unknown as PostgresPool
    close = () => owned.end()
  }
  try {
    await migrate(pool)
  } catch (error) {
    await close()
    throw error
  }
  const runner: SqlRunner = {
    rows: async (sql, params) => (await pool.query(sql, [...params])).rows,
    count: async (sql, params) => (await pool.query(sql, [...params])).rowCount ?? 0,
  }
  return { runner, close }
}

const acquire = (options: PostgresVaultOptions) =>
  Effect.tryPromise({ try: () => open(options), catch: (error) => storageError("open", error) })

/**
 * Opens the vault in PostgreSQL, creating or migrating its tables (`keyway_connections`, `keyway_connection_flows`,
 * on the search path); rejects with `VaultError` `storage` when the database cannot be reached. `close` ends the pool
 * when the vault made it.
 */
export const postgresVault = async (options: PostgresVaultOptions): Promise<VaultHandle> => {
  let opened: Awaited<ReturnType<typeof open>>
  try {
    opened = await open(options)
  } catch (error) {
    throw storageError("open", error)
  }
  return { ...makeVault(sqlStore(opened.runner), options.keyRing, options), close: opened.close }
}

/** The vault in PostgreSQL as a layer; a pool the layer made is ended when its scope ends. */
export const layerPostgresVault = (options: PostgresVaultOptions): Layer.Layer<Vault, VaultError> =>
  Layer.effect(
    Vault,
    Effect.acquireRelease(acquire(options), ({ close }) => Effect.promise(close)).pipe(
      Effect.map(({ runner }) => makeVault(sqlStore(runner), options.keyRing, options)),
    ),
  )
