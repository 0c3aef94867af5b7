/**
 * Server-issued DPoP nonces (RFC 9449 §8, §9), stateless and rotating: a nonce is the time slot it was issued in and
 * an HMAC of that slot under a secret, so every instance with the same secret issues and accepts the same nonces, and
 * no state is kept. A nonce is accepted in its slot and the next one.
 */
import { base64url } from "jose"

/** Issues and checks nonces. */
export interface Nonces {
  /** The nonce of the current slot. */
  readonly current: (nowSeconds: number) => Promise<string>
  /** Whether a nonce is of the current or the previous slot. */
  readonly valid: (nonce: string, nowSeconds: number) => Promise<boolean>
}

/**
 * Nonces keyed by `secret` (any length; it is hashed into an HMAC key), rotating every `period` seconds. Without a
 * secret, a random one for this process.
 */
export const makeNonces = (secret: string | undefined, period: number, context: string): Nonces => {
  const key: Promise<CryptoKey> = (async () => {
    const material =
      secret === undefined
        ? crypto.getRandomValues(new Uint8Array(32))
        : new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${context}\0${secret}`)))
    return crypto.subtle.importKey("raw", material, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"])
  })()
  const mac = async (slot: number): Promise<string> =>
    base64url
      .encode(
        new Uint8Array(await crypto.subtle.sign("HMAC", await key, new TextEncoder().encode(`${context}:${slot}`))),
      )
      .slice(0, 22)
  const slotOf = (now: number) => Math.floor(now / period)
  return {
    current: async (now) => {
      const slot = slotOf(now)
      return `${slot.toString(36)}.${await mac(slot)}`
    },
    valid: async (nonce, now) => {
      const dot = nonce.indexOf(".")
      if (dot <= 0) return false
      const slot = Number.parseInt(nonce.slice(0, dot), 36)
      const current = slotOf(now)
      if (!Number.isSafeInteger(slot) || (slot !== current && slot !== current - 1)) return false
      const expected = await mac(slot)
      const given = nonce.slice(dot + 1)
      // Constant time in the length of the MAC.
      let diff = expected.length ^ given.length
      for (let i = 0; i < expected.length; i++) diff |= expected.charCodeAt(i) ^ (given.charCodeAt(i) || 0)
      return diff === 0
    },
  }
}
