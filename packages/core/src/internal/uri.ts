/**
 * RFC 3986 character classes and normalisation steps shared by CanonicalUri and WellKnown.
 * Everything here works on raw strings: the WHATWG URL parser repairs input that RFC 3986 forbids,
 * so validation has to look at what the caller actually wrote.
 */

const UNRESERVED = /^[A-Za-z0-9\-._~]$/
const SUB_DELIMS = "!$&'()*+,;="
const HEX = /^[0-9A-Fa-f]{2}$/

/** RFC 3986 §2.3. */
export const isUnreserved = (c: string): boolean => UNRESERVED.test(c)

/** RFC 3986 §3.2.2 reg-name characters other than pct-encoded. */
export const isRegNameChar = (c: string): boolean => isUnreserved(c) || SUB_DELIMS.includes(c)

/** RFC 3986 §3.3 pchar / "/" other than pct-encoded. */
export const isPathChar = (c: string): boolean => isRegNameChar(c) || c === ":" || c === "@" || c === "/"

/** RFC 3986 §3.4 query characters other than pct-encoded. */
export const isQueryChar = (c: string): boolean => isPathChar(c) || c === "?"

/** The first offending index in `s` for the character class, with `%XX` triplets allowed; -1 when clean. */
export const findIllegal = (
  s: string,
  allowed: (c: string) => boolean,
): { readonly index: number; readonly badPercent: boolean } | undefined => {
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!
    if (c === "%") {
      if (!HEX.test(s.slice(i + 1, i + 3))) return { index: i, badPercent: true }
      i += 2
    } else if (!allowed(c)) {
      return { index: i, badPercent: false }
    }
  }
  return undefined
}

/**
 * RFC 3986 §6.2.2.1 and §6.2.2.2: percent-encoded unreserved characters are decoded, every other triplet gets
 * uppercase hex digits.
 */
export const normalizePercent = (s: string): string =>
  s.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => {
    const c = String.fromCharCode(Number.parseInt(hex, 16))
    return isUnreserved(c) ? c : `%${hex.toUpperCase()}`
  })

/** RFC 3986 §5.2.4 remove_dot_segments. */
export const removeDotSegments = (path: string): string => {
  let input = path
  const output: Array<string> = []
  while (input.length > 0) {
    if (input.startsWith("../")) input = input.slice(3)
    else if (input.startsWith("./")) input = input.slice(2)
    else if (input.startsWith("/./")) input = input.slice(2)
    else if (input === "/.") input = "/"
    else if (input.startsWith("/../")) {
      input = input.slice(3)
      output.pop()
    } else if (input === "/..") {
      input = "/"
      output.pop()
    } else if (input === "." || input === "..") input = ""
    else {
      const next = input.indexOf("/", input.startsWith("/") ? 1 : 0)
      const segment = next === -1 ? input : input.slice(0, next)
      output.push(segment)
      input = input.slice(segment.length)
    }
  }
  return output.join("")
}

/** The parts of an already canonical URI (no userinfo, no fragment). */
export interface Parts {
  /** `scheme://host[:port]` */
  readonly origin: string
  /** Empty or starting with "/". */
  readonly path: string
  /** Without the "?"; undefined when there is no query. */
  readonly query: string | undefined
}

/** Splits a canonical URI; only call it on output of CanonicalUri. */
export const splitCanonical = (uri: string): Parts => {
  const authorityStart = uri.indexOf("//") + 2
  const rest = uri.slice(authorityStart)
  const end = rest.search(/[/?]/)
  const origin = end === -1 ? uri : uri.slice(0, authorityStart + end)
  const tail = uri.slice(origin.length)
  const q = tail.indexOf("?")
  return q === -1
    ? { origin, path: tail, query: undefined }
    : { origin, path: tail.slice(0, q), query: tail.slice(q + 1) }
}
