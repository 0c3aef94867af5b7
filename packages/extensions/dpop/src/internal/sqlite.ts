/**
 * The replay store in a SQLite file (`node:sqlite`) shared by the processes of one machine: WAL, so readers and the one
 * writer of the moment do not wait for each other, and one short write transaction per proof.
 */
import type { DatabaseSync } from "node:sqlite"
import type { ReplayCache } from "./replay.js"
import { keyBytes, messageOf, PURGED_PER_INSERT, ReplayStoreError } from "./store.js"

/**
 * Options of {@link sqliteReplayCache}.
 *
 * @see {@link https://www.sqlite.org/wal.html | SQLite write-ahead logging}
 */
export interface SqliteReplayCacheOptions {
  /** The database file, the same for every process behind the resource; created when absent. */
  readonly path: string
  /** How long a write waits for another process's lock before it fails, in milliseconds; 5 000 by default. */
  readonly busyTimeoutMs?: number
}

/**
 * A {@link ReplayCache} in a SQLite file; its answers are synchronous.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 */
export interface SqliteReplayCache extends ReplayCache {
  readonly remember: (key: string, expiresAt: number, now: number) => boolean
  /** Closes the database; later calls to `remember` throw. */
  readonly close: () => Promise<void>
}

/**
 * A replay cache in a SQLite file, for several processes on one machine behind one resource (the file is theirs: give
 * each resource its own). Each proof is one `BEGIN IMMEDIATE` transaction: up to two expired
 * rows deleted, then `INSERT ... ON CONFLICT DO UPDATE ... WHERE` the held row has expired, so the `jti` is recorded
 * when absent or expired and refused otherwise, atomically under SQLite's write lock. WAL with `synchronous =
 * NORMAL`: no flush to disk per proof; a process crash loses nothing, a power loss may forget the last proofs (which
 * their `iat` refuses soon after anyway). Throws {@link ReplayStoreError} when the file cannot be opened.
 *
 * @example
 * ```ts
 * const replayCache = sqliteReplayCache({ path: "/var/lib/mcp/dpop-replay.db" })
 * const scheme = dpopScheme({ replayCache })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 * @see {@link https://www.sqlite.org/lang_upsert.html | SQLite UPSERT}
 */
export const sqliteReplayCache = (options: SqliteReplayCacheOptions): SqliteReplayCache => {
  const timeout = Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000))
  let db: DatabaseSync | undefined
  try {
    // Loaded here, not imported: the rest of this entry runs without node:sqlite.
    const { DatabaseSync } = process.getBuiltinModule("node:sqlite")
    db = new DatabaseSync(options.path, { timeout })
    db.exec(`PRAGMA busy_timeout = ${timeout}`)
    db.exec("PRAGMA journal_mode = WAL")
    db.exec("PRAGMA synchronous = NORMAL")
    db.exec(`CREATE TABLE IF NOT EXISTS dpop_replay (
      key BLOB PRIMARY KEY,
      expires_at INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID`)
    db.exec("CREATE INDEX IF NOT EXISTS dpop_replay_expires_at ON dpop_replay (expires_at)")
  } catch (error) {
    db?.close()
    throw new ReplayStoreError({ operation: "open", message: messageOf(error) })
  }
  const open = db
  const begin = open.prepare("BEGIN IMMEDIATE")
  const commit = open.prepare("COMMIT")
  const purge = open.prepare(
    `DELETE FROM dpop_replay WHERE key IN
       (SELECT key FROM dpop_replay WHERE expires_at <= ? ORDER BY expires_at LIMIT ${PURGED_PER_INSERT})`,
  )
  const insert = open.prepare(
    `INSERT INTO dpop_replay (key, expires_at) VALUES (?, ?)
     ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE dpop_replay.expires_at <= ?`,
  )
  return {
    remember: (key, expiresAt, now) => {
      // Whole seconds: a proof's iat may have a fraction, and the column is an integer.
      const at = Math.floor(now)
      try {
        begin.run()
        try {
          purge.run(at)
          const changes = insert.run(keyBytes(key), Math.ceil(expiresAt), at).changes
          commit.run()
          return Number(changes) === 1
        } catch (error) {
          if (open.isTransaction) open.exec("ROLLBACK")
          throw error
        }
      } catch (error) {
        throw new ReplayStoreError({ operation: "remember", message: messageOf(error) })
      }
    },
    close: async () => {
      if (open.isOpen) open.close()
    },
  }
}
