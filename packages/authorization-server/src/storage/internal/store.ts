/**
 * The stores, written once over the driver port: every method is one unit of work (a transaction when it reads and
 * then writes, or writes more than once), whatever the database.
 */
import { Scope } from "@keyway/core"
import { Duration, Effect, Exit, Option } from "effect"
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
  type StorageError,
} from "../Errors.js"
import type {
  AuthorizationCode,
  Client,
  ClientMetadata,
  ClientStore,
  Consent,
  Grant,
  GrantStore,
  GrantSummary,
  Jwk,
  KeyStore,
  NewAuthorizationCode,
  NewClient,
  RecordStore,
  RefreshToken,
  RefreshTokenStatus,
  SigningKey,
  StoredRecord,
} from "../Storage.js"
import {
  clientMetadata,
  clientRecord,
  covers,
  defined,
  hashSecret,
  matchesHash,
  mergeConsent,
  newSalt,
  normaliseScopes,
  secretLive,
  storedMetadata,
  successorOf,
  updatedHash,
} from "./common.js"
import { StorageObserver } from "./observer.js"
import { count, type Driver, type Mode, type Param, type Row, row, rows, type Tables, type Work } from "./sql.js"

// ---------------------------------------------------------------------------------------------------------------------
// Row decoding
// ---------------------------------------------------------------------------------------------------------------------

const str = (r: Row, key: string): string => {
  const v = r[key]
  if (typeof v !== "string") throw new Error(`column ${key}: expected text`)
  return v
}
// PostgreSQL's int8 arrives as a decimal string (it may exceed 2^53); our values are seconds, well within range.
const num = (r: Row, key: string): number => {
  const v = r[key]
  if (typeof v === "number") return v
  if ((typeof v === "string" && /^-?\d+$/.test(v)) || typeof v === "bigint") return Number(v)
  throw new Error(`column ${key}: expected integer`)
}
const optStr = (r: Row, key: string): string | undefined => (r[key] == null ? undefined : str(r, key))
const optNum = (r: Row, key: string): number | undefined => (r[key] == null ? undefined : num(r, key))
// JSON columns: SQLite keeps JSON text, PostgreSQL's jsonb and text[] arrive decoded.
const json = (r: Row, key: string): unknown => {
  const v = r[key]
  return typeof v === "string" ? JSON.parse(v) : v
}
// SQLite answers a boolean expression with 0 or 1, PostgreSQL with a boolean.
const bool = (r: Row, key: string): boolean => r[key] === true || r[key] === 1
const opt = (v: string | number | undefined): string | number | null => v ?? null

// The expires_at column is the truth (a redemption clears it for a dynamic client); the JSON copy may be older.
const clientFromRow = (r: Row): Client =>
  clientRecord(
    defined<ClientMetadata>({
      ...(storedMetadata(json(r, "metadata") as Record<string, unknown>) as unknown as ClientMetadata),
      expires_at: optNum(r, "expires_at"),
    }),
    optStr(r, "client_secret_hash"),
    optStr(r, "registration_access_token_hash"),
  )

const codeFromRow = (r: Row): AuthorizationCode =>
  defined<AuthorizationCode>({
    grant_id: str(r, "grant_id"),
    client_id: str(r, "client_id"),
    redirect_uri: str(r, "redirect_uri"),
    code_challenge: str(r, "code_challenge"),
    code_challenge_method: str(r, "code_challenge_method") as "S256",
    resource: str(r, "resource"),
    scope: str(r, "scope"),
    subject: str(r, "subject"),
    auth_time: num(r, "auth_time"),
    issued_at: num(r, "issued_at"),
    expires_at: num(r, "expires_at"),
    nonce: optStr(r, "nonce"),
    redirect_uri_sent: bool(r, "redirect_uri_sent") ? true : undefined,
    confirmation: optStr(r, "confirmation"),
  })

const grantFromRow = (r: Row): Grant =>
  defined<Grant>({
    grant_id: str(r, "grant_id"),
    client_id: str(r, "client_id"),
    subject: str(r, "subject"),
    resource: str(r, "resource"),
    scope: str(r, "scope"),
    auth_time: num(r, "auth_time"),
    created_at: num(r, "created_at"),
    revoked_at: optNum(r, "revoked_at"),
  })

const refreshFromRow = (r: Row): RefreshToken =>
  defined<RefreshToken>({
    family_id: str(r, "family_id"),
    grant_id: str(r, "grant_id"),
    client_id: str(r, "client_id"),
    subject: str(r, "subject"),
    resource: str(r, "resource"),
    scope: str(r, "scope"),
    issued_at: num(r, "issued_at"),
    expires_at: optNum(r, "expires_at"),
    confirmation: optStr(r, "confirmation"),
  })

const refreshStatus = (r: Row, now: number): RefreshTokenStatus => {
  const token = refreshFromRow(r)
  const active =
    r.rotated_at == null && r.family_revoked_at == null && (token.expires_at === undefined || token.expires_at > now)
  return { ...token, active, auth_time: num(r, "auth_time") }
}

const consentFromRow = (r: Row): Consent => ({
  subject: str(r, "subject"),
  client_id: str(r, "client_id"),
  resource: str(r, "resource"),
  // Sorted on read too: PostgreSQL schemas written before the store was shared keep an unsorted set.
  scopes: normaliseScopes(json(r, "scopes") as ReadonlyArray<string>),
  granted_at: num(r, "granted_at"),
})

const keyFromRow = (r: Row): SigningKey =>
  defined<SigningKey>({
    kid: str(r, "kid"),
    alg: str(r, "alg"),
    private_jwk: json(r, "private_jwk") as Jwk,
    public_jwk: json(r, "public_jwk") as Jwk,
    created_at: num(r, "created_at"),
    activates_at: num(r, "activates_at"),
    retires_at: optNum(r, "retires_at"),
    status: str(r, "status") as SigningKey["status"],
  })

