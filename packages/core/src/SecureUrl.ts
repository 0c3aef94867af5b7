/**
 * Where plain `http` is acceptable: the one definition of a loopback host, the secure-or-loopback URL policy with the
 * development switch as a parameter, and the loopback redirect URIs whose port may vary.
 *
 * Loopback is 127.0.0.0/8, `::1`, and the name `localhost` with its subdomains. The names count because RFC 6761
 * §6.3 reserves the whole `localhost.` domain for loopback (and W3C Secure Contexts treats `*.localhost` as
 * trustworthy); `foo.localhost` carries the same guarantee as `localhost` itself, so taking one without the other
 * would add no safety. IPv4-mapped forms (`::ffff:127.0.0.1`) do not count: whether they reach 127.0.0.1 depends on
 * the socket's dual-stack setting. Redirect URIs whose port may vary are the stricter rule of RFC 8252 §7.3: loopback
 * IP literals over http, never a name (RFC 8252 §8.3).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-8.3 | RFC 8252 §8.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6761.html#section-6.3 | RFC 6761 §6.3}
 * @module
 */

const IPV4_LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/

/** A URL's hostname, or a bare host (a listen address such as `::1`), in the WHATWG URL's normal form. */
const normalHost = (host: string): string | undefined => {
  const bracketed = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host
  return URL.parse(`http://${bracketed}/`)?.hostname
}

/**
 * Whether a host is a loopback IP literal: an address in 127.0.0.0/8, or `::1` (bracketed or not). Other spellings
 * the URL parser accepts (`127.1`, `[0:0:0:0:0:0:0:1]`) count as what they normalise to.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html#section-2.2.2 | RFC 6890 §2.2.2 (127.0.0.0/8)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html#section-2.2.3 | RFC 6890 §2.2.3 (::1/128)}
 */
export const isLoopbackIp = (host: string): boolean => {
  const normal = normalHost(host)
  return normal !== undefined && (normal === "[::1]" || IPV4_LOOPBACK.test(normal))
}

/**
 * Whether a host is loopback: a loopback IP literal ({@link isLoopbackIp}), `localhost`, or a subdomain of
 * `localhost`. Takes a URL's `hostname` or a bare listen address.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6761.html#section-6.3 | RFC 6761 §6.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-8.3 | RFC 8252 §8.3}
 */
export const isLoopbackHost = (host: string): boolean => {
  const normal = normalHost(host)
  if (normal === undefined) return false
  return normal === "localhost" || normal.endsWith(".localhost") || isLoopbackIp(normal)
}

/**
 * How a URL is reached: `https`, `http-loopback` (http to a loopback host), `http` (to any other host), or `other`
 * (another scheme, or not a URL).
 */
export type Transport = "https" | "http-loopback" | "http" | "other"

const parse = (url: string | URL): URL | null => (typeof url === "string" ? URL.parse(url) : url)

/**
 * The {@link Transport} of a URL.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-8.3 | RFC 8252 §8.3}
 */
export const transportOf = (url: string | URL): Transport => {
  const parsed = parse(url)
  if (parsed === null) return "other"
  if (parsed.protocol === "https:") return "https"
  if (parsed.protocol === "http:") return isLoopbackHost(parsed.hostname) ? "http-loopback" : "http"
  return "other"
}

/** Which plain-http URLs a {@link isAllowed} check accepts besides https. */
export interface Policy {
  /** Accept http on a loopback host. */
  readonly httpLoopback: boolean
  /** Accept http on any host (a development switch; implies `httpLoopback`). Default false. */
  readonly httpAnyHost?: boolean
}

/**
 * Whether a URL may be used under a policy: https always; http on a loopback host when `policy.httpLoopback`; http
 * anywhere when `policy.httpAnyHost`; never another scheme or a string that is not a URL.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9700.html#section-2.6 | RFC 9700 §2.6 (TLS for authorization server endpoints)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-8.3 | RFC 8252 §8.3}
 */
export const isAllowed = (url: string | URL, policy: Policy): boolean => {
  switch (transportOf(url)) {
    case "https":
      return true
    case "http-loopback":
      return policy.httpLoopback || policy.httpAnyHost === true
    case "http":
      return policy.httpAnyHost === true
    case "other":
      return false
  }
}

/** `http://<loopback IP>[:port]<rest>` as written, with the port taken out; undefined for anything else. */
const withoutLoopbackPort = (uri: string): string | undefined => {
  // The raw string, so that no URL normalisation (case, dot segments, default ports) can create a match.
  const match = /^http:\/\/(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])(?::\d{1,5})?([/?#].*)?$/.exec(uri)
  if (match === null || !isLoopbackIp(match[1] as string)) return undefined
  return `http://${match[1]}${match[2] ?? ""}`
}

/**
 * Whether a redirect URI is an http loopback IP literal, whose port may vary at request time.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 */
export const isLoopbackRedirectUri = (uri: string): boolean => withoutLoopbackPort(uri) !== undefined

/**
 * The registered redirect URI a requested one matches, or undefined: exact string comparison, except that for http
 * loopback IP literals the port is ignored. `localhost` gets no such allowance (RFC 8252 §8.3: NOT RECOMMENDED).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9700.html#section-4.1.3 | RFC 9700 §4.1.3 (exact matching)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 */
export const matchRedirectUri = (requested: string, registered: ReadonlyArray<string>): string | undefined => {
  for (const candidate of registered) if (candidate === requested) return candidate
  const stripped = withoutLoopbackPort(requested)
  if (stripped === undefined) return undefined
  for (const candidate of registered) if (withoutLoopbackPort(candidate) === stripped) return candidate
  return undefined
}
