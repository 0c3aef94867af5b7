import { createHmac, hash, timingSafeEqual } from "node:crypto"
import { randomToken } from "../../internal/crypto.js"
import type { Client, ClientMetadata, Consent } from "../Storage.js"

/**
 * The stored form of a server-generated secret (code, refresh token, client secret, registration access token):
 * SHA-256, base64url. Unsalted on purpose: the values carry 256 bits of entropy, and the hash doubles as the lookup key.
 */
export const hashSecret = (raw: string): string => hash("sha256", raw, "base64url")

/**
 * The successor of a rotated refresh token: HMAC-SHA-256 keyed with the presented token over the salt stored with it
 * at rotation. Only whoever holds the presented token (and the store's salt) can derive it again, so the store keeps
 * nothing that yields a usable token, yet a retried rotation returns the same successor.
 */
export const successorOf = (token: string, salt: string): string =>
  createHmac("sha256", token).update(`keyway refresh-token successor\0${salt}`, "utf8").digest("base64url")

/** A fresh salt for {@link successorOf}. */
export const newSalt = (): string => randomToken(16)

/** Whether `presented` hashes to `storedHash`, compared in constant time. */
export const matchesHash = (presented: string, storedHash: string | undefined): boolean => {
  const actual = Buffer.from(hashSecret(presented), "utf8")
  // A missing hash is compared against a same-length dummy so the work does not depend on whether a secret exists.
  const expected = Buffer.from(storedHash ?? "", "utf8")
  const ok = expected.length === actual.length && timingSafeEqual(expected, actual)
  if (expected.length !== actual.length) timingSafeEqual(actual, actual)
  return ok && storedHash !== undefined
}

/** Scope tokens as a sorted set (RFC 6749 §3.3: space-separated, order-insensitive). */
export const normaliseScopes = (scopes: ReadonlyArray<string>): ReadonlyArray<string> =>
  [...new Set(scopes.filter((s) => s.length > 0))].sort()

/** `T` with every property allowed to be `undefined`. */
export type Loose<T> = { [K in keyof T]: T[K] | undefined }

/** A copy of `value` without the keys whose value is `undefined` (for `exactOptionalPropertyTypes` records). */
export const defined = <T extends object>(value: Loose<T>): T => {
  // A loop rather than Object.entries/fromEntries: every row the stores decode passes through here.
  const out: Record<string, unknown> = {}
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key]
    if (v !== undefined && Object.hasOwn(value, key)) out[key] = v
  }
  return out as T
}

/** The metadata part of a client (anything else the caller passed, such as raw secrets, is dropped). */
export const clientMetadata = (c: ClientMetadata): ClientMetadata =>
  defined<ClientMetadata>({
    client_id: c.client_id,
    client_secret_expires_at: c.client_secret_expires_at,
    client_id_issued_at: c.client_id_issued_at,
    redirect_uris: [...c.redirect_uris],
    grant_types: [...c.grant_types],
    response_types: [...c.response_types],
    token_endpoint_auth_method: c.token_endpoint_auth_method,
    client_name: c.client_name,
    client_uri: c.client_uri,
    logo_uri: c.logo_uri,
    tos_uri: c.tos_uri,
    policy_uri: c.policy_uri,
    contacts: c.contacts === undefined ? undefined : [...c.contacts],
    scope: c.scope,
    jwks: c.jwks === undefined ? undefined : structuredClone(c.jwks),
    jwks_uri: c.jwks_uri,
    application_type: c.application_type,
    software_id: c.software_id,
    software_version: c.software_version,
    extension_metadata: c.extension_metadata === undefined ? undefined : structuredClone(c.extension_metadata),
    origin: c.origin,
    expires_at: c.expires_at,
  })

// Every member of a stored client's metadata: a record, so that a member added to ClientMetadata must be added here.
const CLIENT_MEMBERS: { readonly [K in keyof Required<ClientMetadata>]: true } = {
  client_id: true,
  client_secret_expires_at: true,
  client_id_issued_at: true,
  redirect_uris: true,
  grant_types: true,
  response_types: true,
  token_endpoint_auth_method: true,
  client_name: true,
  client_uri: true,
  logo_uri: true,
  tos_uri: true,
  policy_uri: true,
  contacts: true,
  scope: true,
  jwks: true,
  jwks_uri: true,
  application_type: true,
  software_id: true,
  software_version: true,
  extension_metadata: true,
  origin: true,
  expires_at: true,
}

/** Whether `name` is a member of the client metadata the server keeps itself (not an extension's). */
export const isClientMember = (name: string): boolean => Object.hasOwn(CLIENT_MEMBERS, name)

/**
 * The stored metadata of a client as this version reads it. Records written before extension fields had a member of
 * their own kept them beside the server's members; those are moved into `extension_metadata` (a field already there
 * wins), so the client reads back as it was registered.
 */
export const storedMetadata = (stored: Record<string, unknown>): Record<string, unknown> => {
  const moved = Object.keys(stored).filter((name) => !isClientMember(name))
  if (moved.length === 0) return stored
  const out: Record<string, unknown> = {}
  const fields: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(stored)) {
    if (isClientMember(name)) out[name] = value
    else fields[name] = value
  }
  out.extension_metadata = { ...fields, ...(stored.extension_metadata as Record<string, unknown> | undefined) }
  return out
}

/** A client record from its metadata and the hashes to keep. */
export const clientRecord = (
  metadata: ClientMetadata,
  secretHash: string | undefined,
  registrationTokenHash: string | undefined,
): Client =>
  defined<Client>({
    ...clientMetadata(metadata),
    client_secret_hash: secretHash,
    registration_access_token_hash: registrationTokenHash,
  })

/** The hash to keep after an update: absent keeps `current`, `null` removes, a string replaces. */
export const updatedHash = (change: string | null | undefined, current: string | undefined): string | undefined =>
  change === undefined ? current : change === null ? undefined : hashSecret(change)

/** Whether a secret with this `client_secret_expires_at` (0 = never) is still valid at `now`. */
export const secretLive = (expiresAt: number, now: number): boolean => expiresAt === 0 || expiresAt > now

/** The consent that results from adding `scopes` to what is already remembered. */
export const mergeConsent = (previous: Consent | undefined, next: Consent): Consent => ({
  subject: next.subject,
  client_id: next.client_id,
  resource: next.resource,
  scopes: normaliseScopes([...(previous?.scopes ?? []), ...next.scopes]),
  granted_at: previous === undefined ? next.granted_at : Math.max(previous.granted_at, next.granted_at),
})

/** Whether `consent` includes every one of `scopes`. */
export const covers = (consent: Consent | undefined, scopes: ReadonlyArray<string>): boolean => {
  if (consent === undefined) return false
  const have = new Set(consent.scopes)
  return scopes.every((s) => s.length === 0 || have.has(s))
}
