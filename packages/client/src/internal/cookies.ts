/**
 * The cookie jar of the headless user agents: name and value per host, kept for the agent's lifetime so that a
 * later authorization (a step-up) finds the login session of an earlier one, as a browser would. Paths and
 * attributes other than expiry are not modelled: the jar only ever talks to the authorization server.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6265.html#section-5.3 | RFC 6265 §5.3}
 */

/** Cookies per host. */
export interface Jar {
  /** The `Cookie` header for a URL, if any cookie is held for its host. */
  readonly header: (url: URL) => string | undefined
  /** Stores the `Set-Cookie` lines of a response from a URL; an expired cookie is removed. */
  readonly store: (url: URL, setCookies: ReadonlyArray<string>, nowMillis: number) => void
}

const expired = (attributes: ReadonlyArray<string>, nowMillis: number): boolean => {
  for (const attribute of attributes) {
    const eq = attribute.indexOf("=")
    const name = (eq < 0 ? attribute : attribute.slice(0, eq)).trim().toLowerCase()
    const value = eq < 0 ? "" : attribute.slice(eq + 1).trim()
    // Max-Age wins over Expires (RFC 6265 §5.3 step 3).
    if (name === "max-age" && /^-?\d+$/u.test(value)) return Number(value) <= 0
  }
  for (const attribute of attributes) {
    const eq = attribute.indexOf("=")
    if (eq < 0 || attribute.slice(0, eq).trim().toLowerCase() !== "expires") continue
    const at = Date.parse(attribute.slice(eq + 1).trim())
    if (!Number.isNaN(at)) return at <= nowMillis
  }
  return false
}

/** An empty jar. */
export const makeJar = (): Jar => {
  const hosts = new Map<string, Map<string, string>>()
  return {
    header: (url) => {
      const cookies = hosts.get(url.host)
      if (cookies === undefined || cookies.size === 0) return undefined
      return [...cookies].map(([name, value]) => `${name}=${value}`).join("; ")
    },
    store: (url, setCookies, nowMillis) => {
      for (const line of setCookies) {
        const [pair = "", ...attributes] = line.split(";")
        const eq = pair.indexOf("=")
        if (eq <= 0) continue
        const name = pair.slice(0, eq).trim()
        const cookies = hosts.get(url.host) ?? new Map<string, string>()
        if (expired(attributes, nowMillis)) cookies.delete(name)
        else cookies.set(name, pair.slice(eq + 1).trim())
        hosts.set(url.host, cookies)
      }
    },
  }
}
