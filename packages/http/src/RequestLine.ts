/**
 * What a server checks of a request before any handler runs: the `Host` field, the request-target and the method.
 * Pure functions over strings, so every runtime's bridge applies the same rules.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-3 | RFC 9112 §3 (request line)}
 * @module
 */

/**
 * The methods of RFC 9110 §9 and PATCH (RFC 5789): the ones a Keyway server knows. Anything else is answered
 * 501 Not Implemented.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-9 | RFC 9110 §9}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.6.2 | RFC 9110 §15.6.2 (501)}
 */
export const KNOWN_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "DELETE",
  "CONNECT",
  "OPTIONS",
  "TRACE",
  "PATCH",
])

/**
 * Methods a Web `Request` cannot carry (the Fetch Standard's forbidden methods): no Web handler serves them, so they
 * are answered 405 before one is called.
 *
 * @see {@link https://fetch.spec.whatwg.org/#forbidden-method | Fetch Standard (forbidden method)}
 */
export const FORBIDDEN_METHODS: ReadonlySet<string> = new Set(["CONNECT", "TRACE", "TRACK"])

/**
 * How a server treats a request method: `"forbidden"` (405, a Web `Request` cannot carry it), `"unknown"` (501) or
 * `"handled"` (the handler decides, answering 405 with `Allow` for a method its resource does not serve).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.5.6 | RFC 9110 §15.5.6 (405)}
 */
export const classifyMethod = (method: string): "forbidden" | "unknown" | "handled" => {
  const upper = method.toUpperCase()
  if (FORBIDDEN_METHODS.has(upper)) return "forbidden"
  return KNOWN_METHODS.has(method) ? "handled" : "unknown"
}

// RFC 3986 §3.2.2 host (IP-literal or reg-name; an IPv4 address is a reg-name here) and §3.2.3 port.
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+)(?::(\d{0,5}))?$/

/**
 * Whether a `Host` field value is `uri-host [ ":" port ]`: not empty, no userinfo, no path, query or fragment, no
 * unbracketed IPv6 address, a port of at most 65535, and a host that a URL parser accepts. A server answers 400 to
 * a request whose `Host` fails this (RFC 9112 §3.2).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-3.2 | RFC 9112 §3.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc3986.html#section-3.2.2 | RFC 3986 §3.2.2}
 */
export const isValidHost = (value: string): boolean => {
  const match = HOST.exec(value)
  if (match === null) return false
  const port = match[1]
  if (port !== undefined && port !== "" && Number(port) > 65535) return false
  return URL.canParse(`http://${value}/`)
}

/**
 * A request-target reduced to what a server routes on, or a reason to answer 400.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-3.2 | RFC 9112 §3.2}
 */
export type Target =
  | { readonly _tag: "Path"; readonly path: string }
  | { readonly _tag: "Asterisk" }
  | { readonly _tag: "Invalid"; readonly reason: string }

const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//

/**
 * Parses a request-target: origin-form (`/path?query`) is kept as it is; absolute-form (`http://host/path`) gives
 * its path and query (its authority replaces Host, and a server with a configured public URL ignores both);
 * asterisk-form (`*`) is only for a server-wide `OPTIONS`. Anything else, or a target whose URL does not parse, is
 * invalid. The fragment is dropped (a client never sends one; RFC 9112 §3.2 has none).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-3.2 | RFC 9112 §3.2}
 */
export const parseTarget = (target: string): Target => {
  if (target.charCodeAt(0) === 47 /* / */) {
    // Kept as a path ("//host/x" too: a server appends it to its origin, never resolves it as a reference).
    const hash = target.indexOf("#")
    return { _tag: "Path", path: hash === -1 ? target : target.slice(0, hash) }
  }
  if (target === "*") return { _tag: "Asterisk" }
  if (ABSOLUTE.test(target)) {
    let url: URL
    try {
      url = new URL(target)
    } catch {
      return { _tag: "Invalid", reason: "the request-target is not a valid absolute URI" }
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      return { _tag: "Invalid", reason: "the request-target's scheme must be http or https" }
    }
    if (url.username !== "" || url.password !== "") {
      return { _tag: "Invalid", reason: "the request-target must not contain userinfo" }
    }
    return { _tag: "Path", path: `${url.pathname}${url.search}` }
  }
  return { _tag: "Invalid", reason: "the request-target must be an absolute path starting with / or an absolute URI" }
}
