import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import * as KeyRing from "../src/KeyRing.js"
import { VaultError } from "../src/vault/errors.js"

const thrown = (f: () => unknown): KeyRing.InvalidKeyRing => {
  try {
    f()
  } catch (error) {
    expect(error).toBeInstanceOf(KeyRing.InvalidKeyRing)
    return error as KeyRing.InvalidKeyRing
  }
  throw new Error("expected InvalidKeyRing")
}

// 32 bytes whose base64url begins with "-" (0xfb 0xef ...), and 16 bytes.
const dashKey = `-${"A".repeat(42)}`
const shortKey = "A".repeat(22)

describe("KeyRing.make", () => {
  it.each([
    [
      { keys: [] },
      `the vault key ring has no key: give keys, or set KEYWAY_VAULT_KEYS to id:key with key 32 random bytes as base64url`,
    ],
    [{ keys: [{ id: "a b", key: dashKey }] }, `vault key ID "a b" must be 1 to 64 characters of A-Z a-z 0-9 . _ -`],
    [
      { keys: [{ id: "k", key: shortKey }] },
      `vault key "k" must be 32 bytes (AES-256) as base64url; it decodes to 16 bytes`,
    ],
    [
      { keys: [{ id: "k", key: `${"A".repeat(42)}=` }] },
      `vault key "k" is not base64url without padding (A-Z a-z 0-9 - _)`,
    ],
    [
      { keys: [{ id: "k", key: `${"A".repeat(41)}+` }] },
      `vault key "k" is not base64url without padding (A-Z a-z 0-9 - _)`,
    ],
    [
      {
        keys: [
          { id: "k", key: dashKey },
          { id: "k", key: dashKey },
        ],
      },
      `vault key ID "k" appears twice in the key ring`,
    ],
    [{ keys: [{ id: "k", key: dashKey }], current: "j" }, `the current vault key "j" is not one of the ring's keys`],
  ])("refuses %j", (config, message) => {
    expect(thrown(() => KeyRing.make(config)).message).toBe(message)
  })

  it("takes the first key as current unless told, and lists it first", () => {
    const ring = KeyRing.make({
      keys: [
        { id: "-old", key: dashKey },
        { id: "new", key: KeyRing.generateKey() },
      ],
      current: "new",
    })
    expect([ring.current, ring.ids]).toEqual(["new", ["new", "-old"]])
    expect(KeyRing.make({ keys: [{ id: "-old", key: dashKey }] }).current).toBe("-old")
  })
})

describe("KeyRing.fromEnv", () => {
  it("reads id:key entries, the first current", () => {
    const second = KeyRing.generateKey()
    const ring = KeyRing.fromEnv({ KEYWAY_VAULT_KEYS: ` -k2:${dashKey} , k1:${second},` })
    expect([ring.current, ring.ids]).toEqual(["-k2", ["-k2", "k1"]])
  })

  it.each([
    [
      {},
      "KEYWAY_VAULT_KEYS is not set: set it to id:key with key 32 random bytes as base64url (the first entry is current)",
    ],
    [{ KEYWAY_VAULT_KEYS: "k1" }, "KEYWAY_VAULT_KEYS entry 1 must be id:key (key: 32 random bytes as base64url)"],
    [
      { KEYWAY_VAULT_KEYS: `k1:${dashKey},:${dashKey}` },
      "KEYWAY_VAULT_KEYS entry 2 must be id:key (key: 32 random bytes as base64url)",
    ],
    [
      { KEYWAY_VAULT_KEYS: " , " },
      "KEYWAY_VAULT_KEYS has no key: set it to id:key with key 32 random bytes as base64url",
    ],
    [
      { KEYWAY_VAULT_KEYS: `k1:${shortKey}` },
      `vault key "k1" must be 32 bytes (AES-256) as base64url; it decodes to 16 bytes`,
    ],
  ])("refuses %j", (env, message) => {
    const error = thrown(() => KeyRing.fromEnv(env))
    expect(error.message).toBe(message)
    expect(error.message).not.toContain(shortKey)
  })
})

describe("seal and open", () => {
  const ring = KeyRing.make({ keys: [{ id: "-k", key: dashKey }] })
  const aad = '["row",1]'

  it("seals with a fresh 96-bit IV and opens for the same row only", async () => {
    const one = await Effect.runPromise(ring.seal("secret-value", aad))
    const two = await Effect.runPromise(ring.seal("secret-value", aad))
    expect(one.keyId).toBe("-k")
    expect(one.iv).toHaveLength(16)
    expect(one.iv).not.toBe(two.iv)
    expect(one.ciphertext).not.toBe(two.ciphertext)
    expect(one.ciphertext).not.toContain("secret")
    expect(await Effect.runPromise(ring.open(one, aad))).toBe("secret-value")
    const moved = await Effect.runPromise(Effect.exit(ring.open(one, '["row",2]')))
    const tampered = await Effect.runPromise(
      Effect.exit(ring.open({ ...one, ciphertext: `${one.ciphertext.slice(0, -2)}AA` }, aad)),
    )
    const message =
      'the record does not decrypt under vault key "-k": that ID names another key than the one that encrypted it, or the record was altered or moved from another row'
    for (const exit of [moved, tampered]) {
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? exit.cause.reasons[0] : undefined
      const failure = error !== undefined && "error" in error ? error.error : undefined
      expect(failure).toBeInstanceOf(VaultError)
      expect([(failure as VaultError).reason, (failure as VaultError).message]).toEqual(["decrypt", message])
    }
  })
})