// ---------------------------------------------------------------------------------------------------------------------

/**
 * One store method as a unit of work whose outcome is `Effect.succeed` / `Effect.fail` of plain values, decided once
 * all its statements have run; the driver's failures become `StorageError`.
 */
const method =
  (driver: Driver, operation: string, mode: Mode) =>
  <T extends Effect.Effect<unknown, unknown>>(
    work: () => Work<T>,
  ): Effect.Effect<Effect.Success<T>, Effect.Error<T> | StorageError> =>
    StorageObserver.use((observe) =>
      observe === undefined
        ? Effect.flatten(driver.run(operation, mode, work))
        : Effect.timed(Effect.exit(driver.run(operation, mode, work))).pipe(
            Effect.flatMap(([took, exit]) => {
              observe(operation, Duration.toMillis(took) / 1000, Exit.isSuccess(exit))
              return Effect.flatten(exit)
            }),
          ),
    ) as Effect.Effect<Effect.Success<T>, Effect.Error<T> | StorageError>

// ---------------------------------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------------------------------

const clientParams = (c: ClientMetadata, secretHash: string | undefined, tokenHash: string | undefined) => [
  c.client_id,
  c.origin,
  opt(c.expires_at),
  c.client_secret_expires_at,
  opt(secretHash),
  opt(tokenHash),
  JSON.stringify(clientMetadata(c)),
]

const newHashes = (c: NewClient) =>
  [
    c.client_secret === undefined ? undefined : hashSecret(c.client_secret),
    c.registration_access_token === undefined ? undefined : hashSecret(c.registration_access_token),
  ] as const

