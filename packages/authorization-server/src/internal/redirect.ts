import { SecureUrl } from "@keyway/core"

const parse = (uri: string): URL | undefined => {
  try {
    return new URL(uri)
  } catch {
    return undefined
  }
}

/** Whether the redirect only ever reaches the user's own machine (consent shows an extra warning). */
export const isLocalhostOnly = (uri: string): boolean => {
  const url = parse(uri)
  if (url === undefined) return false
  if (url.protocol !== "http:" && url.protocol !== "https:") return true
  return SecureUrl.isLoopbackHost(url.hostname)
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
    return SecureUrl.isLoopbackHost(url.hostname) ? undefined : `${uri} uses http on a host that is not loopback`
  }
  const scheme = url.protocol.slice(0, -1)
  if (["javascript", "data", "file", "vbscript", "blob", "about", "ftp", "ws", "wss"].includes(scheme)) {
    return `${uri} uses the forbidden scheme ${scheme}`
  }
  if (!scheme.includes(".")) return `${uri} uses a private-use scheme that is not a reverse domain name (RFC 8252 §7.1)`
  return undefined
}
