import { SecureUrl } from "@keyway/core"

const parse = (uri: string): URL | undefined => URL.parse(uri) ?? undefined

/** Schemes that never name an application, whatever their shape. */
const FORBIDDEN_SCHEMES = ["javascript", "data", "file", "vbscript", "blob", "about", "ftp", "ws", "wss"]

/** A private-use scheme in reverse domain name form (`com.example.app`), as RFC 8252 §7.1 asks of native apps. */
const REVERSE_DOMAIN_SCHEME = /^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+$/

/**
 * Whether the redirect only ever reaches the user's own machine: a loopback host, or a private-use scheme that any
 * application on the machine may claim (RFC 8252 §8.6). The consent page warns about such clients, and a client ID
 * metadata document whose redirect URIs are all of this kind is flagged the same way.
 */
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
 * Why a redirect URI cannot be registered; each caller words it for its own document:
 * - `not-absolute`: not an absolute URI;
 * - `fragment`: has a fragment (OAuth 2.1 §2.3.1);
 * - `http-not-loopback`: http on a host that is not loopback (RFC 8252 §7.3);
 * - `scheme`: neither https, http on loopback, nor a reverse-domain private-use scheme (RFC 8252 §7.1); `forbidden`
 *   when it is a scheme that never names an application (`javascript`, `data`, ...).
 */
export type RedirectUriProblem =
  | { readonly kind: "not-absolute" }
  | { readonly kind: "fragment" }
  | { readonly kind: "http-not-loopback" }
  | { readonly kind: "scheme"; readonly scheme: string; readonly forbidden: boolean }

/**
 * The one rule for redirect URIs that a client registers, dynamically or in a client ID metadata document: https,
 * http on a loopback host, or a reverse-domain private-use scheme; never a fragment.
 */
export const redirectUriProblem = (uri: string): RedirectUriProblem | undefined => {
  const url = parse(uri)
  if (url === undefined) return { kind: "not-absolute" }
  if (url.hash !== "" || uri.includes("#")) return { kind: "fragment" }
  if (url.protocol === "https:") return undefined
  if (url.protocol === "http:")
    return SecureUrl.isLoopbackHost(url.hostname) ? undefined : { kind: "http-not-loopback" }
  const scheme = url.protocol.slice(0, -1)
  const forbidden = FORBIDDEN_SCHEMES.includes(scheme)
  return !forbidden && REVERSE_DOMAIN_SCHEME.test(scheme) ? undefined : { kind: "scheme", scheme, forbidden }
}

/** Whether a (registrable) redirect URI uses a private-use scheme, which only native applications may register. */
export const isPrivateUseScheme = (uri: string): boolean => {
  const url = parse(uri)
  return url !== undefined && url.protocol !== "https:" && url.protocol !== "http:"
}

/** How the shared redirect URI rule reads in an error (registration, administration). */
export const redirectProblemText = (uri: string, problem: RedirectUriProblem): string => {
  switch (problem.kind) {
    case "not-absolute":
      return `${uri} is not an absolute URI`
    case "fragment":
      return `${uri} must not have a fragment`
    case "http-not-loopback":
      return `${uri} uses http on a host that is not loopback`
    case "scheme":
      return problem.forbidden
        ? `${uri} uses the forbidden scheme ${problem.scheme}`
        : `${uri} uses a private-use scheme that is not a reverse domain name (RFC 8252 §7.1)`
  }
}