export const makeClientStore = (driver: Driver): ClientStore["Service"] => {
  const { tables: t } = driver
  const single = (operation: string) => method(driver, `ClientStore.${operation}`, "autocommit")
  const INSERT = `INSERT INTO ${t.clients} (client_id, origin, expires_at, client_secret_expires_at, client_secret_hash,
    registration_access_token_hash, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7)`
  const select = (clientId: string) => row(`SELECT * FROM ${t.clients} WHERE client_id = $1`, [clientId])
  return {
    get: (clientId, now) =>
      single("get")(function* () {
        const r = yield* select(clientId)
        const expiresAt = r === undefined ? undefined : optNum(r, "expires_at")
        if (r === undefined || (expiresAt !== undefined && expiresAt <= now)) {
          return Effect.fail(new ClientNotFound({ client_id: clientId }))
        }
        return Effect.succeed(clientFromRow(r))
      }),
    create: (client) =>
      single("create")(function* () {
        const [secret, token] = newHashes(client)
        const n = yield* count(`${INSERT} ON CONFLICT (client_id) DO NOTHING`, clientParams(client, secret, token))
        if (n === 0) return Effect.fail(new ClientAlreadyExists({ client_id: client.client_id }))
        return Effect.succeed(clientRecord(client, secret, token))
      }),
    update: (client) =>
      method(
        driver,
        "ClientStore.update",
        "transaction",
      )(function* () {
        const r = yield* row(
          `SELECT client_secret_hash, registration_access_token_hash FROM ${t.clients} WHERE client_id = $1
           ${driver.lock("update")}`,
          [client.client_id],
        )
        if (r === undefined) return Effect.fail(new ClientNotFound({ client_id: client.client_id }))
        const secret = updatedHash(client.client_secret, optStr(r, "client_secret_hash"))
        const token = updatedHash(client.registration_access_token, optStr(r, "registration_access_token_hash"))
        yield* count(
          `UPDATE ${t.clients} SET origin = $2, expires_at = $3, client_secret_expires_at = $4, client_secret_hash = $5,
           registration_access_token_hash = $6, metadata = $7 WHERE client_id = $1`,
          clientParams(client, secret, token),
        )
        return Effect.succeed(clientRecord(client, secret, token))
      }),
    upsert: (client) =>
      single("upsert")(function* () {
        const [secret, token] = newHashes(client)
        yield* count(
          `${INSERT} ON CONFLICT (client_id) DO UPDATE SET origin = excluded.origin, expires_at = excluded.expires_at,
           client_secret_expires_at = excluded.client_secret_expires_at, client_secret_hash = excluded.client_secret_hash,
           registration_access_token_hash = excluded.registration_access_token_hash, metadata = excluded.metadata`,
          clientParams(client, secret, token),
        )
        return Effect.succeed(clientRecord(client, secret, token))
      }),
    delete: (clientId) =>
      single("delete")(function* () {
        const n = yield* count(`DELETE FROM ${t.clients} WHERE client_id = $1`, [clientId])
        return n === 0 ? Effect.fail(new ClientNotFound({ client_id: clientId })) : Effect.void
      }),
    list: (options) =>
      single("list")(function* () {
        const found =
          options?.origin === undefined
            ? yield* rows(`SELECT * FROM ${t.clients} ORDER BY client_id`)
            : yield* rows(`SELECT * FROM ${t.clients} WHERE origin = $1 ORDER BY client_id`, [options.origin])
        return Effect.succeed(found.map(clientFromRow))
      }),
    verifySecret: (clientId, presented, now) =>
      single("verifySecret")(function* () {
        const r = yield* select(clientId)
        if (r === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        const matches = matchesHash(presented, optStr(r, "client_secret_hash"))
        return Effect.succeed(matches && secretLive(num(r, "client_secret_expires_at"), now))
      }),
    verifyRegistrationAccessToken: (clientId, presented) =>
      single("verifyRegistrationAccessToken")(function* () {
        const r = yield* select(clientId)
        if (r === undefined) return Effect.fail(new ClientNotFound({ client_id: clientId }))
        return Effect.succeed(matchesHash(presented, optStr(r, "registration_access_token_hash")))
      }),
    purgeExpired: (now) =>
      single("purgeExpired")(function* () {
        return Effect.succeed(
          yield* count(`DELETE FROM ${t.clients} WHERE expires_at IS NOT NULL AND expires_at <= $1`, [now]),
        )
      }),
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Grants
// ---------------------------------------------------------------------------------------------------------------------

export const makeGrantStore = (driver: Driver): GrantStore["Service"] => {
  const { tables: t } = driver
  const single = (operation: string) => method(driver, `GrantStore.${operation}`, "autocommit")
  const atomic = (operation: string) => method(driver, `GrantStore.${operation}`, "transaction")

  // Inside a transaction. The grant row is written (so locked) first: revocations of one grant queue behind each
  // other and behind any issuance that holds the grant row (see recordAccessToken, createRefresh).
  function* revoke(grantId: string, now: number): Work<boolean> {
    const n = yield* count(`UPDATE ${t.grants} SET revoked_at = COALESCE(revoked_at, $2) WHERE grant_id = $1`, [
      grantId,
      now,
    ])
    if (n === 0) return false
    yield* count(`UPDATE ${t.families} SET revoked_at = $2 WHERE grant_id = $1 AND revoked_at IS NULL`, [grantId, now])
    yield* count(
      `INSERT INTO ${t.revokedAccessTokens} (jti, expires_at)
       SELECT jti, expires_at FROM ${t.accessTokens} WHERE grant_id = $1 AND expires_at > $2
       ON CONFLICT (jti) DO NOTHING`,
      [grantId, now],
    )
    return true
  }

  const SELECT_REFRESH = `SELECT r.token_hash, r.family_id, r.scope, r.issued_at, r.expires_at, r.rotated_at, r.successor_salt,
      f.grant_id, f.revoked_at AS family_revoked_at, f.confirmation, COALESCE(f.auth_time, g.auth_time) AS auth_time,
      g.client_id, g.subject, g.resource
    FROM ${t.refreshTokens} r JOIN ${t.families} f ON f.family_id = r.family_id JOIN ${t.grants} g ON g.grant_id = f.grant_id
    WHERE r.token_hash = $1`

  // Inside a transaction. With `lock`, the token row stays locked until the transaction ends: concurrent rotations of
  // one token queue there and each sees the previous one's `rotated_at`. Order of checks: unknown, rotated out
  // (reuse: revokes the grant), revoked family, expired. Returns the row or the failure.
  function* presentRefresh(
    tokenHash: string,
    now: number,
    lock: boolean,
  ): Work<Row | RefreshTokenNotFound | RefreshTokenRevoked | RefreshTokenReused | RefreshTokenExpired> {
    const r = yield* row(lock ? `${SELECT_REFRESH} ${driver.lock("update", "r")}` : SELECT_REFRESH, [tokenHash])
    if (r === undefined) return new RefreshTokenNotFound()
    const family_id = str(r, "family_id")
    const grant_id = str(r, "grant_id")
    if (r.rotated_at != null) {
      yield* revoke(grant_id, now)
      return new RefreshTokenReused({ family_id, grant_id })
    }
    if (r.family_revoked_at != null) return new RefreshTokenRevoked({ family_id, grant_id })
    const expiresAt = optNum(r, "expires_at")
    if (expiresAt !== undefined && expiresAt <= now) return new RefreshTokenExpired({ family_id })
    return r
  }

  // Inside a transaction: the grant, held against a concurrent revocation until the transaction ends.
  function* liveGrant(grantId: string): Work<Row | GrantNotFound | GrantRevoked> {
    const r = yield* row(`SELECT * FROM ${t.grants} WHERE grant_id = $1 ${driver.lock("share")}`, [grantId])
    if (r === undefined) return new GrantNotFound({ grant_id: grantId })
    if (r.revoked_at != null) return new GrantRevoked({ grant_id: grantId })
    return r
  }

  // Inside a transaction that reached the grant through a code or token row (whose foreign key guarantees it exists):
  // a missing grant can only have been purged after a revocation.
  function* heldGrant(grantId: string): Work<Row | GrantRevoked> {
    const grant = yield* liveGrant(grantId)
    return grant instanceof GrantNotFound ? new GrantRevoked({ grant_id: grantId }) : grant
  }

  const INSERT_REFRESH = `INSERT INTO ${t.refreshTokens} (token_hash, family_id, scope, issued_at, expires_at)
    VALUES ($1, $2, $3, $4, $5)`

  // Inside a transaction. The code row stays locked until commit: concurrent redemptions queue here, and each one
  // after the first re-reads the row with the winner's consumed_at set. Order of checks: unknown, already used (a
  // replay: revokes the grant), expired, revoked grant. Returns the code's row, now consumed, or the failure.
  function* spendCode(
    codeHash: string,
    now: number,
  ): Work<Row | CodeNotFound | CodeAlreadyUsed | CodeExpired | GrantRevoked> {
    const r = yield* row(
      `SELECT c.*, g.revoked_at AS grant_revoked_at FROM ${t.codes} c
       JOIN ${t.grants} g ON g.grant_id = c.grant_id WHERE c.code_hash = $1 ${driver.lock("update", "c")}`,
      [codeHash],
    )
    if (r === undefined) return new CodeNotFound()
    const grant_id = str(r, "grant_id")
    if (r.consumed_at != null) {
      yield* revoke(grant_id, now)
      return new CodeAlreadyUsed({ grant_id })
    }
    if (num(r, "expires_at") <= now) return new CodeExpired({ grant_id })
    if (r.grant_revoked_at != null) return new GrantRevoked({ grant_id })
    yield* count(`UPDATE ${t.codes} SET consumed_at = $1 WHERE code_hash = $2`, [now, codeHash])
    return r
  }

  function* insertAccessToken(grantId: string, token: { readonly jti: string; readonly expires_at: number }) {
    yield* count(`INSERT INTO ${t.accessTokens} (jti, grant_id, expires_at) VALUES ($1, $2, $3)`, [
      token.jti,
      grantId,
      token.expires_at,
    ])
  }

  // Inside a transaction, with the grant's row from liveGrant: a new family and its first token. The family keeps the
  // auth_time of the authentication it comes from, since later authorizations merged into the grant move the grant's.
  function* openFamily(
    grant: Row,
    token: string,
    scope: string,
    issuedAt: number,
    expiresAt: number | undefined,
    confirmation: string | undefined,
    authTime: number,
  ): Work<RefreshToken> {
    const family_id = crypto.randomUUID()
    const grant_id = str(grant, "grant_id")
    yield* count(
      `INSERT INTO ${t.families} (family_id, grant_id, created_at, confirmation, auth_time) VALUES ($1, $2, $3, $4, $5)`,
      [family_id, grant_id, issuedAt, opt(confirmation), authTime],
    )
    yield* count(INSERT_REFRESH, [hashSecret(token), family_id, scope, issuedAt, opt(expiresAt)])
    return defined<RefreshToken>({
      family_id,
      grant_id,
      client_id: str(grant, "client_id"),
      subject: str(grant, "subject"),
      resource: str(grant, "resource"),
      scope,
      issued_at: issuedAt,
      expires_at: expiresAt,
      confirmation,
    })
  }
  const SELECT_CONSENT = `SELECT * FROM ${t.consents} WHERE subject = $1 AND client_id = $2 AND resource = $3`

  // Inside a transaction: remembers consent, merged with what is remembered. Inserted when absent; otherwise merged
  // under the row's lock, so concurrent grants (in any process) each add their scopes instead of overwriting one
  // another.
  function* rememberConsent(consent: Consent): Work<Consent> {
    const key: ReadonlyArray<Param> = [consent.subject, consent.client_id, consent.resource]
    const fresh = mergeConsent(undefined, consent)
    const inserted = yield* count(
      `INSERT INTO ${t.consents} (subject, client_id, resource, scopes, granted_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (subject, client_id, resource) DO NOTHING`,
      [...key, driver.textArray(fresh.scopes), fresh.granted_at],
    )
    if (inserted === 1) return fresh
    const current = yield* row(`${SELECT_CONSENT} ${driver.lock("update")}`, key)
    const merged = mergeConsent(current === undefined ? undefined : consentFromRow(current), consent)
    yield* count(
      `UPDATE ${t.consents} SET scopes = $4, granted_at = $5 WHERE subject = $1 AND client_id = $2 AND resource = $3`,
      [...key, driver.textArray(merged.scopes), merged.granted_at],
    )
    return merged
  }

  // Inside a transaction: the live grant of the code's subject, client and resource, opened when there is none, else
  // widened to the union of its scope and the code's (MCP step-up asks clients for that union), with the later
  // auth_time. A unique index on the live grants' (subject, client_id, resource) makes the insert and the merge one
  // statement: concurrent authorizations, in any process, meet on the index and converge on one row, which stays
  // locked until the commit; a revoked grant is outside the index, so it is never merged into (revived). Then the
  // remembered consent is widened to cover the grant's whole scope. Returns the grant's id.
  function* authorize(input: NewAuthorizationCode): Work<string> {
    const opened = crypto.randomUUID()
    const r = yield* row(
      `INSERT INTO ${t.grants} AS g (grant_id, client_id, subject, resource, scope, auth_time, created_at, authorized_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
       ON CONFLICT (subject, client_id, resource) WHERE revoked_at IS NULL DO UPDATE SET
         auth_time = CASE WHEN excluded.auth_time > g.auth_time THEN excluded.auth_time ELSE g.auth_time END,
         authorized_at = CASE WHEN excluded.authorized_at > g.authorized_at THEN excluded.authorized_at
           ELSE g.authorized_at END
       RETURNING grant_id, scope`,
      [opened, input.client_id, input.subject, input.resource, input.scope, input.auth_time, input.issued_at],
    )
    if (r === undefined) throw new Error("the grant upsert returned no row")
    const grant_id = str(r, "grant_id")
    const held = str(r, "scope")
    const scope = grant_id === opened ? held : Scope.format(Scope.union(held, input.scope))
    if (scope !== held) yield* count(`UPDATE ${t.grants} SET scope = $2 WHERE grant_id = $1`, [grant_id, scope])
    const scopes = Scope.parse(scope)
    const remembered = yield* row(SELECT_CONSENT, [input.subject, input.client_id, input.resource])
    if (!covers(remembered === undefined ? undefined : consentFromRow(remembered), scopes)) {
      yield* rememberConsent({
        subject: input.subject,
        client_id: input.client_id,
        resource: input.resource,
        scopes: normaliseScopes(scopes),
        granted_at: input.issued_at,
      })
    }
    return grant_id
  }

  return {
    createCode: (input) =>
      atomic("createCode")(function* () {
        const grant_id = yield* authorize(input)
        yield* count(
          `INSERT INTO ${t.codes} (code_hash, grant_id, client_id, redirect_uri, code_challenge,
           code_challenge_method, resource, scope, subject, auth_time, issued_at, expires_at, nonce, redirect_uri_sent,
           confirmation)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
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
            input.redirect_uri_sent === true ? 1 : 0,
            opt(input.confirmation),
          ],
        )
        const { code, ...rest } = input
        return Effect.succeed(
          defined<AuthorizationCode>({
            ...rest,
            grant_id,
            redirect_uri_sent: input.redirect_uri_sent === true ? true : undefined,
          }),
        )
      }),
    consumeCode: (code, now) =>
      atomic("consumeCode")(function* () {
        const spent = yield* spendCode(hashSecret(code), now)
        return spent instanceof Error ? Effect.fail(spent) : Effect.succeed(codeFromRow(spent))
      }),
    findCode: (code) =>
      single("findCode")(function* () {
        const r = yield* row(`SELECT * FROM ${t.codes} WHERE code_hash = $1`, [hashSecret(code)])
        return Effect.succeed(r === undefined ? Option.none<AuthorizationCode>() : Option.some(codeFromRow(r)))
      }),
    redeemCode: (redemption) =>
      atomic("redeemCode")(function* () {
        const spent = yield* spendCode(hashSecret(redemption.code), redemption.now)
        if (spent instanceof Error) return Effect.fail(spent)
        const code = codeFromRow(spent)
        // The grant row is held from here to the commit, so a concurrent revocation comes before or after all of it.
        const grant = yield* heldGrant(code.grant_id)
        if (grant instanceof Error) return Effect.fail(grant)
        yield* insertAccessToken(code.grant_id, redemption.access_token)
        let refresh: RefreshToken | undefined
        if (redemption.refresh !== undefined) {
          refresh = yield* openFamily(
            grant,
            redemption.refresh.token,
            code.scope,
            redemption.now,
            redemption.refresh.expires_at,
            redemption.refresh.confirmation,
            code.auth_time,
          )
        }
        // A dynamically registered client that completed an authorization is no longer an unused registration.
        yield* count(
          `UPDATE ${t.clients} SET expires_at = NULL WHERE client_id = $1 AND origin = 'dynamic' AND expires_at IS NOT NULL`,
          [code.client_id],
        )
        return Effect.succeed(refresh === undefined ? { code } : { code, refresh })
      }),
    getGrant: (grantId) =>
      single("getGrant")(function* () {
        const r = yield* row(`SELECT * FROM ${t.grants} WHERE grant_id = $1`, [grantId])
        return r === undefined ? Effect.fail(new GrantNotFound({ grant_id: grantId })) : Effect.succeed(grantFromRow(r))
      }),
    recordAccessToken: (token) =>
      atomic("recordAccessToken")(function* () {
        const grant = yield* liveGrant(token.grant_id)
        if (grant instanceof Error) return Effect.fail(grant)
        yield* insertAccessToken(token.grant_id, token)
        return Effect.void
      }),
    revokeAccessToken: (jti, expiresAt) =>
      single("revokeAccessToken")(function* () {
        yield* count(
          `INSERT INTO ${t.revokedAccessTokens} (jti, expires_at) VALUES ($1, $2) ON CONFLICT (jti) DO NOTHING`,
          [jti, expiresAt],
        )
        return Effect.void
      }),
    isAccessTokenRevoked: (jti) =>
      single("isAccessTokenRevoked")(function* () {
        const r = yield* row(
          `SELECT EXISTS (SELECT 1 FROM ${t.revokedAccessTokens} WHERE jti = $1)
             OR EXISTS (SELECT 1 FROM ${t.accessTokens} a JOIN ${t.grants} g ON g.grant_id = a.grant_id
                        WHERE a.jti = $1 AND g.revoked_at IS NOT NULL) AS revoked`,
          [jti],
        )
        return Effect.succeed(r !== undefined && bool(r, "revoked"))
      }),
    accessTokenGrant: (jti) =>
      single("accessTokenGrant")(function* () {
        const r = yield* row(
          `SELECT g.grant_id, g.scope, g.resource FROM ${t.accessTokens} a JOIN ${t.grants} g ON g.grant_id = a.grant_id
           WHERE a.jti = $1 AND g.revoked_at IS NULL`,
          [jti],
        )
        return Effect.succeed(
          r === undefined
            ? Option.none()
            : Option.some({ grant_id: str(r, "grant_id"), scope: str(r, "scope"), resource: str(r, "resource") }),
        )
      }),
    createRefresh: (input) =>
      atomic("createRefresh")(function* () {
        const grant = yield* liveGrant(input.grant_id)
        if (grant instanceof Error) return Effect.fail(grant)
        return Effect.succeed(
          yield* openFamily(
            grant,
            input.token,
            input.scope,
            input.issued_at,
            input.expires_at,
            input.confirmation,
            num(grant, "auth_time"),
          ),
        )
      }),
    getRefresh: (token, now) =>
      atomic("getRefresh")(function* () {
        const presented = yield* presentRefresh(hashSecret(token), now, false)
        return presented instanceof Error ? Effect.fail(presented) : Effect.succeed(refreshFromRow(presented))
      }),
    findRefresh: (token, now) =>
      single("findRefresh")(function* () {
        const r = yield* row(SELECT_REFRESH, [hashSecret(token)])
        return Effect.succeed(r === undefined ? Option.none<RefreshTokenStatus>() : Option.some(refreshStatus(r, now)))
      }),
    refresh: (request) =>
      atomic("refresh")(function* () {
        const tokenHash = hashSecret(request.token)
        const { now, rotation } = request
        const r = yield* row(`${SELECT_REFRESH} ${driver.lock("update", "r")}`, [tokenHash])
        if (r === undefined) return Effect.fail(new RefreshTokenNotFound())
        const family_id = str(r, "family_id")
        const grant_id = str(r, "grant_id")
        const sameClient = str(r, "client_id") === request.client_id
        if (r.rotated_at != null) {
          // A retry or a concurrent twin of the rotation that replaced this token: within the interval, and while the
          // successor is still the family's live token, it gets that same successor.
          const salt = optStr(r, "successor_salt")
          if (
            rotation !== undefined &&
            rotation.reuse_interval > 0 &&
            now - num(r, "rotated_at") <= rotation.reuse_interval &&
            salt !== undefined &&
            sameClient &&
            r.family_revoked_at == null
          ) {
            const successor = successorOf(request.token, salt)
            const s = yield* row(`${SELECT_REFRESH} ${driver.lock("update", "r")}`, [hashSecret(successor)])
            const expiresAt = s === undefined ? undefined : optNum(s, "expires_at")
            if (
              s !== undefined &&
              str(s, "family_id") === family_id &&
              s.rotated_at == null &&
              (expiresAt === undefined || expiresAt > now)
            ) {
              const grant = yield* heldGrant(grant_id)
              if (grant instanceof Error) return Effect.fail(grant)
              yield* insertAccessToken(grant_id, request.access_token)
              return Effect.succeed({ token: refreshFromRow(s), refresh_token: successor, replayed: true })
            }
          }
          yield* revoke(grant_id, now)
          return Effect.fail(new RefreshTokenReused({ family_id, grant_id }))
        }
        if (r.family_revoked_at != null) return Effect.fail(new RefreshTokenRevoked({ family_id, grant_id }))
        const expiresAt = optNum(r, "expires_at")
        if (expiresAt !== undefined && expiresAt <= now) return Effect.fail(new RefreshTokenExpired({ family_id }))
        if (!sameClient) return Effect.fail(new RefreshTokenClientMismatch({ family_id, client_id: request.client_id }))
        const grant = yield* heldGrant(grant_id)
        if (grant instanceof Error) return Effect.fail(grant)
        yield* insertAccessToken(grant_id, request.access_token)
        if (rotation === undefined) return Effect.succeed({ token: refreshFromRow(r), replayed: false })
        const salt = newSalt()
        const successor = successorOf(request.token, salt)
        const scope = str(r, "scope")
        yield* count(`UPDATE ${t.refreshTokens} SET rotated_at = $1, successor_salt = $2 WHERE token_hash = $3`, [
          now,
          salt,
          tokenHash,
        ])
        yield* count(INSERT_REFRESH, [hashSecret(successor), family_id, scope, now, opt(rotation.expires_at)])
        return Effect.succeed({
          token: defined<RefreshToken>({
            family_id,
            grant_id,
            client_id: str(r, "client_id"),
            subject: str(r, "subject"),
            resource: str(r, "resource"),
            scope,
            issued_at: now,
            expires_at: rotation.expires_at,
            confirmation: optStr(r, "confirmation"),
          }),
          refresh_token: successor,
          replayed: false,
        })
      }),
    rotate: (rotation) =>
      atomic("rotate")(function* () {
        const tokenHash = hashSecret(rotation.token)
        const r = yield* presentRefresh(tokenHash, rotation.now, true)
        if (r instanceof Error) return Effect.fail(r)
        const family_id = str(r, "family_id")
        if (str(r, "client_id") !== rotation.client_id) {
          return Effect.fail(new RefreshTokenClientMismatch({ family_id, client_id: rotation.client_id }))
        }
        yield* count(`UPDATE ${t.refreshTokens} SET rotated_at = $1 WHERE token_hash = $2`, [rotation.now, tokenHash])
        yield* count(INSERT_REFRESH, [
          hashSecret(rotation.new_token),
          family_id,
          rotation.scope,
          rotation.now,
          opt(rotation.expires_at),
        ])
        return Effect.succeed(
          defined<RefreshToken>({
            family_id,
            grant_id: str(r, "grant_id"),
            client_id: str(r, "client_id"),
            subject: str(r, "subject"),
            resource: str(r, "resource"),
            scope: rotation.scope,
            issued_at: rotation.now,
            expires_at: rotation.expires_at,
            confirmation: optStr(r, "confirmation"),
          }),
        )
      }),
    revokeFamily: (familyId, now) =>
      single("revokeFamily")(function* () {
        const n = yield* count(`UPDATE ${t.families} SET revoked_at = COALESCE(revoked_at, $1) WHERE family_id = $2`, [
          now,
          familyId,
        ])
        return Effect.succeed(n > 0)
      }),
    revokeByRefreshToken: (token, now) =>
      atomic("revokeByRefreshToken")(function* () {
        const r = yield* row(
          `SELECT f.grant_id FROM ${t.refreshTokens} r JOIN ${t.families} f ON f.family_id = r.family_id
           WHERE r.token_hash = $1`,
          [hashSecret(token)],
        )
        if (r === undefined) return Effect.succeed(Option.none<string>())
        const grantId = str(r, "grant_id")
        yield* revoke(grantId, now)
        return Effect.succeed(Option.some(grantId))
      }),
    revokeGrant: (grantId, now) =>
      atomic("revokeGrant")(function* () {
        return (yield* revoke(grantId, now)) ? Effect.void : Effect.fail(new GrantNotFound({ grant_id: grantId }))
      }),
    listGrants: (filter) =>
      single("listGrants")(function* () {
        const conditions = ["g.revoked_at IS NULL"]
        const params: Array<Param> = []
        if (filter?.subject !== undefined) {
          params.push(filter.subject)
          conditions.push(`g.subject = $${params.length}`)
        }
        if (filter?.client_id !== undefined) {
          params.push(filter.client_id)
          conditions.push(`g.client_id = $${params.length}`)
        }
        const found = yield* rows(
          `SELECT g.*, (SELECT MAX(r.issued_at) FROM ${t.refreshTokens} r JOIN ${t.families} f ON f.family_id = r.family_id
             WHERE f.grant_id = g.grant_id) AS last_refresh_at
           FROM ${t.grants} g WHERE ${conditions.join(" AND ")} ORDER BY g.created_at, g.grant_id`,
          params,
        )
        return Effect.succeed(
          found.map(
            (r): GrantSummary => ({
              ...grantFromRow(r),
              last_used_at: Math.max(
                num(r, "created_at"),
                optNum(r, "authorized_at") ?? 0,
                optNum(r, "last_refresh_at") ?? 0,
              ),
            }),
          ),
        )
      }),
    grantConsent: (consent) =>
      atomic("grantConsent")(function* () {
        return Effect.succeed(yield* rememberConsent(consent))
      }),
    getConsent: (subject, clientId, resource) =>
      single("getConsent")(function* () {
        const r = yield* row(SELECT_CONSENT, [subject, clientId, resource])
        return Effect.succeed(r === undefined ? Option.none<Consent>() : Option.some(consentFromRow(r)))
      }),
    consentCovers: (subject, clientId, resource, scopes) =>
      single("consentCovers")(function* () {
        const r = yield* row(SELECT_CONSENT, [subject, clientId, resource])
        return Effect.succeed(covers(r === undefined ? undefined : consentFromRow(r), scopes))
      }),
    revokeConsent: (subject, clientId, resource) =>
      single("revokeConsent")(function* () {
        return Effect.succeed(
          resource === undefined
            ? yield* count(`DELETE FROM ${t.consents} WHERE subject = $1 AND client_id = $2`, [subject, clientId])
            : yield* count(`DELETE FROM ${t.consents} WHERE subject = $1 AND client_id = $2 AND resource = $3`, [
                subject,
                clientId,
                resource,
              ]),
        )
      }),
    listConsents: (subject) =>
      single("listConsents")(function* () {
        const found = yield* rows(`SELECT * FROM ${t.consents} WHERE subject = $1 ORDER BY client_id, resource`, [
          subject,
        ])
        return Effect.succeed(found.map(consentFromRow))
      }),
    rememberJti: (clientId, jti, expiresAt) =>
      single("rememberJti")(function* () {
        const n = yield* count(
          `INSERT INTO ${t.assertionJtis} (client_id, jti, expires_at) VALUES ($1, $2, $3)
           ON CONFLICT (client_id, jti) DO NOTHING`,
          [clientId, jti, expiresAt],
        )
        return Effect.succeed(n === 1)
      }),
    purgeExpired: (now) =>
      atomic("purgeExpired")(function* () {
        let removed = 0
        removed += yield* count(`DELETE FROM ${t.codes} WHERE expires_at <= $1`, [now])
        removed += yield* count(`DELETE FROM ${t.accessTokens} WHERE expires_at <= $1`, [now])
        removed += yield* count(`DELETE FROM ${t.revokedAccessTokens} WHERE expires_at <= $1`, [now])
        removed += yield* count(`DELETE FROM ${t.assertionJtis} WHERE expires_at <= $1`, [now])
        removed += yield* count(
          `DELETE FROM ${t.refreshTokens} WHERE (expires_at IS NOT NULL AND expires_at <= $1)
           OR family_id IN (SELECT family_id FROM ${t.families} WHERE revoked_at IS NOT NULL)`,
          [now],
        )
        removed += yield* count(
          `DELETE FROM ${t.families} AS f WHERE f.revoked_at IS NOT NULL
           OR NOT EXISTS (SELECT 1 FROM ${t.refreshTokens} r WHERE r.family_id = f.family_id)`,
        )
        removed += yield* count(
          `DELETE FROM ${t.grants} AS g WHERE
             NOT EXISTS (SELECT 1 FROM ${t.codes} c WHERE c.grant_id = g.grant_id)
             AND NOT EXISTS (SELECT 1 FROM ${t.accessTokens} a WHERE a.grant_id = g.grant_id)
             AND NOT EXISTS (SELECT 1 FROM ${t.families} f WHERE f.grant_id = g.grant_id)`,
        )
        return Effect.succeed(removed)
      }),
  }
}

/**
 * The data step of the migration to one live grant per subject, client and resource: the live grants that share those
 * three are merged into the oldest (ties broken by id), whose scope becomes the union of theirs in the order they
 * were created, whose `auth_time` and `authorized_at` the latest of theirs; their codes, access-token ids and refresh
 * families are moved to it and the emptied grants deleted, so every token keeps working and revoking the survivor
 * reaches all of them. Revoked grants are left as they are. Families must already carry their own `auth_time`. Finds
 * nothing to merge the second time. Returns how many grants were merged away.
 */
export function* mergeDuplicateGrants(t: Tables): Work<number> {
  const live = yield* rows(
    `SELECT g.grant_id, g.subject, g.client_id, g.resource, g.scope, g.auth_time, g.created_at, g.authorized_at
     FROM ${t.grants} g WHERE g.revoked_at IS NULL AND EXISTS (
       SELECT 1 FROM ${t.grants} o WHERE o.revoked_at IS NULL AND o.subject = g.subject AND o.client_id = g.client_id
         AND o.resource = g.resource AND o.grant_id <> g.grant_id)
     ORDER BY g.created_at, g.grant_id`,
  )
  const groups = new Map<string, Array<Row>>()
  for (const r of live) {
    const key = JSON.stringify([str(r, "subject"), str(r, "client_id"), str(r, "resource")])
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [r])
    else group.push(r)
  }
  let merged = 0
  for (const [survivor, ...others] of groups.values()) {
    if (survivor === undefined) continue
    const all = [survivor, ...others]
    const grant_id = str(survivor, "grant_id")
    yield* count(`UPDATE ${t.grants} SET scope = $2, auth_time = $3, authorized_at = $4 WHERE grant_id = $1`, [
      grant_id,
      Scope.format(all.reduce<ReadonlyArray<string>>((scopes, r) => Scope.union(scopes, str(r, "scope")), [])),
      // A reduce, not a spread: a group may hold more grants than a call takes arguments.
      all.reduce((latest, r) => Math.max(latest, num(r, "auth_time")), 0),
      all.reduce((latest, r) => Math.max(latest, optNum(r, "authorized_at") ?? num(r, "created_at")), 0),
    ])
    for (const other of others) {
      const params = [grant_id, str(other, "grant_id")]
      yield* count(`UPDATE ${t.families} SET grant_id = $1 WHERE grant_id = $2`, params)
      yield* count(`UPDATE ${t.codes} SET grant_id = $1 WHERE grant_id = $2`, params)
      yield* count(`UPDATE ${t.accessTokens} SET grant_id = $1 WHERE grant_id = $2`, params)
      yield* count(`DELETE FROM ${t.grants} WHERE grant_id = $1`, [str(other, "grant_id")])
      merged++
    }
  }
  return merged
}

/**
 * The data and index steps of the migration to one live grant per subject, client and resource: the duplicates merged
 * ({@link mergeDuplicateGrants}), then the unique index on the live grants that `createCode` upserts against.
 */
export function* oneLiveGrantPerAuthorization(t: Tables): Work<number> {
  const merged = yield* mergeDuplicateGrants(t)
  yield* count(`CREATE UNIQUE INDEX grants_live ON ${t.grants} (subject, client_id, resource) WHERE revoked_at IS NULL`)
  return merged
}

// ---------------------------------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------------------------------

export const makeKeyStore = (driver: Driver): KeyStore["Service"] => {
  const { tables: t } = driver
  const single = (operation: string) => method(driver, `KeyStore.${operation}`, "autocommit")
  const ORDER = "ORDER BY created_at, kid"
  return {
    add: (key) =>
      single("add")(function* () {
        const n = yield* count(
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
        if (n === 0) return Effect.fail(new KeyAlreadyExists({ kid: key.kid }))
        return Effect.succeed(structuredClone(defined(key)))
      }),
    get: (kid) =>
      single("get")(function* () {
        const r = yield* row(`SELECT * FROM ${t.keys} WHERE kid = $1`, [kid])
        return r === undefined ? Effect.fail(new KeyNotFound({ kid })) : Effect.succeed(keyFromRow(r))
      }),
    list: () =>
      single("list")(function* () {
        return Effect.succeed((yield* rows(`SELECT * FROM ${t.keys} ${ORDER}`)).map(keyFromRow))
      }),
    published: (now) =>
      single("published")(function* () {
        const found = yield* rows(`SELECT * FROM ${t.keys} WHERE retires_at IS NULL OR retires_at > $1 ${ORDER}`, [now])
        return Effect.succeed(found.map(keyFromRow))
      }),
    current: (now) =>
      single("current")(function* () {
        const r = yield* row(
          `SELECT * FROM ${t.keys} WHERE status = 'active' AND activates_at <= $1 AND (retires_at IS NULL OR retires_at > $1)
           ORDER BY activates_at DESC, created_at DESC, kid DESC LIMIT 1`,
          [now],
        )
        return r === undefined ? Effect.fail(new NoSigningKey()) : Effect.succeed(keyFromRow(r))
      }),
    retire: (kid, retiresAt) =>
      single("retire")(function* () {
        const r = yield* row(`UPDATE ${t.keys} SET status = 'retired', retires_at = $1 WHERE kid = $2 RETURNING *`, [
          retiresAt,
          kid,
        ])
        return r === undefined ? Effect.fail(new KeyNotFound({ kid })) : Effect.succeed(keyFromRow(r))
      }),
    purgeExpired: (now) =>
      single("purgeExpired")(function* () {
        return Effect.succeed(
          yield* count(`DELETE FROM ${t.keys} WHERE retires_at IS NOT NULL AND retires_at <= $1`, [now]),
        )
      }),
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Extension records
// ---------------------------------------------------------------------------------------------------------------------

const recordFromRow = (r: Row): StoredRecord => ({
  value: JSON.parse(str(r, "value")),
  version: num(r, "version"),
  expires_at: num(r, "expires_at"),
})

export const makeRecordStore = (driver: Driver): RecordStore["Service"] => {
  const { tables: t } = driver
  const single = (operation: string) => method(driver, `RecordStore.${operation}`, "autocommit")
  return {
    // One statement: an expired row under the key is replaced, a live one is left as it is.
    put: (namespace, key, value, expiresAt, now) =>
      single("put")(function* () {
        const n = yield* count(
          `INSERT INTO ${t.records} AS r (namespace, key_hash, value, version, expires_at) VALUES ($1, $2, $3, 1, $4)
           ON CONFLICT (namespace, key_hash) DO UPDATE SET value = excluded.value, version = 1,
             expires_at = excluded.expires_at
           WHERE r.expires_at <= $5`,
          [namespace, hashSecret(key), JSON.stringify(value), expiresAt, now],
        )
        return Effect.succeed(n === 1)
      }),
    get: (namespace, key, now) =>
      single("get")(function* () {
        const r = yield* row(
          `SELECT value, version, expires_at FROM ${t.records} WHERE namespace = $1 AND key_hash = $2 AND expires_at > $3`,
          [namespace, hashSecret(key), now],
        )
        return Effect.succeed(r === undefined ? Option.none<StoredRecord>() : Option.some(recordFromRow(r)))
      }),
    update: (namespace, key, version, value, now) =>
      single("update")(function* () {
        const n = yield* count(
          `UPDATE ${t.records} SET value = $4, version = version + 1
           WHERE namespace = $1 AND key_hash = $2 AND version = $3 AND expires_at > $5`,
          [namespace, hashSecret(key), version, JSON.stringify(value), now],
        )
        return Effect.succeed(n === 1)
      }),
    take: (namespace, key, now) =>
      single("take")(function* () {
        const r = yield* row(
          `DELETE FROM ${t.records} WHERE namespace = $1 AND key_hash = $2 AND expires_at > $3
           RETURNING value, version, expires_at`,
          [namespace, hashSecret(key), now],
        )
        return Effect.succeed(r === undefined ? Option.none<StoredRecord>() : Option.some(recordFromRow(r)))
      }),
    delete: (namespace, key) =>
      single("delete")(function* () {
        const n = yield* count(`DELETE FROM ${t.records} WHERE namespace = $1 AND key_hash = $2`, [
          namespace,
          hashSecret(key),
        ])
        return Effect.succeed(n === 1)
      }),
    purgeExpired: (now) =>
      single("purgeExpired")(function* () {
        return Effect.succeed(yield* count(`DELETE FROM ${t.records} WHERE expires_at <= $1`, [now]))
      }),
  }
}
