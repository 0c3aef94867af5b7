/**
 * The vault's key ring: AES-256-GCM keys with IDs, one of them current. Every record is sealed under the current key
 * with a fresh 96-bit IV and additional authenticated data naming the row it belongs to, and names its key, so that
 * older keys keep opening older records during a rotation and a ciphertext moved to another row does not open.
 * Web Crypto only: this module runs wherever the main entry does.
 *
 * Environment format ({@link fromEnv}, variable `KEYWAY_VAULT_KEYS`): comma-separated `id:key` entries, `key` being
 * 32 random bytes as base64url without padding, the first entry current, e.g.
 * `2025-06:q3J...,2025-01:Zm9...`. To rotate, put a new entry first, run the vault's `reencrypt`, then drop the old
 * entry.
 *
 * @see {@link https://nvlpubs.nist.gov/nistpubs/Legacy/SP/nistspecialpublication800-38d.pdf | NIST SP 800-38D (GCM)}
 * @see {@link https://w3c.github.io/webcrypto/#aes-gcm | Web Crypto AES-GCM}
 * @module
 */
import { Bytes } from "@keyway/core"
import { Effect, Schema } from "effect"
import { VaultError } from "./vault/errors.js"

/** The environment variable {@link fromEnv} reads by default. */
export const ENV_VARIABLE = "KEYWAY_VAULT_KEYS"

/** One key: its ID (stored beside every record it seals) and 32 bytes as base64url without padding. */
export interface KeyConfig {
  readonly id: string
  readonly key: string
}

/** The keys of a ring and which one seals new records (the first when `current` is absent). */
export interface KeyRingConfig {
  readonly keys: ReadonlyArray<KeyConfig>
  readonly current?: string
}

/** The key ring's configuration is unusable; the message says what to fix and never contains key material. */
export class InvalidKeyRing extends Schema.TaggedError<InvalidKeyRing>()("InvalidKeyRing", {
  message: Schema.String,
}) {}

/** A sealed record as stored: the key's ID, the IV and the ciphertext with its tag, both base64url. */
export interface Sealed {
  readonly keyId: string
  readonly iv: string
  readonly ciphertext: string
}

/** A validated key ring. */
export interface KeyRing {
  /** The ID of the key that seals new records. */
  readonly current: string
  /** Every key ID in the ring, the current one first. */
  readonly ids: ReadonlyArray<string>
  /** Encrypts `plaintext` under the current key, bound to `aad` (the row it is stored in). */
  readonly seal: (plaintext: string, aad: string) => Effect.Effect<Sealed, VaultError>
  /**
   * Decrypts a record sealed for `aad`: `VaultError` `unknown-key` when its key is not in the ring, `decrypt` when the
   * key, the ciphertext or the row do not match.
   */
  readonly open: (sealed: Sealed, aad: string) => Effect.Effect<string, VaultError>
}

