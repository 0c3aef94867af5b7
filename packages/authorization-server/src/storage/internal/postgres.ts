import { createHash } from "node:crypto"
import { Effect, Option } from "effect"
import {
  ClientAlreadyExists,
  ClientNotFound,
  CodeAlreadyUsed,
  CodeExpired,
  CodeNotFound,
  GrantNotFound,
  GrantRevoked,
  KeyAlreadyExists,
  KeyNotFound,
  NoSigningKey,
  RefreshTokenClientMismatch,
  RefreshTokenExpired,
  RefreshTokenNotFound,
  RefreshTokenReused,
  RefreshTokenRevoked,
  StorageError,
} from "../Errors.js"
import type {
  AuthorizationCode,
  Client,
  ClientMetadata,
  ClientStore,
  Consent,
  GrantStore,
  Jwk,
  KeyStore,
  PostgresClient,
  PostgresOptions,
  PostgresPool,
  RefreshToken,
  RefreshTokenStatus,
  SigningKey,
} from "../Storage.js"
import {
  clientRecord,
  covers,
  defined,
  hashSecret,
  matchesHash,
  normaliseScopes,
  secretLive,
  updatedHash,
} from "./common.js"
import {
  clientParams,
  codeFromRow,
  grantFromRow,
  newHashes,
  num,
  opt,
  optNum,
  optStr,
  type Row,
  refreshFromRow,
  refreshStatus,
  str,
} from "./rows.js"

/** Anything that runs one statement: the pool (autocommit) or a client inside a transaction. */
interface Queryable {
  query(text: string, values?: Array<unknown>): Promise<{ rows: Array<Row>; rowCount: number | null }>
}

/**
 * Schema changes, applied in order, each once. They run with `search_path` set to the configured schema, so they name
 * tables without it. Text columns that are sorted on use the "C" collation so every server orders them the same way
 * (byte order), whatever the database's locale. Never edit a released entry.
 */
export const MIGRATIONS: ReadonlyArray<{ readonly version: number; readonly name: string; readonly sql: string }> = [
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
]

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error))

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

/** The two 32-bit keys of the advisory lock that serialises migrations of one schema. */
const migrationLock = (schema: string): readonly [number, number] => [
  0x4b57_4159, // "KWAY"
  createHash("sha256").update(schema, "utf8").digest().readInt32BE(0),
]

const migrate = (pool: PostgresPool, schema: string, t: Tables): Promise<void> =>
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
      await c.query(`INSERT INTO ${t.migrations} (version, name, applied_at) VALUES ($1, $2, $3)`, [
        m.version,
        m.name,
        Math.floor(Date.now() / 1000),
      ])
    }
  })

/** Connects (creating a pool from a connection string, or using the caller's) and migrates. Throws on failure. */
export const open = async (options: PostgresOptions): Promise<Database> => {
  const schema = options.schema ?? "public"
  if (schema.length === 0 || Buffer.byteLength(schema, "utf8") > 63) {
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
    await migrate(pool, schema, t)
  } catch (error) {
    await close().catch(() => undefined)
    throw error
  }
  return { pool, t, close }
}

/**
 * Runs an asynchronous body that resolves to `Effect.succeed` / `Effect.fail` of plain values once all its database
 * work is done; a rejection (driver, server, constraint) becomes a typed `StorageError` naming the operation.
 */
const attempt =
  (operation: string) =>
  <T extends Effect.Effect<unknown, unknown>>(
    body: () => Promise<T>,
  ): Effect.Effect<Effect.Success<T>, Effect.Error<T> | StorageError> =>
    Effect.flatten(
      Effect.tryPromise({
        try: body,
        catch: (error) => new StorageError({ operation, message: message(error) }),
      }),
    ) as Effect.Effect<Effect.Success<T>, Effect.Error<T> | StorageError>

const count = (r: { rowCount: number | null }): number => r.rowCount ?? 0
const first = (r: { rows: Array<Row> }): Row | undefined => r.rows[0]

// ---------------------------------------------------------------------------------------------------------------------

const clientFromRow = (row: Row): Client =>
  clientRecord(
    row.metadata as ClientMetadata,
    optStr(row, "client_secret_hash"),
    optStr(row, "registration_access_token_hash"),
  )

