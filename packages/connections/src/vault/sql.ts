/**
 * The SQL backend, written once in the dialect SQLite and PostgreSQL share (numbered `$n` placeholders; the SQLite
 * driver spells them `?n`). Every method is one statement, atomic on its own: the refresh lease and the taking of a
 * flow are conditional `UPDATE`s, which PostgreSQL re-checks after waiting on the row lock and SQLite runs under its
 * write lock, so of two instances racing exactly one changes the row.
 */
import { Effect } from "effect"
import type { Sealed } from "../KeyRing.js"
import type { ConnectionKey, ConnectionStatus } from "../Vault.js"
import type { VaultError } from "./errors.js"
import { storageError } from "./service.js"
import type { ConnectionRow, FlowRow, Store } from "./store.js"

/** A value bound to a placeholder. */
export type SqlParam = string | number | null

/** How the backend reaches its database: the rows a statement returns, or how many rows it changed. */
export interface SqlRunner {
  readonly rows: (sql: string, params: ReadonlyArray<SqlParam>) => Promise<ReadonlyArray<Record<string, unknown>>>
  readonly count: (sql: string, params: ReadonlyArray<SqlParam>) => Promise<number>
}

/** The tables, created by each driver's migration in its own dialect. */
export const CONNECTIONS = "keyway_connections"
export const FLOWS = "keyway_connection_flows"

const KEY = "issuer = $1 AND subject = $2 AND provider = $3"
const keyParams = (key: ConnectionKey): Array<SqlParam> => [key.issuer, key.subject, key.provider]

// PostgreSQL answers bigint columns as strings.
const int = (value: unknown): number => Number(value)

const connectionRow = (row: Record<string, unknown>): ConnectionRow => ({
  issuer: String(row.issuer),
  subject: String(row.subject),
  provider: String(row.provider),
  status: String(row.status) as ConnectionStatus,
  keyId: String(row.key_id),
  iv: String(row.iv),
  ciphertext: String(row.ciphertext),
  connectedAt: int(row.connected_at),
  updatedAt: int(row.updated_at),
  version: int(row.version),
  lease: row.lease === null || row.lease === undefined ? null : String(row.lease),
  leaseUntil: int(row.lease_until),
})

const flowRow = (row: Record<string, unknown>): FlowRow => ({
  referenceHash: String(row.reference_hash),
  keyId: String(row.key_id),
  iv: String(row.iv),
  ciphertext: String(row.ciphertext),
  expiresAt: int(row.expires_at),
})

// Code-unit order, the same whatever the database's collation.
const byProvider = (a: ConnectionRow, b: ConnectionRow) =>
  a.provider < b.provider ? -1 : a.provider > b.provider ? 1 : 0