const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/
const BASE64URL = /^[A-Za-z0-9_-]*$/
const KEY_BYTES = 32
const IV_BYTES = 12
const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** base64url without padding to bytes; undefined when `text` is not that. */
const decodeBase64Url = (text: string): Uint8Array<ArrayBuffer> | undefined => {
  if (!BASE64URL.test(text) || text.length % 4 === 1) return undefined
  const binary = atob(
    text
      .replace(/-/g, "+")
      .replace(/_/g, "/")
      .padEnd(Math.ceil(text.length / 4) * 4, "="),
  )
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

/** 32 fresh random bytes as base64url: a new key for {@link KeyConfig}. */
export const generateKey = (): string => Bytes.randomBase64Url(KEY_BYTES)

/**
 * Validates `config` and returns the ring; throws {@link InvalidKeyRing} naming the entry to fix (an ID that is empty,
 * repeated or not `[A-Za-z0-9._-]`, a key that is not base64url or not 32 bytes, a current key not in the ring).
 */
export const make = (config: KeyRingConfig): KeyRing => {
  if (config.keys.length === 0)
    throw new InvalidKeyRing({
      message: `the vault key ring has no key: give keys, or set ${ENV_VARIABLE} to id:key with key 32 random bytes as base64url`,
    })
  const raw = new Map<string, Uint8Array<ArrayBuffer>>()
  for (const { id, key } of config.keys) {
    if (!KEY_ID.test(id))
      throw new InvalidKeyRing({ message: `vault key ID "${id}" must be 1 to 64 characters of A-Z a-z 0-9 . _ -` })
    if (raw.has(id)) throw new InvalidKeyRing({ message: `vault key ID "${id}" appears twice in the key ring` })
    const bytes = decodeBase64Url(key)
    if (bytes === undefined)
      throw new InvalidKeyRing({
        message: `vault key "${id}" is not base64url without padding (A-Z a-z 0-9 - _)`,
      })
    if (bytes.length !== KEY_BYTES)
      throw new InvalidKeyRing({
        message: `vault key "${id}" must be ${KEY_BYTES} bytes (AES-256) as base64url; it decodes to ${bytes.length} bytes`,
      })
    raw.set(id, bytes)
  }
  const current = config.current ?? (config.keys[0] as KeyConfig).id
  if (!raw.has(current))
    throw new InvalidKeyRing({ message: `the current vault key "${current}" is not one of the ring's keys` })
  const ids = [current, ...[...raw.keys()].filter((id) => id !== current)]
  const imported = new Map<string, Promise<CryptoKey>>()
  const cryptoKey = (id: string, bytes: Uint8Array<ArrayBuffer>) => {
    let key = imported.get(id)
    if (key === undefined) {
      key = crypto.subtle.importKey("raw", bytes, { name: "AES-GCM" }, false, ["encrypt", "decrypt"])
      imported.set(id, key)
    }
    return key
  }
  const currentBytes = raw.get(current) as Uint8Array<ArrayBuffer>
  return {
    current,
    ids,
    seal: (plaintext, aad) =>
      Effect.tryPromise({
        try: async () => {
          const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES))
          const ciphertext = await crypto.subtle.encrypt(
            { name: "AES-GCM", iv, additionalData: encoder.encode(aad), tagLength: 128 },
            await cryptoKey(current, currentBytes),
            encoder.encode(plaintext),
          )
          return {
            keyId: current,
            iv: Bytes.base64UrlEncode(iv),
            ciphertext: Bytes.base64UrlEncode(new Uint8Array(ciphertext)),
          }
        },
        catch: (error) =>
          new VaultError({
            reason: "storage",
            message: `the vault could not encrypt under key "${current}": ${error instanceof Error ? error.message : String(error)}`,
          }),
      }),
    open: (sealed, aad) => {
      const bytes = raw.get(sealed.keyId)
      if (bytes === undefined)
        return Effect.fail(
          new VaultError({
            reason: "unknown-key",
            message: `the record is encrypted under vault key "${sealed.keyId}", which is not in the key ring (${ids.join(", ")}): add that key back to read it`,
          }),
        )
      const failed = new VaultError({
        reason: "decrypt",
        message: `the record does not decrypt under vault key "${sealed.keyId}": that ID names another key than the one that encrypted it, or the record was altered or moved from another row`,
      })
      const iv = decodeBase64Url(sealed.iv)
      const ciphertext = decodeBase64Url(sealed.ciphertext)
      if (iv === undefined || iv.length !== IV_BYTES || ciphertext === undefined) return Effect.fail(failed)
      return Effect.tryPromise({
        try: async () =>
          decoder.decode(
            await crypto.subtle.decrypt(
              { name: "AES-GCM", iv, additionalData: encoder.encode(aad), tagLength: 128 },
              await cryptoKey(sealed.keyId, bytes),
              ciphertext,
            ),
          ),
        catch: () => failed,
      })
    },
  }
}

/**
 * Parses the environment format `id1:key1,id2:key2` (the first current; spaces around entries ignored) into a
 * configuration; throws {@link InvalidKeyRing} naming the entry by position, never echoing key material.
 */
export const parse = (text: string, source = ENV_VARIABLE): KeyRingConfig => {
  const entries = text
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "")
  const keys = entries.map((entry, index) => {
    const colon = entry.indexOf(":")
    if (colon <= 0)
      throw new InvalidKeyRing({
        message: `${source} entry ${index + 1} must be id:key (key: 32 random bytes as base64url)`,
      })
    return { id: entry.slice(0, colon), key: entry.slice(colon + 1) }
  })
  if (keys.length === 0)
    throw new InvalidKeyRing({
      message: `${source} has no key: set it to id:key with key 32 random bytes as base64url`,
    })
  return { keys }
}

/**
 * The key ring from an environment variable (`KEYWAY_VAULT_KEYS` unless `name` says otherwise), in the format of
 * {@link parse}; pass `process.env` on Node.js. Throws {@link InvalidKeyRing} when it is unset or malformed.
 */
export const fromEnv = (env: Readonly<Record<string, string | undefined>>, name = ENV_VARIABLE): KeyRing => {
  const value = env[name]
  if (value === undefined || value.trim() === "")
    throw new InvalidKeyRing({
      message: `${name} is not set: set it to id:key with key 32 random bytes as base64url (the first entry is current)`,
    })
  return make(parse(value, name))
}
