import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite"
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
  RefreshToken,
  RefreshTokenStatus,
  SigningKey,
  SqliteOptions,
} from "../Storage.js"
import {
  atomically,
  clientRecord,
  covers,
  defined,
  hashSecret,
  matchesHash,
  mergeConsent,
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

/** Schema changes, applied in order, each once, each in its own transaction. Never edit a released entry. */
export const MIGRATIONS: ReadonlyArray<{ readonly version: number; readonly name: string; readonly sql: string }> = [
  {
    version: 1,
    name: "initial",
    sql: `
      CREATE TABLE clients (
        client_id TEXT PRIMARY KEY,
        origin TEXT NOT NULL,
        expires_at INTEGER,
        client_secret_expires_at INTEGER NOT NULL,
        client_secret_hash TEXT,
        registration_access_token_hash TEXT,
        metadata TEXT NOT NULL
      ) STRICT;
      CREATE INDEX clients_expires_at ON clients (expires_at) WHERE expires_at IS NOT NULL;

      CREATE TABLE grants (
        grant_id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;

      CREATE TABLE authorization_codes (
        code_hash TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        client_id TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        code_challenge_method TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        subject TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        nonce TEXT,
        consumed_at INTEGER
      ) STRICT;
      CREATE INDEX authorization_codes_grant ON authorization_codes (grant_id);
      CREATE INDEX authorization_codes_expires_at ON authorization_codes (expires_at);

      CREATE TABLE access_tokens (
        jti TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX access_tokens_grant ON access_tokens (grant_id);
      CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

      CREATE TABLE revoked_access_tokens (
        jti TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX revoked_access_tokens_expires_at ON revoked_access_tokens (expires_at);

      CREATE TABLE refresh_families (
        family_id TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;
      CREATE INDEX refresh_families_grant ON refresh_families (grant_id);

      CREATE TABLE refresh_tokens (
        token_hash TEXT PRIMARY KEY,
        family_id TEXT NOT NULL REFERENCES refresh_families (family_id),
        scope TEXT NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER,
        rotated_at INTEGER
      ) STRICT;
      CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

      CREATE TABLE consents (
        subject TEXT NOT NULL,
        client_id TEXT NOT NULL,
        resource TEXT NOT NULL,
        scopes TEXT NOT NULL,
        granted_at INTEGER NOT NULL,
        PRIMARY KEY (subject, client_id, resource)
      ) STRICT;

      CREATE TABLE assertion_jtis (
        client_id TEXT NOT NULL,
        jti TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (client_id, jti)
      ) STRICT;
      CREATE INDEX assertion_jtis_expires_at ON assertion_jtis (expires_at);

      CREATE TABLE signing_keys (
        kid TEXT PRIMARY KEY,
        alg TEXT NOT NULL,
        private_jwk TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        activates_at INTEGER NOT NULL,
        retires_at INTEGER,
        status TEXT NOT NULL
      ) STRICT;
    `,
  },
]

/** Runs `f` in one `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so no upgrade deadlock. */
const transaction = <A>(db: DatabaseSync, f: () => A): A => {
  db.exec("BEGIN IMMEDIATE")
  try {
    const result = f()
    db.exec("COMMIT")
    return result
  } catch (error) {
    if (db.isTransaction) db.exec("ROLLBACK")
    throw error
  }
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** Opens (creating if needed) and migrates a database. Throws on failure. */
export const open = (options: SqliteOptions): DatabaseSync => {
  const timeout = options.busyTimeoutMs ?? 5000
  const db = new DatabaseSync(options.path, { timeout, enableForeignKeyConstraints: true })
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.trunc(timeout))}`)
    db.exec("PRAGMA journal_mode = WAL")
    // FULL, not NORMAL: a consumed code or rotated token must stay consumed after a power loss.
    db.exec("PRAGMA synchronous = FULL")
    db.exec("PRAGMA foreign_keys = ON")
    migrate(db)
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

const migrate = (db: DatabaseSync) => {
  db.exec(
    "CREATE TABLE IF NOT EXISTS keyway_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
  )
  const known = MIGRATIONS.at(-1)?.version ?? 0
  for (const m of MIGRATIONS) {
    // Checked inside the transaction, so two processes opening a new file at once apply each migration once.
    transaction(db, () => {
      const row = db.prepare("SELECT MAX(version) AS v FROM keyway_migrations").get()
      const current = Number(row?.v ?? 0)
      if (current > known) {
        throw new Error(`database schema version ${current} is newer than this Keyway (knows up to ${known})`)
      }
      if (current >= m.version) return
      db.exec(m.sql)
      db.prepare("INSERT INTO keyway_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(
        m.version,
        m.name,
        Math.floor(Date.now() / 1000),
      )
    })
  }
}

const statements = (db: DatabaseSync) => {
  const cache = new Map<string, StatementSync>()
  return (sql: string): StatementSync => {
    let s = cache.get(sql)
    if (s === undefined) {
      s = db.prepare(sql)
      cache.set(sql, s)
    }
    return s
  }
}

/**
 * Wraps a synchronous body so a thrown backend error becomes a typed `StorageError`. The body does all its database
 * work before returning and returns only `Effect.succeed` / `Effect.fail` of plain values, so nothing runs after the
 * transaction has committed.
 */
const attempt =
  (operation: string) =>
  <T extends Effect.Effect<unknown, unknown>>(
    body: () => T,
  ): Effect.Effect<Effect.Success<T>, Effect.Error<T> | StorageError> =>
    atomically(() => {
      try {
        return body()
      } catch (error) {
        return Effect.fail(new StorageError({ operation, message: message(error) }))
      }
    })

const changes = (r: { changes: number | bigint }): number => Number(r.changes)

// ---------------------------------------------------------------------------------------------------------------------

const clientFromRow = (row: Row): Client =>
  clientRecord(
    JSON.parse(str(row, "metadata")) as ClientMetadata,
    optStr(row, "client_secret_hash"),
    optStr(row, "registration_access_token_hash"),
  )

export const makeClientStore = (db: DatabaseSync): ClientStore["Service"] => {
  const q = statements(db)
  const INSERT =
    "INSERT INTO clients (client_id, origin, expires_at, client_secret_expires_at, client_secret_hash, registration_access_token_hash, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
  const select = (clientId: string) => q("SELECT * FROM clients WHERE client_id = ?").get(clientId)
  return {
    get: (clientId, now) =>
      attempt("ClientStore.get")(() => {
        const row = select(clientId)
        const expiresAt = row === undefined ? undefined : optNum(row, "expires_at")
        if (row === undefined || (expiresAt !== undefined && expiresAt <= now)) {
          return Effect.fail(new ClientNotFound({ client_id: clientId }))
        }
        return Effect.succeed(clientFromRow(row))
      }),
    create: (client) =>
      attempt("ClientStore.create")(() => {
        const [secret, token] = newHashes(client)
        const r = q(`${INSERT} ON CONFLICT (client_id) DO NOTHING`).run(...clientParams(client, secret, token))
        if (changes(r) === 0) return Effect.fail(new ClientAlreadyExists({ client_id: client.client_id }))
        return Effect.succeed(clientRecord(client, secret, token))
      }),
    update: (client) =>
      attempt("ClientStore.update")(() =>
        transaction(db, () => {
          const row = select(client.client_id)
          if (row === undefined) return Effect.fail(new ClientNotFound({ client_id: client.client_id }))
          const secret = updatedHash(client.client_secret, optStr(row, "client_secret_hash"))
          const token = updatedHash(client.registration_access_token, optStr(row, "registration_access_token_hash"))
          q("DELETE FROM clients WHERE client_id = ?").run(client.client_id)
          q(INSERT).run(...clientParams(client, secret, token))
          return Effect.succeed(clientRecord(client, secret, token))
        }),
      ),
    upsert: (client) =>
      attempt("ClientStore.upsert")(() => {
        const [secret, token] = newHashes(client)
        q(
          `${INSERT} ON CONFLICT (client_id) DO UPDATE SET origin = excluded.origin, expires_at = excluded.expires_at,
           client_secret_expires_at = excluded.client_secret_expires_at, client_secret_hash = excluded.client_secret_hash,
           registration_access_token_hash = excluded.registration_access_token_hash, metadata = excluded.metadata`,
        ).run(...clientParams(client, secret, token))
        return Effect.succeed(clientRecord(client, secret, token))
      }),
    delete: (clientId) =>
      attempt("ClientStore.delete")(() =>
        changes(q("DELETE FROM clients WHERE client_id = ?").run(clientId)) === 0
          ? Effect.fail(new ClientNotFound({ client_id: clientId }))
          : Effect.void,
      ),
    list: (options) =>
      attempt("ClientStore.list")(() => {
        const rows =
          options?.origin === undefined
            ? q("SELECT * FROM clients ORDER BY client_id").all()
            : q("SELECT * FROM clients WHERE origin = ? ORDER BY client_id").all(options.origin)
        return Effect.succeed(rows.map(clientFromRow))
      }),
    verifySecret: (clientId, presented, now) =>
      attempt("ClientStore.verifySecret")(() => {
        const row = select(clientId)
        if (row === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        const matches = matchesHash(presented, optStr(row, "client_secret_hash"))
        return Effect.succeed(matches && secretLive(num(row, "client_secret_expires_at"), now))
      }),
    verifyRegistrationAccessToken: (clientId, presented) =>
      attempt("ClientStore.verifyRegistrationAccessToken")(() => {
        const row = select(clientId)
        if (row === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        return Effect.succeed(matchesHash(presented, optStr(row, "registration_access_token_hash")))
      }),
    purgeExpired: (now) =>
      attempt("ClientStore.purgeExpired")(() =>
        Effect.succeed(changes(q("DELETE FROM clients WHERE expires_at IS NOT NULL AND expires_at <= ?").run(now))),
      ),
  }
}

// ---------------------------------------------------------------------------------------------------------------------

const consentFromRow = (row: Row): Consent => ({
  subject: str(row, "subject"),
  client_id: str(row, "client_id"),
  resource: str(row, "resource"),
  scopes: JSON.parse(str(row, "scopes")) as ReadonlyArray<string>,
  granted_at: num(row, "granted_at"),
})

export const makeGrantStore = (db: DatabaseSync): GrantStore["Service"] => {
  const q = statements(db)

  // Callers hold the transaction.
  const revoke = (grantId: string, now: number): boolean => {
    if (q("SELECT 1 FROM grants WHERE grant_id = ?").get(grantId) === undefined) return false
    q("UPDATE grants SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL").run(now, grantId)
    q("UPDATE refresh_families SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL").run(now, grantId)
    q(
      `INSERT INTO revoked_access_tokens (jti, expires_at)
       SELECT jti, expires_at FROM access_tokens WHERE grant_id = ? AND expires_at > ?
       ON CONFLICT (jti) DO NOTHING`,
    ).run(grantId, now)
    return true
  }

  const SELECT_REFRESH = `SELECT r.token_hash, r.family_id, r.scope, r.issued_at, r.expires_at, r.rotated_at,
      f.grant_id, f.revoked_at AS family_revoked_at, g.client_id, g.subject, g.resource
    FROM refresh_tokens r JOIN refresh_families f ON f.family_id = r.family_id JOIN grants g ON g.grant_id = f.grant_id
    WHERE r.token_hash = ?`

  // Caller holds the transaction. Same order of checks as the memory store. Returns the row or the failure.
  const presentRefresh = (
    tokenHash: string,
    now: number,
  ): Row | RefreshTokenNotFound | RefreshTokenRevoked | RefreshTokenReused | RefreshTokenExpired => {
    const row = q(SELECT_REFRESH).get(tokenHash)
    if (row === undefined) return new RefreshTokenNotFound()
    const family_id = str(row, "family_id")
    const grant_id = str(row, "grant_id")
    if (row.rotated_at !== null) {
      revoke(grant_id, now)
      return new RefreshTokenReused({ family_id, grant_id })
    }
    if (row.family_revoked_at !== null) return new RefreshTokenRevoked({ family_id, grant_id })
    const expiresAt = optNum(row, "expires_at")
    if (expiresAt !== undefined && expiresAt <= now) return new RefreshTokenExpired({ family_id })
    return row
  }

  return {
    createCode: (input) =>
      attempt("GrantStore.createCode")(() =>
        transaction(db, () => {
          const grant_id = crypto.randomUUID()
          q(
            "INSERT INTO grants (grant_id, client_id, subject, resource, scope, auth_time, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
          ).run(grant_id, input.client_id, input.subject, input.resource, input.scope, input.auth_time, input.issued_at)
          q(
            `INSERT INTO authorization_codes (code_hash, grant_id, client_id, redirect_uri, code_challenge,
             code_challenge_method, resource, scope, subject, auth_time, issued_at, expires_at, nonce)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          ).run(
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
          )
          const { code, ...rest } = input
          return Effect.succeed(defined<AuthorizationCode>({ ...rest, grant_id }))
        }),
      ),
    consumeCode: (code, now) =>
      attempt("GrantStore.consumeCode")(() =>
        transaction(db, () => {
          const codeHash = hashSecret(code)
          const row = q(
            `SELECT c.*, g.revoked_at AS grant_revoked_at FROM authorization_codes c
             JOIN grants g ON g.grant_id = c.grant_id WHERE c.code_hash = ?`,
          ).get(codeHash)
          if (row === undefined) return Effect.fail(new CodeNotFound())
          const grant_id = str(row, "grant_id")
          if (row.consumed_at !== null) {
            revoke(grant_id, now)
            return Effect.fail(new CodeAlreadyUsed({ grant_id }))
          }
          if (num(row, "expires_at") <= now) return Effect.fail(new CodeExpired({ grant_id }))
          if (row.grant_revoked_at !== null) return Effect.fail(new GrantRevoked({ grant_id }))
          q("UPDATE authorization_codes SET consumed_at = ? WHERE code_hash = ?").run(now, codeHash)
          return Effect.succeed(codeFromRow(row))
        }),
      ),
    getGrant: (grantId) =>
      attempt("GrantStore.getGrant")(() => {
        const row = q("SELECT * FROM grants WHERE grant_id = ?").get(grantId)
        return row === undefined
          ? Effect.fail(new GrantNotFound({ grant_id: grantId }))
          : Effect.succeed(grantFromRow(row))
      }),
    recordAccessToken: (token) =>
      attempt("GrantStore.recordAccessToken")(() =>
        transaction(db, () => {
          const row = q("SELECT revoked_at FROM grants WHERE grant_id = ?").get(token.grant_id)
          if (row === undefined) return Effect.fail(new GrantNotFound({ grant_id: token.grant_id }))
          if (row.revoked_at !== null) return Effect.fail(new GrantRevoked({ grant_id: token.grant_id }))
          q("INSERT INTO access_tokens (jti, grant_id, expires_at) VALUES (?, ?, ?)").run(
            token.jti,
            token.grant_id,
            token.expires_at,
          )
          return Effect.void
        }),
      ),
    revokeAccessToken: (jti, expiresAt) =>
      attempt("GrantStore.revokeAccessToken")(() => {
        q("INSERT INTO revoked_access_tokens (jti, expires_at) VALUES (?, ?) ON CONFLICT (jti) DO NOTHING").run(
          jti,
          expiresAt,
        )
        return Effect.void
      }),
    isAccessTokenRevoked: (jti) =>
      attempt("GrantStore.isAccessTokenRevoked")(() => {
        const row = q(
          `SELECT EXISTS (SELECT 1 FROM revoked_access_tokens WHERE jti = ?1)
             OR EXISTS (SELECT 1 FROM access_tokens a JOIN grants g ON g.grant_id = a.grant_id
                        WHERE a.jti = ?1 AND g.revoked_at IS NOT NULL) AS revoked`,
        ).get(jti)
        return Effect.succeed(row !== undefined && num(row, "revoked") === 1)
      }),
    createRefresh: (input) =>
      attempt("GrantStore.createRefresh")(() =>
        transaction(db, () => {
          const grant = q("SELECT * FROM grants WHERE grant_id = ?").get(input.grant_id)
          if (grant === undefined) return Effect.fail(new GrantNotFound({ grant_id: input.grant_id }))
          if (grant.revoked_at !== null) return Effect.fail(new GrantRevoked({ grant_id: input.grant_id }))
          const family_id = crypto.randomUUID()
          q("INSERT INTO refresh_families (family_id, grant_id, created_at) VALUES (?, ?, ?)").run(
            family_id,
            input.grant_id,
            input.issued_at,
          )
          q(
            "INSERT INTO refresh_tokens (token_hash, family_id, scope, issued_at, expires_at) VALUES (?, ?, ?, ?, ?)",
          ).run(hashSecret(input.token), family_id, input.scope, input.issued_at, opt(input.expires_at))
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
        transaction(db, () => {
          const presented = presentRefresh(hashSecret(token), now)
          return presented instanceof Error ? Effect.fail(presented) : Effect.succeed(refreshFromRow(presented))
        }),
      ),
    findRefresh: (token, now) =>
      attempt("GrantStore.findRefresh")(() => {
        const row = q(SELECT_REFRESH).get(hashSecret(token))
        return Effect.succeed(
          row === undefined ? Option.none<RefreshTokenStatus>() : Option.some(refreshStatus(row, now)),
        )
      }),
    rotate: (rotation) =>
      attempt("GrantStore.rotate")(() =>
        transaction(db, () => {
          const tokenHash = hashSecret(rotation.token)
          const row = presentRefresh(tokenHash, rotation.now)
          if (row instanceof Error) return Effect.fail(row)
          if (str(row, "client_id") !== rotation.client_id) {
            return Effect.fail(
              new RefreshTokenClientMismatch({ family_id: str(row, "family_id"), client_id: rotation.client_id }),
            )
          }
          q("UPDATE refresh_tokens SET rotated_at = ? WHERE token_hash = ?").run(rotation.now, tokenHash)
          q(
            "INSERT INTO refresh_tokens (token_hash, family_id, scope, issued_at, expires_at) VALUES (?, ?, ?, ?, ?)",
          ).run(
            hashSecret(rotation.new_token),
            str(row, "family_id"),
            rotation.scope,
            rotation.now,
            opt(rotation.expires_at),
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
      attempt("GrantStore.revokeFamily")(() =>
        Effect.succeed(
          changes(
            q("UPDATE refresh_families SET revoked_at = COALESCE(revoked_at, ?) WHERE family_id = ?").run(
              now,
              familyId,
            ),
          ) > 0,
        ),
      ),
    revokeByRefreshToken: (token, now) =>
      attempt("GrantStore.revokeByRefreshToken")(() =>
        transaction(db, () => {
          const row = q(
            `SELECT f.grant_id FROM refresh_tokens r JOIN refresh_families f ON f.family_id = r.family_id
             WHERE r.token_hash = ?`,
          ).get(hashSecret(token))
          if (row === undefined) return Effect.succeed(Option.none<string>())
          const grantId = str(row, "grant_id")
          revoke(grantId, now)
          return Effect.succeed(Option.some(grantId))
        }),
      ),
    revokeGrant: (grantId, now) =>
      attempt("GrantStore.revokeGrant")(() =>
        transaction(db, () =>
          revoke(grantId, now) ? Effect.void : Effect.fail(new GrantNotFound({ grant_id: grantId })),
        ),
      ),
    grantConsent: (consent) =>
      attempt("GrantStore.grantConsent")(() =>
        transaction(db, () => {
          const row = q("SELECT * FROM consents WHERE subject = ? AND client_id = ? AND resource = ?").get(
            consent.subject,
            consent.client_id,
            consent.resource,
          )
          const merged = mergeConsent(row === undefined ? undefined : consentFromRow(row), consent)
          q(
            `INSERT INTO consents (subject, client_id, resource, scopes, granted_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (subject, client_id, resource) DO UPDATE SET scopes = excluded.scopes, granted_at = excluded.granted_at`,
          ).run(merged.subject, merged.client_id, merged.resource, JSON.stringify(merged.scopes), merged.granted_at)
          return Effect.succeed(merged)
        }),
      ),
    getConsent: (subject, clientId, resource) =>
      attempt("GrantStore.getConsent")(() => {
        const row = q("SELECT * FROM consents WHERE subject = ? AND client_id = ? AND resource = ?").get(
          subject,
          clientId,
          resource,
        )
        return Effect.succeed(row === undefined ? Option.none<Consent>() : Option.some(consentFromRow(row)))
      }),
    consentCovers: (subject, clientId, resource, scopes) =>
      attempt("GrantStore.consentCovers")(() => {
        const row = q("SELECT * FROM consents WHERE subject = ? AND client_id = ? AND resource = ?").get(
          subject,
          clientId,
          resource,
        )
        return Effect.succeed(covers(row === undefined ? undefined : consentFromRow(row), scopes))
      }),
    revokeConsent: (subject, clientId, resource) =>
      attempt("GrantStore.revokeConsent")(() =>
        Effect.succeed(
          changes(
            resource === undefined
              ? q("DELETE FROM consents WHERE subject = ? AND client_id = ?").run(subject, clientId)
              : q("DELETE FROM consents WHERE subject = ? AND client_id = ? AND resource = ?").run(
                  subject,
                  clientId,
                  resource,
                ),
          ),
        ),
      ),
    listConsents: (subject) =>
      attempt("GrantStore.listConsents")(() =>
        Effect.succeed(
          q("SELECT * FROM consents WHERE subject = ? ORDER BY client_id, resource").all(subject).map(consentFromRow),
        ),
      ),
    rememberJti: (clientId, jti, expiresAt) =>
      attempt("GrantStore.rememberJti")(() =>
        Effect.succeed(
          changes(
            q(
              "INSERT INTO assertion_jtis (client_id, jti, expires_at) VALUES (?, ?, ?) ON CONFLICT (client_id, jti) DO NOTHING",
            ).run(clientId, jti, expiresAt),
          ) === 1,
        ),
      ),
    purgeExpired: (now) =>
      attempt("GrantStore.purgeExpired")(() =>
        transaction(db, () => {
          const run = (sql: string, ...params: Array<SQLInputValue>) => changes(q(sql).run(...params))
          const removed =
            run("DELETE FROM authorization_codes WHERE expires_at <= ?", now) +
            run("DELETE FROM access_tokens WHERE expires_at <= ?", now) +
            run("DELETE FROM revoked_access_tokens WHERE expires_at <= ?", now) +
            run("DELETE FROM assertion_jtis WHERE expires_at <= ?", now) +
            run(
              `DELETE FROM refresh_tokens WHERE (expires_at IS NOT NULL AND expires_at <= ?)
               OR family_id IN (SELECT family_id FROM refresh_families WHERE revoked_at IS NOT NULL)`,
              now,
            ) +
            run(
              `DELETE FROM refresh_families WHERE revoked_at IS NOT NULL
               OR NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = refresh_families.family_id)`,
            ) +
            run(
              `DELETE FROM grants WHERE
                 NOT EXISTS (SELECT 1 FROM authorization_codes c WHERE c.grant_id = grants.grant_id)
                 AND NOT EXISTS (SELECT 1 FROM access_tokens a WHERE a.grant_id = grants.grant_id)
                 AND NOT EXISTS (SELECT 1 FROM refresh_families f WHERE f.grant_id = grants.grant_id)`,
            )
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
    private_jwk: JSON.parse(str(row, "private_jwk")) as Jwk,
    public_jwk: JSON.parse(str(row, "public_jwk")) as Jwk,
    created_at: num(row, "created_at"),
    activates_at: num(row, "activates_at"),
    retires_at: optNum(row, "retires_at"),
    status: str(row, "status") as SigningKey["status"],
  })

export const makeKeyStore = (db: DatabaseSync): KeyStore["Service"] => {
  const q = statements(db)
  const ORDER = "ORDER BY created_at, kid"
  return {
    add: (key) =>
      attempt("KeyStore.add")(() => {
        const r = q(
          `INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, activates_at, retires_at, status)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kid) DO NOTHING`,
        ).run(
          key.kid,
          key.alg,
          JSON.stringify(key.private_jwk),
          JSON.stringify(key.public_jwk),
          key.created_at,
          key.activates_at,
          opt(key.retires_at),
          key.status,
        )
        if (changes(r) === 0) return Effect.fail(new KeyAlreadyExists({ kid: key.kid }))
        return Effect.succeed(structuredClone(defined(key)))
      }),
    get: (kid) =>
      attempt("KeyStore.get")(() => {
        const row = q("SELECT * FROM signing_keys WHERE kid = ?").get(kid)
        return row === undefined ? Effect.fail(new KeyNotFound({ kid })) : Effect.succeed(keyFromRow(row))
      }),
    list: () =>
      attempt("KeyStore.list")(() => Effect.succeed(q(`SELECT * FROM signing_keys ${ORDER}`).all().map(keyFromRow))),
    published: (now) =>
      attempt("KeyStore.published")(() =>
        Effect.succeed(
          q(`SELECT * FROM signing_keys WHERE retires_at IS NULL OR retires_at > ? ${ORDER}`).all(now).map(keyFromRow),
        ),
      ),
    current: (now) =>
      attempt("KeyStore.current")(() => {
        const row = q(
          `SELECT * FROM signing_keys WHERE status = 'active' AND activates_at <= ?1 AND (retires_at IS NULL OR retires_at > ?1)
           ORDER BY activates_at DESC, created_at DESC, kid DESC LIMIT 1`,
        ).get(now)
        return row === undefined ? Effect.fail(new NoSigningKey()) : Effect.succeed(keyFromRow(row))
      }),
    retire: (kid, retiresAt) =>
      attempt("KeyStore.retire")(() =>
        transaction(db, () => {
          const r = q("UPDATE signing_keys SET status = 'retired', retires_at = ? WHERE kid = ?").run(retiresAt, kid)
          if (changes(r) === 0) return Effect.fail(new KeyNotFound({ kid }))
          const row = q("SELECT * FROM signing_keys WHERE kid = ?").get(kid)
          return row === undefined ? Effect.fail(new KeyNotFound({ kid })) : Effect.succeed(keyFromRow(row))
        }),
      ),
    purgeExpired: (now) =>
      attempt("KeyStore.purgeExpired")(() =>
        Effect.succeed(
          changes(q("DELETE FROM signing_keys WHERE retires_at IS NOT NULL AND retires_at <= ?").run(now)),
        ),
      ),
  }
}
