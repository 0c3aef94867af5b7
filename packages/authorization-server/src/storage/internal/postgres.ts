/**
 * The PostgreSQL driver (node-postgres): migrations under an advisory lock, opening a pool, and running a unit of work
 * on one pooled connection in a READ COMMITTED transaction, or statement by statement on the pool.
 */
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { StorageError } from "../Errors.js"
import { type PostgresClient, type PostgresOptions, type PostgresPool, postgresSchemaName } from "../Storage.js"
import { bareTables, type Driver, driveAsync, type Migration, message, type Row, type Statement } from "./sql.js"
import { oneLiveGrantPerAuthorization } from "./store.js"

/** Anything that runs one statement: the pool (autocommit) or a client inside a transaction. */
interface Queryable {
  query(text: string, values?: Array<unknown>): Promise<{ rows: Array<Row>; rowCount: number | null }>
}

/**
 * Schema changes, applied in order, each once. They run with `search_path` set to the configured schema, so they name
 * tables without it. Text columns that are sorted on use the "C" collation so every server orders them the same way
 * (byte order), whatever the database's locale. Never edit a released entry.
 */
export const MIGRATIONS: ReadonlyArray<Migration> = [
  {
    version: 1,
    name: "initial",
    sql: `
      CREATE TABLE clients (
        client_id text COLLATE "C" PRIMARY KEY,
        origin text NOT NULL,
        expires_at bigint,
        client_secret_expires_at bigint NOT NULL,
        client_secret_hash text,
        registration_access_token_hash text,
        metadata jsonb NOT NULL
      );
      CREATE INDEX clients_expires_at ON clients (expires_at) WHERE expires_at IS NOT NULL;

      CREATE TABLE grants (
        grant_id text PRIMARY KEY,
        client_id text NOT NULL,
        subject text NOT NULL,
        resource text NOT NULL,
        scope text NOT NULL,
        auth_time bigint NOT NULL,
        created_at bigint NOT NULL,
        revoked_at bigint
      );

      CREATE TABLE authorization_codes (
        code_hash text PRIMARY KEY,
        grant_id text NOT NULL REFERENCES grants (grant_id),
        client_id text NOT NULL,
        redirect_uri text NOT NULL,
        code_challenge text NOT NULL,
        code_challenge_method text NOT NULL,
        resource text NOT NULL,
        scope text NOT NULL,
        subject text NOT NULL,
        auth_time bigint NOT NULL,
        issued_at bigint NOT NULL,
        expires_at bigint NOT NULL,
        nonce text,
        consumed_at bigint
      );
      CREATE INDEX authorization_codes_grant ON authorization_codes (grant_id);
      CREATE INDEX authorization_codes_expires_at ON authorization_codes (expires_at);

      CREATE TABLE access_tokens (
        jti text PRIMARY KEY,
        grant_id text NOT NULL REFERENCES grants (grant_id),
        expires_at bigint NOT NULL
      );
      CREATE INDEX access_tokens_grant ON access_tokens (grant_id);
      CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

      CREATE TABLE revoked_access_tokens (
        jti text PRIMARY KEY,
        expires_at bigint NOT NULL
      );
      CREATE INDEX revoked_access_tokens_expires_at ON revoked_access_tokens (expires_at);

      CREATE TABLE refresh_families (
        family_id text PRIMARY KEY,
        grant_id text NOT NULL REFERENCES grants (grant_id),
        created_at bigint NOT NULL,
        revoked_at bigint
      );
      CREATE INDEX refresh_families_grant ON refresh_families (grant_id);

      CREATE TABLE refresh_tokens (
        token_hash text PRIMARY KEY,
        family_id text NOT NULL REFERENCES refresh_families (family_id),
        scope text NOT NULL,
        issued_at bigint NOT NULL,
        expires_at bigint,
        rotated_at bigint
      );
      CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
      CREATE INDEX refresh_tokens_expires_at ON refresh_tokens (expires_at) WHERE expires_at IS NOT NULL;

      CREATE TABLE consents (
        subject text NOT NULL,
        client_id text COLLATE "C" NOT NULL,
        resource text COLLATE "C" NOT NULL,
        scopes text[] NOT NULL,
        granted_at bigint NOT NULL,
        PRIMARY KEY (subject, client_id, resource)
      );

      CREATE TABLE assertion_jtis (
        client_id text NOT NULL,
        jti text NOT NULL,
        expires_at bigint NOT NULL,
        PRIMARY KEY (client_id, jti)
      );
      CREATE INDEX assertion_jtis_expires_at ON assertion_jtis (expires_at);

      CREATE TABLE signing_keys (
        kid text COLLATE "C" PRIMARY KEY,
        alg text NOT NULL,
        private_jwk jsonb NOT NULL,
        public_jwk jsonb NOT NULL,
        created_at bigint NOT NULL,
        activates_at bigint NOT NULL,
        retires_at bigint,
        status text NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: "token-lifecycle",
    // redirect_uri_sent: whether the authorization request carried redirect_uri, so the token request must (OAuth 2.1
    // §4.1.3). successor_salt: set when a refresh token is rotated; with the presented token it derives the successor
    // again, so a retry within the reuse interval gets the same one (codes and tokens from before stay as they were).
    sql: `
      ALTER TABLE authorization_codes ADD COLUMN redirect_uri_sent boolean NOT NULL DEFAULT false;
      ALTER TABLE refresh_tokens ADD COLUMN successor_salt text;
    `,
  },
  {
    version: 3,
    name: "rate-limits",
    // One row per abuse-limit bucket (a hashed account name, address, client ID or host): its count, the end of its
    // lock (0 for none), and when it is forgotten (the purge deletes it then). UNLOGGED: a count written on every token
    // request does not wait for a WAL flush; a crash empties the table (and standbys do not have it), which only
    // forgets counts.
    sql: `
      CREATE UNLOGGED TABLE rate_limits (
        bucket text COLLATE "C" PRIMARY KEY,
        hits bigint NOT NULL,
        blocked_until bigint NOT NULL,
        expires_at bigint NOT NULL
      );
      CREATE INDEX rate_limits_expires_at ON rate_limits (expires_at);
    `,
  },
  {
    version: 4,
    name: "token-confirmation",
    // confirmation: what a token request must prove to redeem the code (DPoP's dpop_jkt, RFC 9449 §10) or to use the
    // family's refresh tokens (the key a public client's refresh tokens are bound to, RFC 9449 §5); NULL for none.
    sql: `
      ALTER TABLE authorization_codes ADD COLUMN confirmation text;
      ALTER TABLE refresh_families ADD COLUMN confirmation text;
    `,
  },
  {
    version: 5,
    name: "one-grant-per-authorization",
    // One live grant per subject, client and resource, whose scope grows with each authorization. authorized_at: when
    // the latest authorization merged into a grant was given (its last use when no refresh token came after).
    // refresh_families.auth_time: the authentication a family comes from, kept when later authorizations move the
    // grant's. The live grants sharing those three are then merged into one and the unique index created
    // (oneLiveGrantPerAuthorization, written once for both databases).
    sql: `
      ALTER TABLE grants ADD COLUMN authorized_at bigint;
      UPDATE grants SET authorized_at = created_at;
      ALTER TABLE refresh_families ADD COLUMN auth_time bigint;
      UPDATE refresh_families SET auth_time = (SELECT g.auth_time FROM grants g WHERE g.grant_id = refresh_families.grant_id);
    `,
    work: oneLiveGrantPerAuthorization,
  },
  {
    version: 6,
    name: "issuer",
    // The issuer this database serves, recorded on the first start: its clients, keys and tokens are that issuer's,
    // so a start for another issuer is refused (Config.previousIssuer moves it).
    sql: `
      CREATE TABLE issuer (
        id integer PRIMARY KEY CHECK (id = 1),
        issuer text NOT NULL,
        recorded_at bigint NOT NULL
      );
    `,
  },
  {
    version: 7,
    name: "extension-records",
    // The extensions' short-lived state (a device authorization waiting for its user, RFC 8628 §3.2): one row per
    // namespace and hashed key, its JSON value, a version for compare-and-set, and when it stops existing.
    sql: `
      CREATE TABLE extension_records (
        namespace text COLLATE "C" NOT NULL,
        key_hash text COLLATE "C" NOT NULL,
        value text NOT NULL,
        version bigint NOT NULL,
        expires_at bigint NOT NULL,
        PRIMARY KEY (namespace, key_hash)
      );
      CREATE INDEX extension_records_expires_at ON extension_records (expires_at);
    `,
  },
]

const quote = (identifier: string): string => `"${identifier.replaceAll('"', '""')}"`

/** An open store: the pool, the schema's qualified table names, and how to let go of the pool. */
export interface Database {
  readonly pool: PostgresPool
  readonly t: Tables
  readonly close: () => Promise<void>
}

const tables = (schema: string) => {
  const s = quote(schema)
  return {
    clients: `${s}.clients`,
    grants: `${s}.grants`,
    codes: `${s}.authorization_codes`,
    accessTokens: `${s}.access_tokens`,
    revokedAccessTokens: `${s}.revoked_access_tokens`,
    families: `${s}.refresh_families`,
    refreshTokens: `${s}.refresh_tokens`,
    consents: `${s}.consents`,
    assertionJtis: `${s}.assertion_jtis`,
    keys: `${s}.signing_keys`,
    rateLimits: `${s}.rate_limits`,
    records: `${s}.extension_records`,
    issuer: `${s}.issuer`,
    migrations: `${s}.keyway_migrations`,
  }
}
type Tables = ReturnType<typeof tables>

// SQLSTATEs after which the whole transaction may simply run again: serialization failure and deadlock.
const RETRYABLE = new Set(["40001", "40P01"])
const sqlState = (error: unknown): unknown =>
  typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined

/**
 * Runs `f` in one READ COMMITTED transaction on one pooled connection, committing whatever it did (a typed failure
 * such as a detected replay still commits its revocation) and rolling back only when it throws. Atomicity of the
 * check-then-write operations comes from the row locks `f` takes (`SELECT ... FOR UPDATE`), which make concurrent
 * callers queue on the row and then see the winner's committed write.
 */
const transaction = async <A>(pool: PostgresPool, f: (client: Queryable) => Promise<A>): Promise<A> => {
  for (let attempt = 1; ; attempt++) {
    const client: PostgresClient = await pool.connect()
    let broken: Error | undefined
    try {
      await client.query("BEGIN")
      const result = await f(client)
      await client.query("COMMIT")
      return result
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: unknown) => {
        // A connection that cannot roll back is not handed to the next caller.
        broken = rollbackError instanceof Error ? rollbackError : new Error(message(rollbackError))
      })
      if (attempt < 3 && RETRYABLE.has(String(sqlState(error)))) continue
      throw error
    } finally {
      client.release(broken ?? false)
    }
  }
}

