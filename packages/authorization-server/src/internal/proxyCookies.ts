import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { safeEqual, sha256 } from "./crypto.js"
import { readCookie } from "./http.js"
import type { UpstreamClient } from "./upstreamClient.js"

/** A pending upstream sign-in lives this long (the MCP security best practices suggest about 10 minutes). */
export const PENDING_SECONDS = 600

/** The upstream sign-in in flight, kept in an encrypted, HttpOnly cookie bound to its `state`. */
export interface Pending {
  /** The upstream `state`. */
  readonly s: string
  /** Our PKCE verifier at the upstream. */
  readonly v: string
  /** OpenID Connect nonce, for `id_token` subjects. */
  readonly n?: string
  /** The MCP client's authorization request (query string), validated again at the callback. */
  readonly q: string
  /** Whether consent was given just now, or remembered for this browser (then its hashed key, to withdraw it). */
  readonly m: "fresh" | "remembered"
  readonly b: string
  readonly exp: number
}

/**
 * The proxy's cookies and the key sealing the pending sign-in. Without `sessionSecret` the key lives in memory (a
 * restart only abandons sign-ins in flight); with it, every instance derives the same key.
 */
export class ProxyState {
  private readonly key: Uint8Array
  readonly consentCookie: string
  private readonly pendingPrefix: string

  constructor(
    readonly secure: boolean,
    readonly upstream: UpstreamClient,
    secret?: string,
  ) {
    this.key =
      secret === undefined ? randomBytes(32) : createHash("sha256").update(`keyway.upstream-pending.${secret}`).digest()
    // __Host-: this origin only, path /, https only (MCP security best practices, consent cookie security).
    this.consentCookie = secure ? "__Host-keyway_consent" : "keyway_consent"
    this.pendingPrefix = secure ? "__Host-keyway_upstream_" : "keyway_upstream_"
  }

  private attributes(maxAge: number) {
    return `Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${this.secure ? "; Secure" : ""}`
  }

  /** One cookie per sign-in in flight, named after its state, so parallel sign-ins in one browser do not collide. */
  pendingName(state: string) {
    return `${this.pendingPrefix}${sha256(`pending.${state}`).slice(0, 16)}`
  }

  sealPending(pending: Pending): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv("aes-256-gcm", this.key, iv)
    cipher.setAAD(Buffer.from(this.pendingName(pending.s)))
    const body = Buffer.concat([cipher.update(JSON.stringify(pending), "utf8"), cipher.final()])
    const value = Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url")
    return `${this.pendingName(pending.s)}=${value}; ${this.attributes(PENDING_SECONDS)}`
  }

  openPending(request: Request, state: string): Pending | undefined {
    const name = this.pendingName(state)
    const raw = readCookie(request, name)
    if (raw === undefined) return undefined
    try {
      const bytes = Buffer.from(raw, "base64url")
      const decipher = createDecipheriv("aes-256-gcm", this.key, bytes.subarray(0, 12))
      decipher.setAAD(Buffer.from(name))
      decipher.setAuthTag(bytes.subarray(bytes.length - 16))
      const text = Buffer.concat([decipher.update(bytes.subarray(12, bytes.length - 16)), decipher.final()])
      const pending = JSON.parse(text.toString("utf8")) as Pending
      return safeEqual(pending.s, state) ? pending : undefined
    } catch {
      return undefined
    }
  }

  clearPending(state: string): string {
    return `${this.pendingName(state)}=; ${this.attributes(0)}`
  }

  consentSetCookie(value: string): string {
    return `${this.consentCookie}=${value}; ${this.attributes(this.upstream.options.consentSeconds)}`
  }
}
