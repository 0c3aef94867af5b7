import { createHash, randomBytes } from "node:crypto"
import { Effect } from "effect"
import { nowSeconds } from "./clock.js"
import { hmac, randomToken, safeEqual } from "./crypto.js"
import { readCookie } from "./http.js"

/** The browser session: an id (CSRF tokens are bound to it) and, after login, the user. */
export interface Session {
  readonly sid: string
  readonly subject?: string
  readonly displayName?: string
  readonly authTime?: number
  /** Seconds since the epoch. */
  readonly exp: number
}

/**
 * Stateless sessions in an HMAC-signed cookie. Without a configured secret the key lives in memory, so a restart
 * signs everybody out (a login, nothing else) and instances behind one issuer do not read each other's sessions;
 * with `sessionSecret` every instance derives the same key.
 */
export class Sessions {
  private readonly key: Uint8Array
  readonly cookieName: string

  constructor(
    private readonly secure: boolean,
    private readonly ttl: number,
    secret?: string,
  ) {
    this.key = secret === undefined ? randomBytes(32) : createHash("sha256").update(`keyway.session.${secret}`).digest()
    // The __Host- prefix pins the cookie to this origin, path / and https; browsers refuse it over http.
    this.cookieName = secure ? "__Host-keyway_session" : "keyway_session"
  }

  /** The request's session, if its cookie is genuine and has not expired at the time of Effect's `Clock`. */
  read(request: Request): Effect.Effect<Session | undefined> {
    return Effect.map(nowSeconds, (now) => this.decode(request, now))
  }

  private decode(request: Request, now: number): Session | undefined {
    const raw = readCookie(request, this.cookieName)
    if (raw === undefined) return undefined
    const dot = raw.lastIndexOf(".")
    if (dot < 0) return undefined
    const payload = raw.slice(0, dot)
    if (!safeEqual(raw.slice(dot + 1), hmac(this.key, `session.${payload}`))) return undefined
    try {
      const session = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Session
      if (typeof session.sid !== "string" || typeof session.exp !== "number") return undefined
      return session.exp > now ? session : undefined
    } catch {
      return undefined
    }
  }

  /** A fresh session (new id, so a login never keeps an id that existed before it), from the time of the `Clock`. */
  create(user?: { readonly subject: string; readonly displayName: string }): Effect.Effect<Session> {
    return Effect.map(nowSeconds, (now) => ({
      sid: randomToken(18),
      exp: now + this.ttl,
      ...(user === undefined ? {} : { subject: user.subject, displayName: user.displayName, authTime: now }),
    }))
  }

  cookie(session: Session): string {
    const payload = Buffer.from(JSON.stringify(session), "utf8").toString("base64url")
    const value = `${payload}.${hmac(this.key, `session.${payload}`)}`
    return `${this.cookieName}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${this.ttl}${this.secure ? "; Secure" : ""}`
  }

  csrfToken(session: Session): string {
    return hmac(this.key, `csrf.${session.sid}`)
  }

  checkCsrf(session: Session | undefined, token: string | undefined): boolean {
    if (session === undefined || token === undefined) return false
    return safeEqual(token, this.csrfToken(session))
  }
}