/** Runs statements of a unit of work on the pool (autocommit) or on one client (inside its transaction). */
const executor =
  (q: Queryable) =>
  async (statement: Statement): Promise<unknown> => {
    const result = await q.query(statement.sql, [...statement.params])
    return statement.kind === "rows" ? result.rows : (result.rowCount ?? 0)
  }

/** The two 32-bit keys of the advisory lock that serialises migrations of one schema. */
const migrationLock = (schema: string): readonly [number, number] => [
  0x4b57_4159, // "KWAY"
  createHash("sha256").update(schema, "utf8").digest().readInt32BE(0),
]

const migrate = (pool: PostgresPool, schema: string, t: Tables, now: number): Promise<void> =>
  transaction(pool, async (c) => {
    // Held until this transaction ends: a second process starting at the same moment waits here, then finds every
    // migration applied.
    await c.query("SELECT pg_advisory_xact_lock($1, $2)", [...migrationLock(schema)])
    // Checked first so a role without CREATE on the database can use a schema made for it.
    const exists = await c.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])
    if (exists.rows.length === 0) await c.query(`CREATE SCHEMA ${quote(schema)}`)
    await c.query(
      `CREATE TABLE IF NOT EXISTS ${t.migrations} (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`,
    )
    const row = (await c.query(`SELECT COALESCE(MAX(version), 0) AS v FROM ${t.migrations}`)).rows[0]
    const current = Number(row?.v ?? 0)
    const known = MIGRATIONS.at(-1)?.version ?? 0
    if (current > known) {
      throw new Error(`database schema version ${current} is newer than this Keyway (knows up to ${known})`)
    }
    const pending = MIGRATIONS.filter((m) => m.version > current)
    if (pending.length === 0) return
    await c.query(`SET LOCAL search_path TO ${quote(schema)}`)
    for (const m of pending) {
      await c.query(m.sql)
      // On the schema's search path, as the SQL above.
      if (m.work !== undefined) await driveAsync(m.work(bareTables), executor(c))
      await c.query(`INSERT INTO ${t.migrations} (version, name, applied_at) VALUES ($1, $2, $3)`, [
        m.version,
        m.name,
        now,
      ])
    }
  })

