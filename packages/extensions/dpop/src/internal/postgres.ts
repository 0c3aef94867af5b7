/**
 * The replay store in PostgreSQL (node-postgres, an optional peer dependency loaded only when this store is made),
 * shared by instances on several machines: one statement, so one round trip, per proof.
 */
import type { ReplayCache } from "./replay.js"
import { keyBytes, messageOf, PURGED_PER_INSERT, ReplayStoreError } from "./store.js"

/**
 * The part of a node-postgres `Pool` the store uses, declared here so the types do not require `pg`. A `pg.Pool`
 * fits.
 *
 * @see {@link https://node-postgres.com/apis/pool | node-postgres Pool}
 */
export interface ReplayPostgresPool {
  query(text: string, values?: Array<unknown>): Promise<{ readonly rowCount: number | null }>
}

/**
 * What both forms of {@link PostgresReplayCacheOptions} share.
 *
 * @see {@link https://www.postgresql.org/docs/current/ddl-schemas.html | PostgreSQL schemas}
 */
export interface PostgresReplayCacheCommonOptions {
  /** The schema of the `dpop_replay` table, created when absent; `public` by default. */
  readonly schema?: string
}

/**
 * Options of {@link postgresReplayCache}: a connection string (the store makes its pool and ends it on `close`) or a
 * pool of yours (left open), and the schema.
 *
 * @see {@link https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING | PostgreSQL connection URIs}
 */
export type PostgresReplayCacheOptions = PostgresReplayCacheCommonOptions &
  (
    | {
        /** `postgres://user:password@host:port/database` */
        readonly connectionString: string
        /** The most connections the pool opens at once; 10 by default. */
        readonly max?: number
      }
    | { readonly pool: ReplayPostgresPool }
  )

/**
 * A {@link ReplayCache} in PostgreSQL; each answer is one round trip.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 */
export interface PostgresReplayCache extends ReplayCache {
  readonly remember: (key: string, expiresAt: number, now: number) => Promise<boolean>
  /** Ends the pool the store made from `connectionString`; a pool passed in is the caller's to end. */
  readonly close: () => Promise<void>
}

const quoteIdentifier = (name: string) => `"${name.replaceAll('"', '""')}"`
const quoteLiteral = (text: string) => `'${text.replaceAll("'", "''")}'`

/**
 * A replay cache in PostgreSQL, for instances on several machines behind one resource (or several resources: `jti`
 * values are random, so they do not collide). Creating it makes the schema, the `dpop_replay` table and its index when
 * absent, under an advisory lock so instances starting together do it once. Each proof is one statement: up to two
 * expired rows deleted (`FOR UPDATE SKIP LOCKED`, so concurrent purges never wait for each other), then `INSERT ... ON
 * CONFLICT DO UPDATE ... WHERE` the held row has expired, which PostgreSQL makes atomic: of concurrent inserts of one
 * `jti`, on any number of machines, exactly one is told it was new. Rejects with {@link ReplayStoreError} when the
 * database cannot be reached or the schema name is not 1 to 63 bytes long.
 *
 * @example
 * ```ts
 * const replayCache = await postgresReplayCache({ connectionString: process.env.DATABASE_URL ?? "" })
 * const scheme = dpopScheme({ replayCache })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 * @see {@link https://www.postgresql.org/docs/current/sql-insert.html#SQL-ON-CONFLICT | PostgreSQL INSERT ON CONFLICT}
 */
export const postgresReplayCache = async (options: PostgresReplayCacheOptions): Promise<PostgresReplayCache> => {
  const schema = options.schema ?? "public"
  const bytes = new TextEncoder().encode(schema).length
  if (bytes < 1 || bytes > 63) {
    // PostgreSQL would silently cut a longer name: another schema than the one asked for.
    throw new ReplayStoreError({ operation: "open", message: "the schema name must be 1 to 63 bytes long" })
  }
  let pool: ReplayPostgresPool
  let end: () => Promise<void>
  try {
    if ("pool" in options) {
      pool = options.pool
      end = () => Promise.resolve()
    } else {
      const { default: pg } = await import("pg")
      const own = new pg.Pool({ connectionString: options.connectionString, max: options.max ?? 10 })
      // An idle connection the server drops emits `error` on the pool; without a listener Node would exit. The next
      // query reconnects, and one that fails rejects with a ReplayStoreError.
      own.on("error", () => undefined)
      pool = own
      end = () => own.end()
    }
  } catch (error) {
    throw new ReplayStoreError({ operation: "open", message: messageOf(error) })
  }
  const table = `${quoteIdentifier(schema)}.dpop_replay`
  try {
    const exists = await pool.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])
    // One simple query is one transaction: the advisory lock is held until the table and index exist.
    await pool.query(
      [
        `SELECT pg_advisory_xact_lock(1263944025, hashtext(${quoteLiteral(`keyway/dpop_replay/${schema}`)}))`,
        // Only when absent: a role without CREATE on the database can use a schema made for it.
        ...(exists.rowCount === 0 ? [`CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(schema)}`] : []),
        `CREATE TABLE IF NOT EXISTS ${table} (key bytea PRIMARY KEY, expires_at bigint NOT NULL)`,
        `CREATE INDEX IF NOT EXISTS dpop_replay_expires_at ON ${table} (expires_at)`,
      ].join(";\n"),
    )
  } catch (error) {
    await end().catch(() => undefined)
    throw new ReplayStoreError({ operation: "open", message: messageOf(error) })
  }
  // The purge leaves the row being inserted alone: one statement may not both delete and update it.
  const statement = `WITH purged AS (
      DELETE FROM ${table} WHERE key IN (
        SELECT key FROM ${table} WHERE expires_at <= $3 AND key <> $1
        ORDER BY expires_at LIMIT ${PURGED_PER_INSERT} FOR UPDATE SKIP LOCKED))
    INSERT INTO ${table} AS held (key, expires_at) VALUES ($1, $2)
    ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE held.expires_at <= $3`
  return {
    remember: async (key, expiresAt, now) => {
      try {
        // Whole seconds: a proof's iat may have a fraction, and the column is an integer.
        const result = await pool.query(statement, [keyBytes(key), Math.ceil(expiresAt), Math.floor(now)])
        return result.rowCount === 1
      } catch (error) {
        throw new ReplayStoreError({ operation: "remember", message: messageOf(error) })
      }
    },
    close: end,
  }
}
