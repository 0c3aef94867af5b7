const LOOPBACK_IPS = new Set(["127.0.0.1", "[::1]"])

const parse = (uri: string): URL | undefined => {
  try {
    return new URL(uri)
  } catch {
    return undefined
  }
}

/** `http://127.0.0.1...` or `http://[::1]...`: the port of these may vary (RFC 8252 §7.3). */
export const isLoopbackIpRedirect = (uri: string): boolean => {
  const url = parse(uri)
  return url !== undefined && url.protocol === "http:" && LOOPBACK_IPS.has(url.hostname)
}

/** Whether the redirect only ever reaches the user's own machine (consent shows an extra warning). */
export const isLocalhostOnly = (uri: string): boolean => {
  const url = parse(uri)
  if (url === undefined) return false
  if (url.protocol !== "http:" && url.protocol !== "https:") return true
  return LOOPBACK_IPS.has(url.hostname) || url.hostname === "localhost" || url.hostname.endsWith(".localhost")
}

/**
 * Exact redirect URI matching (OAuth 2.1 §2.3.1: simple string comparison), except that for loopback IP literals
 * over http the port is ignored (RFC 8252 §7.3). Returns the registered value that matched.
 */
export const matchRedirectUri = (requested: string, registered: ReadonlyArray<string>): string | undefined => {
  for (const candidate of registered) if (candidate === requested) return candidate
  if (!isLoopbackIpRedirect(requested)) return undefined
  const withoutPort = (uri: string): string | undefined => {
    // Compare the raw strings with the port removed so no URL normalisation (case, dot segments) can create a match.
    const match = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::\d{1,5})?([/?#].*)?$/.exec(uri)
    return match === null ? undefined : `http://${match[1]}${match[2] ?? ""}`
  }
  const stripped = withoutPort(requested)
  if (stripped === undefined) return undefined
  for (const candidate of registered) {
    if (isLoopbackIpRedirect(candidate) && withoutPort(candidate) === stripped) return candidate
  }
  return undefined
}

/** What a consent page and CSP `form-action` show for a redirect URI: its host, and the origin (or scheme) to allow. */
export const describeRedirect = (uri: string): { readonly host: string; readonly origin: string } => {
  const url = parse(uri)
  if (url === undefined) return { host: uri, origin: "'none'" }
  if (url.protocol === "http:" || url.protocol === "https:") return { host: url.host, origin: url.origin }
  return { host: url.protocol + (url.host === "" ? url.pathname.split("/")[0] : url.host), origin: url.protocol }
}

/**
 * Registration-time rule for redirect URIs: https, http on a loopback host, or a private-use scheme (reverse domain
 * name, RFC 8252 §7.1); never a fragment.
 */
export const checkRedirectUriForRegistration = (uri: string): string | undefined => {
  const url = parse(uri)
  if (url === undefined) return `${uri} is not an absolute URI`
  if (url.hash !== "" || uri.includes("#")) return `${uri} must not have a fragment`
  if (url.protocol === "https:") return undefined
  if (url.protocol === "http:") {
    return LOOPBACK_IPS.has(url.hostname) || url.hostname === "localhost"
      ? undefined
      : `${uri} uses http on a host that is not loopback`
  }
  const scheme = url.protocol.slice(0, -1)
  if (["javascript", "data", "file", "vbscript", "blob", "about", "ftp", "ws", "wss"].includes(scheme)) {
    return `${uri} uses the forbidden scheme ${scheme}`
  }
  if (!scheme.includes(".")) return `${uri} uses a private-use scheme that is not a reverse domain name (RFC 8252 §7.1)`
  return undefined
}
