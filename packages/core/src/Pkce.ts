/**
 * Proof Key for Code Exchange with the S256 method.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html | RFC 7636}
 * @module
 */
import { base64UrlEncode, timingSafeEqual } from "./Bytes.js"

/**
 * The characters a code verifier may contain: `[A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~"`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.1 | RFC 7636 §4.1}
 */
export const VERIFIER_PATTERN: RegExp = /^[A-Za-z0-9\-._~]{43,128}$/

/** The only challenge method Keyway sends or accepts. */
export const METHOD = "S256" as const

const UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"

/**
 * Whether a string is a syntactically valid code verifier (43 to 128 unreserved characters).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.1 | RFC 7636 §4.1}
 */
export const isVerifier = (value: string): boolean => VERIFIER_PATTERN.test(value)

/**
 * A fresh code verifier drawn from the platform's cryptographic random source.
 *
 * Characters are taken from the 66 unreserved characters by rejection sampling, so each is equally likely.
 *
 * @param length - 43 to 128 characters; 64 by default (about 386 bits of entropy).
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.1 | RFC 7636 §4.1}
 */
export const generateVerifier = (length = 64): string => {
  if (!Number.isInteger(length) || length < 43 || length > 128) {
    throw new RangeError(`PKCE code verifier length must be an integer from 43 to 128, got ${length}`)
  }
  let out = ""
  // 66 * 3 = 198: bytes at or above 198 are rejected to keep the distribution uniform.
  while (out.length < length) {
    const bytes = crypto.getRandomValues(new Uint8Array(length * 2))
    for (const byte of bytes) {
      if (byte < 198 && out.length < length) out += UNRESERVED[byte % 66]
    }
  }
  return out
}

/**
 * The S256 code challenge of a verifier: `BASE64URL(SHA256(ASCII(code_verifier)))`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.2 | RFC 7636 §4.2}
 */
export const challengeS256 = async (verifier: string): Promise<string> => {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))
  return base64UrlEncode(new Uint8Array(digest))
}

/**
 * A verifier together with its S256 challenge, ready for an authorization request.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.3 | RFC 7636 §4.3}
 */
export interface Pair {
  readonly verifier: string
  readonly challenge: string
  readonly method: typeof METHOD
}

/**
 * Generates a verifier and its S256 challenge.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.1 | RFC 7636 §4.1-4.3}
 */
export const generate = async (length = 64): Promise<Pair> => {
  const verifier = generateVerifier(length)
  return { verifier, challenge: await challengeS256(verifier), method: METHOD }
}

/**
 * Server-side check that a verifier matches the challenge recorded with the authorization code.
 * Malformed verifiers never match; the comparison of challenges takes constant time.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#section-4.6 | RFC 7636 §4.6}
 */
export const verifyS256 = async (verifier: string, challenge: string): Promise<boolean> => {
  if (!isVerifier(verifier)) return false
  return timingSafeEqual(await challengeS256(verifier), challenge)
}
