import { randomBytes } from "node:crypto"

/**
 * The user code alphabet of RFC 8628 §6.1: 20 consonants, no vowels (no words) and no letters easily confused.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-6.1 | RFC 8628 §6.1}
 */
export const ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"

/** The length of a user code (8 characters: 20^8 ≈ 2^34.6 values). */
export const LENGTH = 8

// The largest multiple of the alphabet's size a byte can hold: bytes at or above it are drawn again, so every letter
// is equally likely.
const LIMIT = 256 - (256 % ALPHABET.length)

/** A new user code, 8 characters of {@link ALPHABET}, uniformly random, without the dash. */
export const generate = (): string => {
  let code = ""
  while (code.length < LENGTH) {
    for (const byte of randomBytes(LENGTH * 2)) {
      if (byte < LIMIT && code.length < LENGTH) code += ALPHABET[byte % ALPHABET.length]
    }
  }
  return code
}

/** The code as shown to the user: `XXXX-XXXX`. */
export const display = (code: string): string => `${code.slice(0, 4)}-${code.slice(4)}`

/**
 * The code a user typed, as stored: upper case, without dashes and white space (RFC 8628 §6.1: case-insensitive,
 * punctuation ignored); undefined for anything that cannot be a user code.
 */
export const normalize = (entered: string): string | undefined => {
  const code = entered.toUpperCase().replace(/[\s-]/g, "")
  if (code.length !== LENGTH) return undefined
  for (const c of code) if (!ALPHABET.includes(c)) return undefined
  return code
}
