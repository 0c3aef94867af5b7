/**
 * Redaction for the transcript: every credential the demo sees (tokens, codes, verifiers, client secrets, session
 * cookies, CSRF tokens, the password) is registered here, shown only as a short description, and scrubbed from every
 * line before it is printed.
 *
 * @module
 */
import { createHash } from "node:crypto"

const JWT = /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/u
/** Anything shaped like a compact JWS, wherever it appears in a line. */
const JWT_ANYWHERE = /eyJ[\w-]{4,}\.[\w-]{4,}\.[\w-]+/gu

/** A short, irreversible name for a high-entropy secret, so a reader can tell two tokens apart (e.g. rotation). */
export const fingerprint = (secret: string): string =>
  createHash("sha256").update(secret, "utf8").digest("hex").slice(0, 8)

/**
 * How a secret is shown: a JWT keeps its first 10 characters (the base64url of `{"alg":…`, the same for every
 * token), anything else shows nothing of itself; both show their length and a fingerprint. Low-entropy secrets
 * (passwords) get no fingerprint, which could be brute-forced.
 */
export const describe = (secret: string, options: { readonly lowEntropy?: boolean } = {}): string => {
  if (options.lowEntropy === true) return "[redacted]"
  const prefix = JWT.test(secret) ? `${secret.slice(0, 10)}…` : ""
  return `${prefix}[redacted, ${secret.length} chars, fp ${fingerprint(secret)}]`
}

/** The known secrets of one run, and the scrubbing of output lines. */
export class Redactor {
  private readonly known = new Map<string, string>()

  /** Registers a secret (empty and very short values are ignored: they carry nothing and would match everywhere). */
  add(secret: string | null | undefined, options: { readonly lowEntropy?: boolean } = {}): string {
    if (secret === null || secret === undefined || secret.length < 4) return secret ?? ""
    const existing = this.known.get(secret)
    if (existing !== undefined) return existing
    const shown = describe(secret, options)
    this.known.set(secret, shown)
    // The URL-encoded and base64 forms reach the wire too (query strings, Basic credentials).
    const encoded = encodeURIComponent(secret)
    if (encoded !== secret) this.known.set(encoded, shown)
    return shown
  }

  /** How a registered (or new) secret is shown. */
  show(secret: string, options: { readonly lowEntropy?: boolean } = {}): string {
    return this.add(secret, options)
  }

  /** Every registered secret (test hook: the transcript must contain none of them). */
  secrets(): ReadonlyArray<string> {
    return [...this.known.keys()]
  }

  /** Replaces every registered secret in a text, longest first, then any JWT-shaped string left over. */
  scrub(text: string): string {
    let out = text
    const secrets = [...this.known.keys()].sort((a, b) => b.length - a.length)
    for (const secret of secrets) {
      if (out.includes(secret)) out = out.split(secret).join(this.known.get(secret) ?? "[redacted]")
    }
    return out.replace(JWT_ANYWHERE, (jwt) => describe(jwt))
  }
}

/** JSON members whose values are credentials (RFC 6749 §5.1, RFC 7591 §3.2.1, OIDC). */
export const SECRET_JSON_MEMBERS: ReadonlySet<string> = new Set([
  "access_token",
  "refresh_token",
  "id_token",
  "client_secret",
  "registration_access_token",
  "device_code",
])

/** Form and query parameters whose values are credentials. */
export const SECRET_PARAMETERS: ReadonlySet<string> = new Set([
  "code",
  "code_verifier",
  "refresh_token",
  "client_secret",
  "client_assertion",
  "assertion",
  "subject_token",
  "csrf_token",
  "password",
  "token",
  "access_token",
  "device_code",
])

/** Registers the credentials found in a JSON value (any depth). */
export const collectJson = (redactor: Redactor, value: unknown): void => {
  if (Array.isArray(value)) {
    for (const item of value) collectJson(redactor, item)
    return
  }
  if (typeof value !== "object" || value === null) return
  for (const [key, member] of Object.entries(value)) {
    if (typeof member === "string" && SECRET_JSON_MEMBERS.has(key)) redactor.add(member)
    else collectJson(redactor, member)
  }
}

/** Registers the credentials found in form or query parameters. */
export const collectParams = (redactor: Redactor, params: URLSearchParams): void => {
  for (const [key, value] of params) {
    if (SECRET_PARAMETERS.has(key)) redactor.add(value, { lowEntropy: key === "password" })
  }
}

/** Registers the credentials found in request or response headers (Authorization, Cookie, Set-Cookie). */
export const collectHeaders = (redactor: Redactor, headers: Headers): void => {
  const authorization = headers.get("authorization")
  if (authorization !== null) {
    const [scheme, credentials] = authorization.split(/\s+/u, 2)
    if (credentials !== undefined) {
      redactor.add(credentials)
      if (scheme?.toLowerCase() === "basic") {
        const decoded = Buffer.from(credentials, "base64").toString("utf8")
        const colon = decoded.indexOf(":")
        if (colon >= 0) redactor.add(decodeURIComponent(decoded.slice(colon + 1)))
      }
    }
  }
  const cookies = [...(headers.get("cookie")?.split(/;\s*/u) ?? []), ...headers.getSetCookie()]
  for (const cookie of cookies) {
    const [pair] = cookie.split(";")
    const eq = pair?.indexOf("=") ?? -1
    if (pair !== undefined && eq > 0) redactor.add(pair.slice(eq + 1).trim())
  }
}
