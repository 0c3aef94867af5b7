import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

/** A fresh, unguessable value (256 bits by default), base64url without padding. */
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString("base64url")

/** SHA-256 of a UTF-8 string, base64url. */
export const sha256 = (value: string): string => createHash("sha256").update(value, "utf8").digest("base64url")

/** HMAC-SHA-256 of a UTF-8 string under `key`, base64url. */
export const hmac = (key: Uint8Array, value: string): string =>
  createHmac("sha256", key).update(value, "utf8").digest("base64url")

/**
 * Constant-time string equality. Both sides are hashed first so the comparison time depends on neither the
 * position of the first difference nor the lengths.
 */
export const safeEqual = (a: string, b: string): boolean =>
  timingSafeEqual(createHash("sha256").update(a, "utf8").digest(), createHash("sha256").update(b, "utf8").digest())