/** The {@link Store} over a database reached through `runner`. */
export const sqlStore = (runner: SqlRunner): Store => {
  const rows = (operation: string, sql: string, params: ReadonlyArray<SqlParam>) =>
    Effect.tryPromise({
      try: () => runner.rows(sql, params),
      catch: (error): VaultError => storageError(operation, error),
    })
  const count = (operation: string, sql: string, params: ReadonlyArray<SqlParam>) =>
    Effect.tryPromise({
      try: () => runner.count(sql, params),
      catch: (error): VaultError => storageError(operation, error),
    })
  const sealedParams = (sealed: Sealed): Array<SqlParam> => [sealed.keyId, sealed.iv, sealed.ciphertext]
  return {
    getConnection: (key) =>
      rows("get", `SELECT * FROM ${CONNECTIONS} WHERE ${KEY}`, keyParams(key)).pipe(
        Effect.map((found) => (found[0] === undefined ? undefined : connectionRow(found[0]))),
      ),
    listConnections: (issuer, subject) =>
      rows("list", `SELECT * FROM ${CONNECTIONS} WHERE issuer = $1 AND subject = $2`, [issuer, subject]).pipe(
        Effect.map((found) => found.map(connectionRow).sort(byProvider)),
      ),
    connectionsNotUnder: (keyId) =>
      rows("reencrypt", `SELECT * FROM ${CONNECTIONS} WHERE key_id <> $1`, [keyId]).pipe(
        Effect.map((found) => found.map(connectionRow)),
      ),
    putConnection: (key, sealed, now) =>
      Effect.asVoid(
        count(
          "put",
          `INSERT INTO ${CONNECTIONS}
             (issuer, subject, provider, status, key_id, iv, ciphertext, connected_at, updated_at, version, lease, lease_until)
           VALUES ($1, $2, $3, 'connected', $4, $5, $6, $7, $7, 1, NULL, 0)
           ON CONFLICT (issuer, subject, provider) DO UPDATE SET
             status = 'connected', key_id = excluded.key_id, iv = excluded.iv, ciphertext = excluded.ciphertext,
             connected_at = excluded.connected_at, updated_at = excluded.updated_at,
             version = ${CONNECTIONS}.version + 1, lease = NULL, lease_until = 0`,
          [...keyParams(key), ...sealedParams(sealed), now],
        ),
      ),
    claim: (key, version, lease, leaseUntil, now) =>
      count(
        "token",
        `UPDATE ${CONNECTIONS} SET lease = $5, lease_until = $6
         WHERE ${KEY} AND version = $4 AND status = 'connected' AND (lease IS NULL OR lease_until <= $7)`,
        [...keyParams(key), version, lease, leaseUntil, now],
      ).pipe(Effect.map((changed) => changed === 1)),
    finish: (key, lease, sealed, status, now) =>
      (sealed === undefined
        ? count(
            "token",
            `UPDATE ${CONNECTIONS} SET status = $5, updated_at = $6, version = version + 1, lease = NULL, lease_until = 0
             WHERE ${KEY} AND lease = $4`,
            [...keyParams(key), lease, status, now],
          )
        : count(
            "token",
            `UPDATE ${CONNECTIONS} SET key_id = $5, iv = $6, ciphertext = $7, status = $8, updated_at = $9,
               version = version + 1, lease = NULL, lease_until = 0
             WHERE ${KEY} AND lease = $4`,
            [...keyParams(key), lease, ...sealedParams(sealed), status, now],
          )
      ).pipe(Effect.map((changed) => changed === 1)),
    release: (key, lease) =>
      Effect.asVoid(
        count("token", `UPDATE ${CONNECTIONS} SET lease = NULL, lease_until = 0 WHERE ${KEY} AND lease = $4`, [
          ...keyParams(key),
          lease,
        ]),
      ),
    reseal: (key, version, sealed) =>
      count(
        "reencrypt",
        `UPDATE ${CONNECTIONS} SET key_id = $5, iv = $6, ciphertext = $7, version = version + 1
         WHERE ${KEY} AND version = $4`,
        [...keyParams(key), version, ...sealedParams(sealed)],
      ).pipe(Effect.map((changed) => changed === 1)),
    markBroken: (key, now) =>
      Effect.asVoid(
        count(
          "markBroken",
          `UPDATE ${CONNECTIONS} SET status = 'broken', updated_at = $4, version = version + 1, lease = NULL,
             lease_until = 0
           WHERE ${KEY}`,
          [...keyParams(key), now],
        ),
      ),
    deleteConnection: (key) =>
      count("delete", `DELETE FROM ${CONNECTIONS} WHERE ${KEY}`, keyParams(key)).pipe(
        Effect.map((changed) => changed > 0),
      ),
    putFlow: (row) =>
      Effect.asVoid(
        count(
          "putFlow",
          `INSERT INTO ${FLOWS} (reference_hash, key_id, iv, ciphertext, expires_at, taken)
           VALUES ($1, $2, $3, $4, $5, 0)
           ON CONFLICT (reference_hash) DO UPDATE SET key_id = excluded.key_id, iv = excluded.iv,
             ciphertext = excluded.ciphertext, expires_at = excluded.expires_at, taken = 0`,
          [row.referenceHash, ...sealedParams(row), row.expiresAt],
        ),
      ),
    getFlow: (referenceHash, now) =>
      rows(
        "getFlow",
        `SELECT reference_hash, key_id, iv, ciphertext, expires_at FROM ${FLOWS}
         WHERE reference_hash = $1 AND taken = 0 AND expires_at > $2`,
        [referenceHash, now],
      ).pipe(Effect.map((found) => (found[0] === undefined ? undefined : flowRow(found[0])))),
    takeFlow: (referenceHash, now) =>
      rows(
        "takeFlow",
        `UPDATE ${FLOWS} SET taken = 1 WHERE reference_hash = $1 AND taken = 0 AND expires_at > $2
         RETURNING reference_hash, key_id, iv, ciphertext, expires_at`,
        [referenceHash, now],
      ).pipe(Effect.map((found) => (found[0] === undefined ? undefined : flowRow(found[0])))),
    purgeFlows: (now) => count("purgeFlows", `DELETE FROM ${FLOWS} WHERE taken = 1 OR expires_at <= $1`, [now]),
    flowsNotUnder: (keyId) =>
      rows("reencrypt", `SELECT reference_hash, key_id, iv, ciphertext, expires_at FROM ${FLOWS} WHERE key_id <> $1`, [
        keyId,
      ]).pipe(Effect.map((found) => found.map(flowRow))),
    resealFlow: (referenceHash, previous, sealed) =>
      count(
        "reencrypt",
        `UPDATE ${FLOWS} SET key_id = $4, iv = $5, ciphertext = $6 WHERE reference_hash = $1 AND key_id = $2 AND iv = $3`,
        [referenceHash, previous.keyId, previous.iv, ...sealedParams(sealed)],
      ).pipe(Effect.map((changed) => changed === 1)),
  }
}
