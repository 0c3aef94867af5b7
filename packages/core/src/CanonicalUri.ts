/**
 * The canonical server URI: the RFC 8707 resource identifier of an MCP server, which is also the `resource` value of
 * its RFC 9728 protected resource metadata.
 *
 * Canonical form (RFC 3986 §6.2.2 syntax-based normalisation plus the MCP rules):
 * - scheme and host in lowercase; IPv6 literals compressed, in lowercase;
 * - the scheme's default port dropped (`http` and `ws` 80, `https` and `wss` 443), as is an empty port (`host:`);
 * - percent-encoded unreserved characters decoded (`%41` becomes `A`), other triplets with uppercase hex;
 * - dot segments removed;
 * - a root path (`/`) written as nothing (`https://x.com/` becomes `https://x.com`), while a trailing slash on a
 *   deeper path is kept (`https://x.com/mcp/` stays), because there it may name a different resource;
 * - the query kept as given (after percent normalisation).
 *
 * Refused: empty input, whitespace anywhere, relative references, a missing scheme or host, a fragment, userinfo,
 * a bad port, and any character RFC 3986 does not allow where it appears (non-ASCII must be percent-encoded; hosts
 * must be given in their ASCII form).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc3986.html#section-6 | RFC 3986 §6}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#canonical-server-uri | MCP: Canonical Server URI}
 * @module
 */
import type * as Brand from "effect/Brand"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import {
  findIllegal,
  isPathChar,
  isQueryChar,
  isRegNameChar,
  normalizePercent,
  removeDotSegments,
  splitCanonical,
} from "./internal/uri.js"

/**
 * A URI in canonical form, as produced by {@link parse}. Compare canonical URIs with `===`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export type CanonicalUri = string & Brand.Brand<"CanonicalUri">

/**
 * Why a value is not a canonical server URI.
 *
 * - `empty`: the value is the empty string.
 * - `not-absolute`: a relative reference (starts with `/`, `.` or `?`).
 * - `missing-scheme`: no `scheme:` prefix (such as `example.com/mcp` or `localhost:3000`).
 * - `fragment`: a `#` fragment is present, even an empty one.
 * - `userinfo`: credentials before `@` in the authority.
 * - `missing-host`: a scheme without `//host` (`urn:x`, `https:x.com`) or an empty host (`https:///mcp`).
 * - `invalid-port`: a port that is not a decimal number from 0 to 65535.
 * - `invalid-syntax`: whitespace, a character RFC 3986 does not allow where it appears, a stray `%`, or a bad host.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc3986.html#section-3 | RFC 3986 §3}
 */
export type Reason =
  | "empty"
  | "not-absolute"
  | "missing-scheme"
  | "fragment"
  | "userinfo"
  | "missing-host"
  | "invalid-port"
  | "invalid-syntax"

/** The reasons, for schemas and exhaustive tests. */
export const reasons: ReadonlyArray<Reason> = [
  "empty",
  "not-absolute",
  "missing-scheme",
  "fragment",
  "userinfo",
  "missing-host",
  "invalid-port",
  "invalid-syntax",
]

/**
 * The value is not a valid canonical server URI. `message` names the problem and, where it helps, its position.
 * Userinfo is redacted from `message` (it may hold a password); `input` keeps the value as given.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export class InvalidCanonicalUri extends Schema.TaggedError<InvalidCanonicalUri>()("InvalidCanonicalUri", {
  input: Schema.String,
  reason: Schema.Literals(reasons),
  message: Schema.String,
}) {}

const DEFAULT_PORTS: Readonly<Record<string, string>> = { http: "80", https: "443", ws: "80", wss: "443" }
/** Schemes whose hosts the WHATWG URL parser canonicalises (IPv4 forms, percent-decoding, IDNA). */
const SPECIAL_SCHEMES = new Set(["http", "https", "ws", "wss", "ftp"])
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/
const SHAPE = "scheme://host[:port][/path]"

const show = (input: string): string => JSON.stringify(input)

const fail = (input: string, reason: Reason, detail: string, shown = input) =>
  Result.fail(
    new InvalidCanonicalUri({ input, reason, message: `Invalid canonical server URI ${show(shown)}: ${detail}` }),
  )

const illegal = (input: string, component: string, offset: number, found: { index: number; badPercent: boolean }) => {
  const position = offset + found.index
  return fail(
    input,
    "invalid-syntax",
    found.badPercent
      ? `"%" at position ${position} is not followed by two hex digits`
      : `character ${show(input[position]!)} at position ${position} is not allowed in the ${component} (RFC 3986)`,
  )
}

const canonicalHost = (scheme: string, host: string): string | undefined => {
  if (host.startsWith("[") || SPECIAL_SCHEMES.has(scheme)) {
    try {
      // A dummy special scheme makes URL parse IPv6 literals and registered names the same way for every scheme.
      return new URL(`${SPECIAL_SCHEMES.has(scheme) ? scheme : "http"}://${host}/`).hostname
    } catch {
      return undefined
    }
  }
  // Decode first so "%48" lowercases to "h", then restore uppercase hex in the triplets that stay encoded.
  return normalizePercent(normalizePercent(host).toLowerCase())
}

/**
 * Validates and canonicalises without throwing.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc3986.html#section-6.2.2 | RFC 3986 §6.2.2}
 */
