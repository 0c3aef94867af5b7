/** Row decoding and parameters shared by the SQL backends (SQLite and PostgreSQL). */
import type {
  AuthorizationCode,
  ClientMetadata,
  Grant,
  NewClient,
  RefreshToken,
  RefreshTokenStatus,
} from "../Storage.js"
import { clientMetadata, defined, hashSecret } from "./common.js"

/** A result row as either driver returns it. */
export type Row = Record<string, unknown>

export const str = (row: Row, key: string): string => {
  const v = row[key]
  if (typeof v !== "string") throw new Error(`column ${key}: expected text`)
  return v
}
// PostgreSQL's int8 arrives as a decimal string (it may exceed 2^53); our values are seconds, well within range.
export const num = (row: Row, key: string): number => {
  const v = row[key]
  if (typeof v === "number") return v
  if ((typeof v === "string" && /^-?\d+$/.test(v)) || typeof v === "bigint") return Number(v)
  throw new Error(`column ${key}: expected integer`)
}
export const optStr = (row: Row, key: string): string | undefined => (row[key] == null ? undefined : str(row, key))
export const optNum = (row: Row, key: string): number | undefined => (row[key] == null ? undefined : num(row, key))
export const opt = (v: string | number | undefined): string | number | null => v ?? null

export const clientParams = (c: ClientMetadata, secretHash: string | undefined, tokenHash: string | undefined) => [
  c.client_id,
  c.origin,
  opt(c.expires_at),
  c.client_secret_expires_at,
  opt(secretHash),
  opt(tokenHash),
  JSON.stringify(clientMetadata(c)),
]

export const newHashes = (c: NewClient) =>
  [
    c.client_secret === undefined ? undefined : hashSecret(c.client_secret),
    c.registration_access_token === undefined ? undefined : hashSecret(c.registration_access_token),
  ] as const

export const codeFromRow = (row: Row): AuthorizationCode =>
  defined<AuthorizationCode>({
    grant_id: str(row, "grant_id"),
    client_id: str(row, "client_id"),
    redirect_uri: str(row, "redirect_uri"),
    code_challenge: str(row, "code_challenge"),
    code_challenge_method: str(row, "code_challenge_method") as "S256",
    resource: str(row, "resource"),
    scope: str(row, "scope"),
    subject: str(row, "subject"),
    auth_time: num(row, "auth_time"),
    issued_at: num(row, "issued_at"),
    expires_at: num(row, "expires_at"),
    nonce: optStr(row, "nonce"),
  })

export const grantFromRow = (row: Row): Grant =>
  defined<Grant>({
    grant_id: str(row, "grant_id"),
    client_id: str(row, "client_id"),
    subject: str(row, "subject"),
    resource: str(row, "resource"),
    scope: str(row, "scope"),
    auth_time: num(row, "auth_time"),
    created_at: num(row, "created_at"),
    revoked_at: optNum(row, "revoked_at"),
  })

export const refreshFromRow = (row: Row): RefreshToken =>
  defined<RefreshToken>({
    family_id: str(row, "family_id"),
    grant_id: str(row, "grant_id"),
    client_id: str(row, "client_id"),
    subject: str(row, "subject"),
    resource: str(row, "resource"),
    scope: str(row, "scope"),
    issued_at: num(row, "issued_at"),
    expires_at: optNum(row, "expires_at"),
  })

export const refreshStatus = (row: Row, now: number): RefreshTokenStatus => {
  const token = refreshFromRow(row)
  const active =
    row.rotated_at === null &&
    row.family_revoked_at === null &&
    (token.expires_at === undefined || token.expires_at > now)
  return { ...token, active }
}
