const encoder = new TextEncoder()

/** base64url without padding (RFC 4648 §5). */
export const base64UrlEncode = (bytes: Uint8Array): string => {
  let binary = ""
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}

/**
 * Compares two strings in time that depends only on their lengths, never on where they differ.
 * Works wherever TextEncoder exists (no node:crypto), which is what core promises.
 */
export const timingSafeEqualString = (a: string, b: string): boolean => {
  const left = encoder.encode(a)
  const right = encoder.encode(b)
  const length = Math.max(left.length, right.length)
  let diff = left.length ^ right.length
  for (let i = 0; i < length; i++) diff |= (left[i] ?? 0) ^ (right[i] ?? 0)
  return diff === 0
}
