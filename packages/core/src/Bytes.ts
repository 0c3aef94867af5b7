/**
 * Byte helpers with Web-standard APIs only (`TextEncoder`, `btoa`, `crypto.getRandomValues`), so that every face of
 * Keyway that runs in browsers, workers, Deno or Bun needs no `Buffer` and no `node:crypto`: base64url without
 * padding, random values for `state` and similar, and constant-time comparison of secrets.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc4648.html#section-5 | RFC 4648 §5}
 * @module
 */

const encoder = new TextEncoder()

/**
 * base64url without padding.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc4648.html#section-5 | RFC 4648 §5}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7636.html#appendix-A | RFC 7636 Appendix A (without padding)}
 */
export const base64UrlEncode = (bytes: Uint8Array): string => {
  let binary = ""
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}

/**
 * `bytes` values from the platform's cryptographic random source, base64url-encoded: 32 bytes (256 bits) by default,
 * what an unguessable `state` needs.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.12 | OAuth 2.1 §7.12 (CSRF protection)}
 * @see {@link https://w3c.github.io/webcrypto/#Crypto-method-getRandomValues | Web Crypto getRandomValues}
 */
export const randomBase64Url = (bytes = 32): string => base64UrlEncode(crypto.getRandomValues(new Uint8Array(bytes)))

/**
 * Compares two strings (as UTF-8) in time that depends only on their lengths, never on where they differ.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-10.10 | RFC 6749 §10.10}
 */
export const timingSafeEqual = (a: string, b: string): boolean => {
  const left = encoder.encode(a)
  const right = encoder.encode(b)
  const length = Math.max(left.length, right.length)
  let diff = left.length ^ right.length
  for (let i = 0; i < length; i++) diff |= (left[i] ?? 0) ^ (right[i] ?? 0)
  return diff === 0
}
