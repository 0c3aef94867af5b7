/**
 * The vault on a SQLite file through `node:sqlite`: WAL, `synchronous = FULL` (a stored token survives a crash), a
 * busy timeout so that instances sharing the file wait for each other's short writes. Statements are synchronous and
 * each is its own transaction, so no lock is ever held while a provider is called.
 *
 * @see {@link https://nodejs.org/api/sqlite.html | Node.js node:sqlite}
 * @see {@link https://sqlite.org/wal.html | SQLite write-ahead logging}
 * @module
 */
import type { SQLInputValue, StatementSync } from "node:sqlite"
import { Effect, Layer } from "effect"
import type { KeyRing } from "../KeyRing.js"
import { Vault, type VaultError } from "../Vault.js"
import { makeVault, storageError, type VaultOptions } from "../vault/service.js"
import { CONNECTIONS, FLOWS, type SqlRunner, sqlStore } from "../vault/sql.js"

/** Where the vault lives and how it seals: {@link sqliteVault}. */
export interface SqliteVaultOptions extends VaultOptions {
  /** The database file (created when missing), or `:memory:`. */
  readonly path: string
  readonly keyRing: KeyRing
  /** Milliseconds a statement waits for another connection's write lock (5000). */
  readonly busyTimeoutMillis?: number
}

/** A vault service that holds a database connection until `close`. */
export type VaultHandle = Vault["Service"] & { readonly close: () => Promise<void> }

// Schema versions, applied in order, each once. Never edit a released entry.
const MIGRATIONS: ReadonlyArray<string> = [
  `CREATE TABLE ${CONNECTIONS} (
     issuer TEXT NOT NULL,
     subject TEXT NOT NULL,
     provider TEXT NOT NULL,
     status TEXT NOT NULL,
     key_id TEXT NOT NULL,
     iv TEXT NOT NULL,
     ciphertext TEXT NOT NULL,
     connected_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     version INTEGER NOT NULL,
     lease TEXT,
     lease_until INTEGER NOT NULL,
     PRIMARY KEY (issuer, subject, provider)
   ) STRICT;
   CREATE INDEX ${CONNECTIONS}_key_id ON ${CONNECTIONS} (key_id);
   CREATE TABLE ${FLOWS} (
     reference_hash TEXT PRIMARY KEY,
     key_id TEXT NOT NULL,
     iv TEXT NOT NULL,
     ciphertext TEXT NOT NULL,
     expires_at INTEGER NOT NULL,
     taken INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX ${FLOWS}_expires_at ON ${FLOWS} (expires_at);`,
]

// Loaded on first use, so that importing `/node` for the PostgreSQL vault (or on a Node.js without node:sqlite) never
// loads node:sqlite.
const loadSqlite = () => import("node:sqlite")

const open = async (options: SqliteVaultOptions) => {
  const { DatabaseSync } = await loadSqlite()
  const db = new DatabaseSync(options.path)
  db.exec(`PRAGMA busy_timeout = ${options.busyTimeoutMillis ?? 5000}`)
  db.exec("PRAGMA journal_mode = WAL")
  db.exec("PRAGMA synchronous = FULL")
  // user_version holds the schema version; BEGIN IMMEDIATE makes instances starting together migrate one at a time.
  db.exec("BEGIN IMMEDIATE")
  try {
    const version = Number((db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version)
    for (const [index, sql] of MIGRATIONS.entries()) if (index >= version) db.exec(sql)
    db.exec(`PRAGMA user_version = ${MIGRATIONS.length}`)
    db.exec("COMMIT")
  } catch (error) {
    db.exec("ROLLBACK")
    db.close()
    throw error
  }
  const statements = new Map<string, StatementSync>()
  const prepare = (sql: string) => {
    let statement = statements.get(sql)
    if (statement === undefined) {
      statement = db.prepare(sql.replace(/\$(\d+)/g, "?$1"))
      statements.set(sql, statement)
    }
    return statement
  }
  const runner: SqlRunner = {
    rows: async (sql, params) =>
      prepare(sql).all(...(params as Array<SQLInputValue>)) as ReadonlyArray<Record<string, unknown>>,
    count: async (sql, params) => Number(prepare(sql).run(...(params as Array<SQLInputValue>)).changes),
  }
  return { runner, close: () => db.close() }
}

const acquire = (options: SqliteVaultOptions) =>
  Effect.tryPromise({ try: () => open(options), catch: (error) => storageError("open", error) })

/**
 * Opens (and creates or migrates) the vault in a SQLite file; fails with `VaultError` `storage` when the file cannot
 * be opened. Several instances may open one file.
 */
export const sqliteVault = async (options: SqliteVaultOptions): Promise<VaultHandle> => {
  let opened: Awaited<ReturnType<typeof open>>
  try {
    opened = await open(options)
  } catch (error) {
    throw storageError("open", error)
  }
  const { runner, close } = opened
  return { ...makeVault(sqlStore(runner), options.keyRing, options), close: async () => close() }
}

/** The vault in a SQLite file as a layer; the file is closed when the layer's scope ends. */
export const layerSqliteVault = (options: SqliteVaultOptions): Layer.Layer<Vault, VaultError> =>
  Layer.effect(
    Vault,
    Effect.acquireRelease(acquire(options), ({ close }) => Effect.sync(close)).pipe(
      Effect.map(({ runner }) => makeVault(sqlStore(runner), options.keyRing, options)),
    ),
  )