/**
 * Connects (creating a pool from a connection string, or using the caller's) and migrates; `now` (NumericDate seconds,
 * from the caller's clock) stamps the migrations applied. Throws on failure.
 */
export const open = async (options: PostgresOptions, now: number): Promise<Database> => {
  const schema = options.schema ?? "public"
  if (!postgresSchemaName.safeParse(schema).success) {
    throw new Error("schema name must be 1 to 63 bytes long")
  }
  let pool: PostgresPool
  let close: () => Promise<void>
  if ("pool" in options) {
    pool = options.pool
    // The caller's pool is the caller's to end.
    close = () => Promise.resolve()
  } else {
    // Loaded on demand so users of the other backends never need the driver.
    const { default: pg } = await import("pg")
    const own = new pg.Pool({ connectionString: options.connectionString, max: options.max ?? 10 })
    // An idle connection that the server drops emits `error` on the pool; without a listener Node would exit. The
    // next checkout reconnects, and a query that fails surfaces as a StorageError.
    own.on("error", () => undefined)
    pool = own
    close = () => own.end()
  }
  const t = tables(schema)
  try {
    await migrate(pool, schema, t, now)
  } catch (error) {
    await close().catch(() => undefined)
    throw error
  }
  return { pool, t, close }
}

/** A driver over an open database. */
export const driver = ({ pool, t }: Database): Driver => ({
  tables: t,
  lock: (mode, of) => `FOR ${mode === "update" ? "UPDATE" : "SHARE"}${of === undefined ? "" : ` OF ${of}`}`,
  // node-postgres sends a JavaScript array as a PostgreSQL array.
  textArray: (values) => values,
  run: (operation, mode, work) =>
    Effect.tryPromise({
      try: () =>
        mode === "transaction"
          ? transaction(pool, (client) => driveAsync(work(), executor(client)))
          : driveAsync(work(), executor(pool)),
      catch: (error) => new StorageError({ operation, message: message(error) }),
    }),
})
