import { createHash, createHmac, hash, randomFillSync, timingSafeEqual } from "node:crypto"

// Random bytes are drawn from the CSPRNG in blocks and handed out once each: one `randomFillSync` per block instead of
// one per value (a call costs far more than the bytes it returns: several microseconds per token request).
const POOL_BYTES = 4096
const pool = Buffer.alloc(POOL_BYTES)
let taken = POOL_BYTES

/** A fresh, unguessable value (256 bits by default), base64url without padding. */
export const randomToken = (bytes = 32): string => {
  if (bytes > POOL_BYTES) return randomFillSync(Buffer.alloc(bytes)).toString("base64url")
  if (taken + bytes > POOL_BYTES) {
    randomFillSync(pool)
    taken = 0
  }
  const value = pool.toString("base64url", taken, taken + bytes)
  // Handed out once: the bytes are overwritten so nothing in the pool yields a value already given.
  pool.fill(0, taken, taken + bytes)
  taken += bytes
  return value
}

/** SHA-256 of a UTF-8 string, base64url (one-shot: no hash object per value). */
export const sha256 = (value: string): string => hash("sha256", value, "base64url")

/** HMAC-SHA-256 of a UTF-8 string under `key`, base64url. */
export const hmac = (key: Uint8Array, value: string): string =>
  createHmac("sha256", key).update(value, "utf8").digest("base64url")

/**
 * Constant-time string equality. Both sides are hashed first so the comparison time depends on neither the
 * position of the first difference nor the lengths.
 */
export const safeEqual = (a: string, b: string): boolean =>
  timingSafeEqual(createHash("sha256").update(a, "utf8").digest(), createHash("sha256").update(b, "utf8").digest())