export const validate = (input: string): Result.Result<CanonicalUri, InvalidCanonicalUri> => {
  if (input === "") return fail(input, "empty", "the value is empty")
  const space = input.search(/\s/)
  if (space !== -1) return fail(input, "invalid-syntax", `whitespace ${show(input[space]!)} at position ${space}`)

  const schemeMatch = SCHEME.exec(input)
  if (schemeMatch === null) {
    return /^[/.?]/.test(input)
      ? fail(input, "not-absolute", `a relative reference; an absolute URI (${SHAPE}) is required`)
      : fail(input, "missing-scheme", `no scheme (expected ${SHAPE})`)
  }
  const rawScheme = schemeMatch[1]!
  const afterScheme = input.slice(rawScheme.length + 1)
  // "localhost:3000" parses as scheme "localhost"; what was meant is a host and port without a scheme.
  if (/^\d+(?:[/?#]|$)/.test(afterScheme)) return fail(input, "missing-scheme", `no scheme (expected ${SHAPE})`)

  const hash = input.indexOf("#")
  if (hash !== -1) return fail(input, "fragment", `a fragment at position ${hash} (RFC 8707 §2 forbids fragments)`)

  if (!afterScheme.startsWith("//")) {
    return fail(input, "missing-host", `no host: expected "//" after "${rawScheme}:" (${SHAPE})`)
  }
  const authorityOffset = rawScheme.length + 3
  const rest = input.slice(authorityOffset)
  const authorityEnd = rest.search(/[/?]/)
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd)
  const tail = authorityEnd === -1 ? "" : rest.slice(authorityEnd)

  const at = authority.lastIndexOf("@")
  if (at !== -1) {
    const redacted = `${input.slice(0, authorityOffset)}***${input.slice(authorityOffset + at)}`
    return fail(
      input,
      "userinfo",
      'userinfo before "@" in the authority; credentials do not belong in a resource identifier',
      redacted,
    )
  }

  let rawHost: string
  let rawPort: string | undefined
  if (authority.startsWith("[")) {
    const close = authority.indexOf("]")
    if (close === -1)
      return fail(input, "invalid-syntax", `IP literal at position ${authorityOffset} has no closing "]"`)
    rawHost = authority.slice(0, close + 1)
    const after = authority.slice(close + 1)
    if (after !== "" && !after.startsWith(":")) {
      return fail(input, "invalid-syntax", `unexpected ${show(after)} after the IP literal`)
    }
    rawPort = after === "" ? undefined : after.slice(1)
  } else {
    const colon = authority.indexOf(":")
    rawHost = colon === -1 ? authority : authority.slice(0, colon)
    rawPort = colon === -1 ? undefined : authority.slice(colon + 1)
    if (rawHost !== "") {
      const bad = findIllegal(rawHost, isRegNameChar)
      if (bad) return illegal(input, "host", authorityOffset, bad)
    }
  }
  if (rawHost === "") return fail(input, "missing-host", `the host is empty (expected ${SHAPE})`)

  let port = ""
  if (rawPort !== undefined && rawPort !== "") {
    if (!/^\d+$/.test(rawPort)) return fail(input, "invalid-port", `port ${show(rawPort)} is not a decimal number`)
    const value = Number.parseInt(rawPort, 10)
    if (value > 65535) return fail(input, "invalid-port", `port ${rawPort} is out of range (0-65535)`)
    port = String(value)
  }

  const query = tail.indexOf("?")
  const rawPath = query === -1 ? tail : tail.slice(0, query)
  const rawQuery = query === -1 ? undefined : tail.slice(query + 1)
  const tailOffset = authorityOffset + authority.length
  const badPath = findIllegal(rawPath, isPathChar)
  if (badPath) return illegal(input, "path", tailOffset, badPath)
  if (rawQuery !== undefined) {
    const badQuery = findIllegal(rawQuery, isQueryChar)
    if (badQuery) return illegal(input, "query", tailOffset + rawPath.length + 1, badQuery)
  }

  const scheme = rawScheme.toLowerCase()
  const host = canonicalHost(scheme, rawHost)
  if (host === undefined || host === "") {
    return fail(input, "invalid-syntax", `host ${show(rawHost)} is not a valid ${scheme} host`)
  }
  if (DEFAULT_PORTS[scheme] === port) port = ""
  let path = removeDotSegments(normalizePercent(rawPath))
  if (path === "/") path = ""
  const canonical = `${scheme}://${host}${port === "" ? "" : `:${port}`}${path}${
    rawQuery === undefined ? "" : `?${normalizePercent(rawQuery)}`
  }`
  return Result.succeed(canonical as CanonicalUri)
}

/**
 * Validates and canonicalises a canonical server URI.
 *
 * @throws {@link InvalidCanonicalUri} when the value is not an absolute URI with a host, or has a fragment or userinfo.
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc3986.html#section-6.2.2 | RFC 3986 §6.2.2}
 */
export const parse = (input: string): CanonicalUri => {
  const result = validate(input)
  if (Result.isFailure(result)) throw result.failure
  return result.success
}

/**
 * {@link validate} as an Effect.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export const decode = (input: string): Effect.Effect<CanonicalUri, InvalidCanonicalUri> =>
  Effect.suspend(() => Effect.fromResult(validate(input)))

/**
 * Whether the value is a valid canonical server URI (in any accepted spelling, not only the canonical one).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export const isValid = (input: string): boolean => Result.isSuccess(validate(input))

/**
 * Whether two URIs identify the same resource after canonicalisation; false when either is invalid.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc3986.html#section-6.2 | RFC 3986 §6.2}
 */
export const equals = (a: string, b: string): boolean => {
  const left = validate(a)
  const right = validate(b)
  return Result.isSuccess(left) && Result.isSuccess(right) && left.success === right.success
}

/**
 * `scheme://host[:port]` of a URI, in canonical form (default port dropped).
 *
 * @throws {@link InvalidCanonicalUri} when the value is not a valid canonical server URI.
 * @see {@link https://www.rfc-editor.org/rfc/rfc3986.html#section-3.2 | RFC 3986 §3.2}
 */
export const origin = (uri: string): string => splitCanonical(parse(uri)).origin