export const makeClientStore = ({ pool, t }: Database): ClientStore["Service"] => {
  const INSERT = `INSERT INTO ${t.clients} (client_id, origin, expires_at, client_secret_expires_at, client_secret_hash,
    registration_access_token_hash, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7)`
  const select = async (clientId: string) =>
    first(await pool.query(`SELECT * FROM ${t.clients} WHERE client_id = $1`, [clientId]))
  return {
    get: (clientId, now) =>
      attempt("ClientStore.get")(async () => {
        const row = await select(clientId)
        const expiresAt = row === undefined ? undefined : optNum(row, "expires_at")
        if (row === undefined || (expiresAt !== undefined && expiresAt <= now)) {
          return Effect.fail(new ClientNotFound({ client_id: clientId }))
        }
        return Effect.succeed(clientFromRow(row))
      }),
    create: (client) =>
      attempt("ClientStore.create")(async () => {
        const [secret, token] = newHashes(client)
        const r = await pool.query(`${INSERT} ON CONFLICT (client_id) DO NOTHING`, clientParams(client, secret, token))
        if (count(r) === 0) return Effect.fail(new ClientAlreadyExists({ client_id: client.client_id }))
        return Effect.succeed(clientRecord(client, secret, token))
      }),
    update: (client) =>
      attempt("ClientStore.update")(() =>
        transaction(pool, async (c) => {
          const row = first(
            await c.query(
              `SELECT client_secret_hash, registration_access_token_hash FROM ${t.clients} WHERE client_id = $1 FOR UPDATE`,
              [client.client_id],
            ),
          )
          if (row === undefined) return Effect.fail(new ClientNotFound({ client_id: client.client_id }))
          const secret = updatedHash(client.client_secret, optStr(row, "client_secret_hash"))
          const token = updatedHash(client.registration_access_token, optStr(row, "registration_access_token_hash"))
          await c.query(
            `UPDATE ${t.clients} SET origin = $2, expires_at = $3, client_secret_expires_at = $4, client_secret_hash = $5,
             registration_access_token_hash = $6, metadata = $7 WHERE client_id = $1`,
            clientParams(client, secret, token),
          )
          return Effect.succeed(clientRecord(client, secret, token))
        }),
      ),
    upsert: (client) =>
      attempt("ClientStore.upsert")(async () => {
        const [secret, token] = newHashes(client)
        await pool.query(
          `${INSERT} ON CONFLICT (client_id) DO UPDATE SET origin = excluded.origin, expires_at = excluded.expires_at,
           client_secret_expires_at = excluded.client_secret_expires_at, client_secret_hash = excluded.client_secret_hash,
           registration_access_token_hash = excluded.registration_access_token_hash, metadata = excluded.metadata`,
          clientParams(client, secret, token),
        )
        return Effect.succeed(clientRecord(client, secret, token))
      }),
    delete: (clientId) =>
      attempt("ClientStore.delete")(async () =>
        count(await pool.query(`DELETE FROM ${t.clients} WHERE client_id = $1`, [clientId])) === 0
          ? Effect.fail(new ClientNotFound({ client_id: clientId }))
          : Effect.void,
      ),
    list: (options) =>
      attempt("ClientStore.list")(async () => {
        const r =
          options?.origin === undefined
            ? await pool.query(`SELECT * FROM ${t.clients} ORDER BY client_id`)
            : await pool.query(`SELECT * FROM ${t.clients} WHERE origin = $1 ORDER BY client_id`, [options.origin])
        return Effect.succeed(r.rows.map(clientFromRow))
      }),
    verifySecret: (clientId, presented, now) =>
      attempt("ClientStore.verifySecret")(async () => {
        const row = await select(clientId)
        if (row === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        const matches = matchesHash(presented, optStr(row, "client_secret_hash"))
        return Effect.succeed(matches && secretLive(num(row, "client_secret_expires_at"), now))
      }),
    verifyRegistrationAccessToken: (clientId, presented) =>
      attempt("ClientStore.verifyRegistrationAccessToken")(async () => {
        const row = await select(clientId)
        if (row === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        return Effect.succeed(matchesHash(presented, optStr(row, "registration_access_token_hash")))
      }),
    purgeExpired: (now) =>
      attempt("ClientStore.purgeExpired")(async () =>
        Effect.succeed(
          count(await pool.query(`DELETE FROM ${t.clients} WHERE expires_at IS NOT NULL AND expires_at <= $1`, [now])),
        ),
      ),
  }
}

// ---------------------------------------------------------------------------------------------------------------------

const consentFromRow = (row: Row): Consent => ({
  subject: str(row, "subject"),
  client_id: str(row, "client_id"),
  resource: str(row, "resource"),
  // Stored as a set; sorted here so every backend returns the same order.
  scopes: normaliseScopes(row.scopes as ReadonlyArray<string>),
  granted_at: num(row, "granted_at"),
})

export const makeGrantStore = ({ pool, t }: Database): GrantStore["Service"] => {
  // Callers hold the transaction. The grant row is locked first, so revocations of one grant queue behind each other
  // and behind any issuance that holds the grant row (see recordAccessToken, createRefresh).
  const revoke = async (c: Queryable, grantId: string, now: number): Promise<boolean> => {
    const r = await c.query(`UPDATE ${t.grants} SET revoked_at = COALESCE(revoked_at, $2) WHERE grant_id = $1`, [
      grantId,
      now,
    ])
    if (count(r) === 0) return false
    await c.query(`UPDATE ${t.families} SET revoked_at = $2 WHERE grant_id = $1 AND revoked_at IS NULL`, [grantId, now])
    await c.query(
      `INSERT INTO ${t.revokedAccessTokens} (jti, expires_at)
       SELECT jti, expires_at FROM ${t.accessTokens} WHERE grant_id = $1 AND expires_at > $2
       ON CONFLICT (jti) DO NOTHING`,
      [grantId, now],
    )
    return true
  }

  const SELECT_REFRESH = `SELECT r.token_hash, r.family_id, r.scope, r.issued_at, r.expires_at, r.rotated_at,
      f.grant_id, f.revoked_at AS family_revoked_at, g.client_id, g.subject, g.resource
    FROM ${t.refreshTokens} r JOIN ${t.families} f ON f.family_id = r.family_id JOIN ${t.grants} g ON g.grant_id = f.grant_id
    WHERE r.token_hash = $1`

  // Caller holds the transaction. With `lock`, the token row stays locked until the transaction ends: concurrent
  // rotations of one token queue there and each sees the previous one's `rotated_at`. Same order of checks as the
  // memory store. Returns the row or the failure.
  const presentRefresh = async (
    c: Queryable,
    tokenHash: string,
    now: number,
    lock: boolean,
  ): Promise<Row | RefreshTokenNotFound | RefreshTokenRevoked | RefreshTokenReused | RefreshTokenExpired> => {
    const row = first(await c.query(lock ? `${SELECT_REFRESH} FOR UPDATE OF r` : SELECT_REFRESH, [tokenHash]))
    if (row === undefined) return new RefreshTokenNotFound()
    const family_id = str(row, "family_id")
    const grant_id = str(row, "grant_id")
    if (row.rotated_at !== null) {
      await revoke(c, grant_id, now)
      return new RefreshTokenReused({ family_id, grant_id })
    }
    if (row.family_revoked_at !== null) return new RefreshTokenRevoked({ family_id, grant_id })
    const expiresAt = optNum(row, "expires_at")
    if (expiresAt !== undefined && expiresAt <= now) return new RefreshTokenExpired({ family_id })
    return row
  }

  const SELECT_CONSENT = `SELECT * FROM ${t.consents} WHERE subject = $1 AND client_id = $2 AND resource = $3`

  return {
    createCode: (input) =>
      attempt("GrantStore.createCode")(() =>
        transaction(pool, async (c) => {
          const grant_id = crypto.randomUUID()
          await c.query(
            `INSERT INTO ${t.grants} (grant_id, client_id, subject, resource, scope, auth_time, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)`,
            [grant_id, input.client_id, input.subject, input.resource, input.scope, input.auth_time, input.issued_at],
          )
          await c.query(
            `INSERT INTO ${t.codes} (code_hash, grant_id, client_id, redirect_uri, code_challenge,
             code_challenge_method, resource, scope, subject, auth_time, issued_at, expires_at, nonce)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
            [
              hashSecret(input.code),
              grant_id,
              input.client_id,
              input.redirect_uri,
              input.code_challenge,
              input.code_challenge_method,
              input.resource,
              input.scope,
              input.subject,
              input.auth_time,
              input.issued_at,
              input.expires_at,
              opt(input.nonce),
            ],
          )
          const { code, ...rest } = input
          return Effect.succeed(defined<AuthorizationCode>({ ...rest, grant_id }))
        }),
      ),
    consumeCode: (code, now) =>
      attempt("GrantStore.consumeCode")(() =>
        transaction(pool, async (c) => {
          const codeHash = hashSecret(code)
          // The code row stays locked until commit: concurrent redemptions queue here, and each one after the first
          // re-reads the row with the winner's consumed_at set.
          const row = first(
            await c.query(
              `SELECT c.*, g.revoked_at AS grant_revoked_at FROM ${t.codes} c
               JOIN ${t.grants} g ON g.grant_id = c.grant_id WHERE c.code_hash = $1 FOR UPDATE OF c`,
              [codeHash],
            ),
          )
          if (row === undefined) return Effect.fail(new CodeNotFound())
          const grant_id = str(row, "grant_id")
          if (row.consumed_at !== null) {
            await revoke(c, grant_id, now)
            return Effect.fail(new CodeAlreadyUsed({ grant_id }))
          }
          if (num(row, "expires_at") <= now) return Effect.fail(new CodeExpired({ grant_id }))
          if (row.grant_revoked_at !== null) return Effect.fail(new GrantRevoked({ grant_id }))
          await c.query(`UPDATE ${t.codes} SET consumed_at = $1 WHERE code_hash = $2`, [now, codeHash])
          return Effect.succeed(codeFromRow(row))
        }),
      ),
    getGrant: (grantId) =>
      attempt("GrantStore.getGrant")(async () => {
        const row = first(await pool.query(`SELECT * FROM ${t.grants} WHERE grant_id = $1`, [grantId]))
        return row === undefined
          ? Effect.fail(new GrantNotFound({ grant_id: grantId }))
          : Effect.succeed(grantFromRow(row))
      }),
    recordAccessToken: (token) =>
      attempt("GrantStore.recordAccessToken")(() =>
        transaction(pool, async (c) => {
          // FOR SHARE holds off a concurrent revocation until this id is committed, so the revocation sees it.
          const row = first(
            await c.query(`SELECT revoked_at FROM ${t.grants} WHERE grant_id = $1 FOR SHARE`, [token.grant_id]),
          )
          if (row === undefined) return Effect.fail(new GrantNotFound({ grant_id: token.grant_id }))
          if (row.revoked_at !== null) return Effect.fail(new GrantRevoked({ grant_id: token.grant_id }))
          await c.query(`INSERT INTO ${t.accessTokens} (jti, grant_id, expires_at) VALUES ($1, $2, $3)`, [
            token.jti,
            token.grant_id,
            token.expires_at,
          ])
          return Effect.void
        }),
      ),
    revokeAccessToken: (jti, expiresAt) =>
      attempt("GrantStore.revokeAccessToken")(async () => {
        await pool.query(
          `INSERT INTO ${t.revokedAccessTokens} (jti, expires_at) VALUES ($1, $2) ON CONFLICT (jti) DO NOTHING`,
          [jti, expiresAt],
        )
        return Effect.void
      }),
    isAccessTokenRevoked: (jti) =>
      attempt("GrantStore.isAccessTokenRevoked")(async () => {
        const row = first(
          await pool.query(
            `SELECT EXISTS (SELECT 1 FROM ${t.revokedAccessTokens} WHERE jti = $1)
               OR EXISTS (SELECT 1 FROM ${t.accessTokens} a JOIN ${t.grants} g ON g.grant_id = a.grant_id
                          WHERE a.jti = $1 AND g.revoked_at IS NOT NULL) AS revoked`,
            [jti],
          ),
        )
        return Effect.succeed(row?.revoked === true)
      }),
    createRefresh: (input) =>
      attempt("GrantStore.createRefresh")(() =>
        transaction(pool, async (c) => {
          const grant = first(
            await c.query(`SELECT * FROM ${t.grants} WHERE grant_id = $1 FOR SHARE`, [input.grant_id]),
          )
          if (grant === undefined) return Effect.fail(new GrantNotFound({ grant_id: input.grant_id }))
          if (grant.revoked_at !== null) return Effect.fail(new GrantRevoked({ grant_id: input.grant_id }))
          const family_id = crypto.randomUUID()
          await c.query(`INSERT INTO ${t.families} (family_id, grant_id, created_at) VALUES ($1, $2, $3)`, [
            family_id,
            input.grant_id,
            input.issued_at,
          ])
          await c.query(
            `INSERT INTO ${t.refreshTokens} (token_hash, family_id, scope, issued_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
            [hashSecret(input.token), family_id, input.scope, input.issued_at, opt(input.expires_at)],
          )
          return Effect.succeed(
            defined<RefreshToken>({
              family_id,
              grant_id: input.grant_id,
              client_id: str(grant, "client_id"),
              subject: str(grant, "subject"),
              resource: str(grant, "resource"),
              scope: input.scope,
              issued_at: input.issued_at,
              expires_at: input.expires_at,
            }),
          )
        }),
      ),
    getRefresh: (token, now) =>
      attempt("GrantStore.getRefresh")(() =>
        transaction(pool, async (c) => {
          const presented = await presentRefresh(c, hashSecret(token), now, false)
          return presented instanceof Error ? Effect.fail(presented) : Effect.succeed(refreshFromRow(presented))
        }),
      ),
    findRefresh: (token, now) =>
      attempt("GrantStore.findRefresh")(async () => {
        const row = first(await pool.query(SELECT_REFRESH, [hashSecret(token)]))
        return Effect.succeed(
          row === undefined ? Option.none<RefreshTokenStatus>() : Option.some(refreshStatus(row, now)),
        )
      }),
    rotate: (rotation) =>
      attempt("GrantStore.rotate")(() =>
        transaction(pool, async (c) => {
          const tokenHash = hashSecret(rotation.token)
          const row = await presentRefresh(c, tokenHash, rotation.now, true)
          if (row instanceof Error) return Effect.fail(row)
          if (str(row, "client_id") !== rotation.client_id) {
            return Effect.fail(
              new RefreshTokenClientMismatch({ family_id: str(row, "family_id"), client_id: rotation.client_id }),
            )
          }
          await c.query(`UPDATE ${t.refreshTokens} SET rotated_at = $1 WHERE token_hash = $2`, [
            rotation.now,
            tokenHash,
          ])
          await c.query(
            `INSERT INTO ${t.refreshTokens} (token_hash, family_id, scope, issued_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
            [
              hashSecret(rotation.new_token),
              str(row, "family_id"),
              rotation.scope,
              rotation.now,
              opt(rotation.expires_at),
            ],
          )
          return Effect.succeed(
            defined<RefreshToken>({
              family_id: str(row, "family_id"),
              grant_id: str(row, "grant_id"),
              client_id: str(row, "client_id"),
              subject: str(row, "subject"),
              resource: str(row, "resource"),
              scope: rotation.scope,
              issued_at: rotation.now,
              expires_at: rotation.expires_at,
            }),
          )
        }),
      ),
    revokeFamily: (familyId, now) =>
      attempt("GrantStore.revokeFamily")(async () =>
        Effect.succeed(
          count(
            await pool.query(`UPDATE ${t.families} SET revoked_at = COALESCE(revoked_at, $1) WHERE family_id = $2`, [
              now,
              familyId,
            ]),
          ) > 0,
        ),
      ),
    revokeByRefreshToken: (token, now) =>
      attempt("GrantStore.revokeByRefreshToken")(() =>
        transaction(pool, async (c) => {
          const row = first(
            await c.query(
              `SELECT f.grant_id FROM ${t.refreshTokens} r JOIN ${t.families} f ON f.family_id = r.family_id
               WHERE r.token_hash = $1`,
              [hashSecret(token)],
            ),
          )
          if (row === undefined) return Effect.succeed(Option.none<string>())
          const grantId = str(row, "grant_id")
          await revoke(c, grantId, now)
          return Effect.succeed(Option.some(grantId))
        }),
      ),
    revokeGrant: (grantId, now) =>
      attempt("GrantStore.revokeGrant")(() =>
        transaction(pool, async (c) =>
          (await revoke(c, grantId, now)) ? Effect.void : Effect.fail(new GrantNotFound({ grant_id: grantId })),
        ),
      ),
    grantConsent: (consent) =>
      attempt("GrantStore.grantConsent")(async () => {
        // One statement: concurrent grants for the same subject, client and resource merge instead of overwriting.
        const row = first(
          await pool.query(
            `INSERT INTO ${t.consents} AS c (subject, client_id, resource, scopes, granted_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (subject, client_id, resource) DO UPDATE SET
               scopes = ARRAY(SELECT DISTINCT s FROM unnest(c.scopes || excluded.scopes) AS s),
               granted_at = GREATEST(c.granted_at, excluded.granted_at)
             RETURNING *`,
            [
              consent.subject,
              consent.client_id,
              consent.resource,
              [...normaliseScopes(consent.scopes)],
              consent.granted_at,
            ],
          ),
        )
        if (row === undefined) throw new Error("consent upsert returned no row")
        return Effect.succeed(consentFromRow(row))
      }),
    getConsent: (subject, clientId, resource) =>
      attempt("GrantStore.getConsent")(async () => {
        const row = first(await pool.query(SELECT_CONSENT, [subject, clientId, resource]))
        return Effect.succeed(row === undefined ? Option.none<Consent>() : Option.some(consentFromRow(row)))
      }),
    consentCovers: (subject, clientId, resource, scopes) =>
      attempt("GrantStore.consentCovers")(async () => {
        const row = first(await pool.query(SELECT_CONSENT, [subject, clientId, resource]))
        return Effect.succeed(covers(row === undefined ? undefined : consentFromRow(row), scopes))
      }),
    revokeConsent: (subject, clientId, resource) =>
      attempt("GrantStore.revokeConsent")(async () =>
        Effect.succeed(
          count(
            resource === undefined
              ? await pool.query(`DELETE FROM ${t.consents} WHERE subject = $1 AND client_id = $2`, [subject, clientId])
              : await pool.query(`DELETE FROM ${t.consents} WHERE subject = $1 AND client_id = $2 AND resource = $3`, [
                  subject,
                  clientId,
                  resource,
                ]),
          ),
        ),
      ),
    listConsents: (subject) =>
      attempt("GrantStore.listConsents")(async () =>
        Effect.succeed(
          (
            await pool.query(`SELECT * FROM ${t.consents} WHERE subject = $1 ORDER BY client_id, resource`, [subject])
          ).rows.map(consentFromRow),
        ),
      ),
    rememberJti: (clientId, jti, expiresAt) =>
      attempt("GrantStore.rememberJti")(async () =>
        Effect.succeed(
          count(
            await pool.query(
              `INSERT INTO ${t.assertionJtis} (client_id, jti, expires_at) VALUES ($1, $2, $3)
               ON CONFLICT (client_id, jti) DO NOTHING`,
              [clientId, jti, expiresAt],
            ),
          ) === 1,
        ),
      ),
    purgeExpired: (now) =>
      attempt("GrantStore.purgeExpired")(() =>
        transaction(pool, async (c) => {
          const run = async (sql: string, params: Array<unknown> = []) => count(await c.query(sql, params))
          const removed =
            (await run(`DELETE FROM ${t.codes} WHERE expires_at <= $1`, [now])) +
            (await run(`DELETE FROM ${t.accessTokens} WHERE expires_at <= $1`, [now])) +
            (await run(`DELETE FROM ${t.revokedAccessTokens} WHERE expires_at <= $1`, [now])) +
            (await run(`DELETE FROM ${t.assertionJtis} WHERE expires_at <= $1`, [now])) +
            (await run(
              `DELETE FROM ${t.refreshTokens} WHERE (expires_at IS NOT NULL AND expires_at <= $1)
               OR family_id IN (SELECT family_id FROM ${t.families} WHERE revoked_at IS NOT NULL)`,
              [now],
            )) +
            (await run(
              `DELETE FROM ${t.families} f WHERE f.revoked_at IS NOT NULL
               OR NOT EXISTS (SELECT 1 FROM ${t.refreshTokens} r WHERE r.family_id = f.family_id)`,
            )) +
            (await run(
              `DELETE FROM ${t.grants} g WHERE
                 NOT EXISTS (SELECT 1 FROM ${t.codes} c WHERE c.grant_id = g.grant_id)
                 AND NOT EXISTS (SELECT 1 FROM ${t.accessTokens} a WHERE a.grant_id = g.grant_id)
                 AND NOT EXISTS (SELECT 1 FROM ${t.families} f WHERE f.grant_id = g.grant_id)`,
            ))
          return Effect.succeed(removed)
        }),
      ),
  }
}

// ---------------------------------------------------------------------------------------------------------------------

const keyFromRow = (row: Row): SigningKey =>
  defined<SigningKey>({
    kid: str(row, "kid"),
    alg: str(row, "alg"),
    private_jwk: row.private_jwk as Jwk,
    public_jwk: row.public_jwk as Jwk,
    created_at: num(row, "created_at"),
    activates_at: num(row, "activates_at"),
    retires_at: optNum(row, "retires_at"),
    status: str(row, "status") as SigningKey["status"],
  })

export const makeKeyStore = ({ pool, t }: Database): KeyStore["Service"] => {
  const ORDER = "ORDER BY created_at, kid"
  return {
    add: (key) =>
      attempt("KeyStore.add")(async () => {
        const r = await pool.query(
          `INSERT INTO ${t.keys} (kid, alg, private_jwk, public_jwk, created_at, activates_at, retires_at, status)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (kid) DO NOTHING`,
          [
            key.kid,
            key.alg,
            JSON.stringify(key.private_jwk),
            JSON.stringify(key.public_jwk),
            key.created_at,
            key.activates_at,
            opt(key.retires_at),
            key.status,
          ],
        )
        if (count(r) === 0) return Effect.fail(new KeyAlreadyExists({ kid: key.kid }))
        return Effect.succeed(structuredClone(defined(key)))
      }),
    get: (kid) =>
      attempt("KeyStore.get")(async () => {
        const row = first(await pool.query(`SELECT * FROM ${t.keys} WHERE kid = $1`, [kid]))
        return row === undefined ? Effect.fail(new KeyNotFound({ kid })) : Effect.succeed(keyFromRow(row))
      }),
    list: () =>
      attempt("KeyStore.list")(async () =>
        Effect.succeed((await pool.query(`SELECT * FROM ${t.keys} ${ORDER}`)).rows.map(keyFromRow)),
      ),
    published: (now) =>
      attempt("KeyStore.published")(async () =>
        Effect.succeed(
          (
            await pool.query(`SELECT * FROM ${t.keys} WHERE retires_at IS NULL OR retires_at > $1 ${ORDER}`, [now])
          ).rows.map(keyFromRow),
        ),
      ),
    current: (now) =>
      attempt("KeyStore.current")(async () => {
        const row = first(
          await pool.query(
            `SELECT * FROM ${t.keys} WHERE status = 'active' AND activates_at <= $1 AND (retires_at IS NULL OR retires_at > $1)
             ORDER BY activates_at DESC, created_at DESC, kid DESC LIMIT 1`,
            [now],
          ),
        )
        return row === undefined ? Effect.fail(new NoSigningKey()) : Effect.succeed(keyFromRow(row))
      }),
    retire: (kid, retiresAt) =>
      attempt("KeyStore.retire")(async () => {
        const row = first(
          await pool.query(`UPDATE ${t.keys} SET status = 'retired', retires_at = $1 WHERE kid = $2 RETURNING *`, [
            retiresAt,
            kid,
          ]),
        )
        return row === undefined ? Effect.fail(new KeyNotFound({ kid })) : Effect.succeed(keyFromRow(row))
      }),
    purgeExpired: (now) =>
      attempt("KeyStore.purgeExpired")(async () =>
        Effect.succeed(
          count(await pool.query(`DELETE FROM ${t.keys} WHERE retires_at IS NOT NULL AND retires_at <= $1`, [now])),
        ),
      ),
  }
}
