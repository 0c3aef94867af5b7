/**
 * `WWW-Authenticate` challenges: parsing and formatting per the RFC 9110 grammar, and typed access to the Bearer
 * parameters of RFC 6750 and RFC 9728.
 *
 * ```
 * WWW-Authenticate = #challenge
 * challenge   = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
 * auth-param  = token BWS "=" BWS ( token / quoted-string )
 * ```
 *
 * Parsing is tolerant where RFC 9110 §5.6.1 asks recipients to be (empty list elements, optional whitespace around
 * commas, tabs where a space is expected) and strict elsewhere: a parameter name that appears twice in one challenge
 * (compared case-insensitively) makes the whole header malformed, since the two values cannot both be believed.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.6.1 | RFC 9110 §11.6.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-5.1 | RFC 9728 §5.1}
 * @module
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"

/**
 * One challenge. `scheme` is kept as written (compare it case-insensitively); parameter names are lower-cased by
 * {@link parse}. A challenge carries either `token68` or `params`, never both (`params` is then empty).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.6.1 | RFC 9110 §11.6.1}
 */
export interface Challenge {
  readonly scheme: string
  readonly token68?: string
  readonly params: Readonly<Record<string, string>>
}

/**
 * A header value that does not follow the challenge grammar, or a challenge that cannot be written as one.
 * `position` is the 0-based offset in `input` where the problem was found; when several header lines were parsed,
 * `input` is the lines joined with `", "` (the combined field value of RFC 9110 §5.3).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.6.1 | RFC 9110 §11.6.1}
 */
export class MalformedChallenge extends Schema.TaggedError<MalformedChallenge>()("MalformedChallenge", {
  input: Schema.String,
  position: Schema.Number,
  message: Schema.String,
}) {}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const TOKEN_AT = /[!#$%&'*+\-.^_`|~0-9A-Za-z]+/y
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/
const TOKEN68_AT = /[A-Za-z0-9\-._~+/]+=*/y

/**
 * Whether a string is an RFC 9110 token (`1*tchar`), the syntax of auth-schemes and parameter names.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-5.6.2 | RFC 9110 §5.6.2}
 */
export const isToken = (s: string): boolean => TOKEN.test(s)

/**
 * Whether a string is a token68, the single-value form of a challenge (`Basic`, `Negotiate`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.2 | RFC 9110 §11.2}
 */
export const isToken68 = (s: string): boolean => TOKEN68.test(s)

const codePoint = (c: string): string => `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`
const describe = (c: string): string => (c >= "\x21" && c <= "\x7e" ? JSON.stringify(c) : codePoint(c))

/** qdtext of RFC 9110 §5.6.4: HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text. */
const isQdText = (c: string): boolean => {
  const n = c.charCodeAt(0)
  return (
    n === 0x09 ||
    n === 0x20 ||
    n === 0x21 ||
    (n >= 0x23 && n <= 0x5b) ||
    (n >= 0x5d && n <= 0x7e) ||
    (n >= 0x80 && n <= 0xff)
  )
}

/** What may follow a backslash in a quoted-pair: HTAB / SP / VCHAR / obs-text. */
const isQuotable = (c: string): boolean => {
  const n = c.charCodeAt(0)
  return n === 0x09 || (n >= 0x20 && n <= 0x7e) || (n >= 0x80 && n <= 0xff)
}

class Failure {
  constructor(
    readonly position: number,
    readonly detail: string,
  ) {}
}

interface Building {
  readonly scheme: string
  token68: string | undefined
  readonly params: Map<string, string>
  /** Whether the scheme was followed by whitespace, which opens its auth-param list. */
  open: boolean
}

const parseValue = (s: string): ReadonlyArray<Challenge> => {
  let i = 0
  const out: Array<Challenge> = []
  let current: Building | undefined

  const skipOws = () => {
    while (s[i] === " " || s[i] === "\t") i++
  }
  const atElementEnd = () => i >= s.length || s[i] === ","
  const readToken = (): string | undefined => {
    TOKEN_AT.lastIndex = i
    const m = TOKEN_AT.exec(s)
    if (m === null) return undefined
    i += m[0].length
    return m[0]
  }
  const readQuoted = (): string => {
    const start = i
    i++
    let value = ""
    while (i < s.length) {
      const c = s[i]!
      if (c === '"') {
        i++
        return value
      }
      if (c === "\\") {
        const next = s[i + 1]
        if (next === undefined) break
        if (!isQuotable(next))
          throw new Failure(i + 1, `character ${describe(next)} cannot be escaped in a quoted-string`)
        value += next
        i += 2
      } else if (isQdText(c)) {
        value += c
        i++
      } else {
        throw new Failure(i, `character ${describe(c)} is not allowed in a quoted-string`)
      }
    }
    throw new Failure(start, "unterminated quoted-string")
  }
  const readParam = (challenge: Building, name: string, nameStart: number) => {
    skipOws()
    if (s[i] !== "=") throw new Failure(i, `expected "=" after parameter name "${name}"`)
    i++
    skipOws()
    const value = s[i] === '"' ? readQuoted() : readToken()
    if (value === undefined) {
      throw new Failure(i, `expected a token or quoted-string as the value of parameter "${name}"`)
    }
    const key = name.toLowerCase()
    if (challenge.params.has(key)) {
      throw new Failure(nameStart, `duplicate parameter "${key}" in the "${challenge.scheme}" challenge`)
    }
    challenge.params.set(key, value)
    skipOws()
    if (!atElementEnd()) throw new Failure(i, `expected "," or the end after the value of parameter "${name}"`)
  }
  const finish = (c: Building): Challenge =>
    c.token68 === undefined
      ? { scheme: c.scheme, params: Object.fromEntries(c.params) }
      : { scheme: c.scheme, token68: c.token68, params: {} }

  for (;;) {
    skipOws()
    if (i >= s.length) break
    if (s[i] === ",") {
      i++
      continue
    }
    const start = i
    const name = readToken()
    if (name === undefined) throw new Failure(i, `expected an auth-scheme or a parameter, found ${describe(s[i]!)}`)
    const afterName = i
    skipOws()
    if (s[i] === "=") {
      // A list element of the form name=value continues the current challenge's auth-param list.
      if (current === undefined || !current.open || current.token68 !== undefined) {
        throw new Failure(start, `parameter "${name}" does not follow an auth-scheme that takes parameters`)
      }
      i = afterName
      readParam(current, name, start)
      continue
    }
    i = afterName
    if (current !== undefined) out.push(finish(current))
    const challenge: Building = { scheme: name, token68: undefined, params: new Map(), open: false }
    current = challenge
    if (atElementEnd()) continue
    if (s[i] !== " " && s[i] !== "\t") {
      throw new Failure(i, `expected a space or "," after auth-scheme "${name}", found ${describe(s[i]!)}`)
    }
    skipOws()
    challenge.open = true
    if (atElementEnd()) continue
    // token68 and the first auth-param share a prefix ("abc=" vs "abc=def"): token68 only if the element ends there.
    const paramStart = i
    TOKEN68_AT.lastIndex = i
    const t68 = TOKEN68_AT.exec(s)
    if (t68 !== null) {
      i += t68[0].length
      skipOws()
      if (atElementEnd()) {
        challenge.token68 = t68[0]
        continue
      }
      i = paramStart
    }
    const paramName = readToken()
    if (paramName === undefined) {
      throw new Failure(i, `expected token68 or an auth-param after auth-scheme "${name}", found ${describe(s[i]!)}`)
    }
    readParam(challenge, paramName, paramStart)
  }
  if (current !== undefined) out.push(finish(current))
  return out
}

/**
 * Parses `WWW-Authenticate` field values into challenges, in order. Several lines are joined with `", "` first (one
 * combined list, RFC 9110 §5.3). `null`, `undefined`, empty and blank values give an empty list. Never throws.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.6.1 | RFC 9110 §11.6.1}
 */
export const parse = (
  header: string | ReadonlyArray<string> | null | undefined,
): Result.Result<ReadonlyArray<Challenge>, MalformedChallenge> => {
  if (header === null || header === undefined) return Result.succeed([])
  const input = typeof header === "string" ? header : header.join(", ")
  try {
    return Result.succeed(parseValue(input))
  } catch (error) {
    if (error instanceof Failure) {
      return Result.fail(
        new MalformedChallenge({
          input,
          position: error.position,
          message: `Malformed WWW-Authenticate at position ${error.position}: ${error.detail}`,
        }),
      )
    }
    throw error
  }
}

const unformattable = (input: string, position: number, detail: string) =>
  new MalformedChallenge({ input, position, message: `Cannot format WWW-Authenticate challenge: ${detail}` })

/** Characters a quoted-string can carry (through qdtext or quoted-pair). */
const isQuotableValue = (value: string): number => {
  for (let i = 0; i < value.length; i++) if (!isQuotable(value[i]!)) return i
  return -1
}

const quote = (value: string): string => `"${value.replace(/["\\]/g, "\\$&")}"`

const isChallengeList = (c: Challenge | ReadonlyArray<Challenge>): c is ReadonlyArray<Challenge> => Array.isArray(c)

const formatOne = (challenge: Challenge): string => {
  const { scheme, token68, params } = challenge
  if (!isToken(scheme)) throw unformattable(scheme, 0, `auth-scheme ${JSON.stringify(scheme)} is not a token`)
  const entries = Object.entries(params)
  if (token68 !== undefined) {
    if (entries.length > 0) throw unformattable(token68, 0, "a challenge carries token68 or auth-params, not both")
    if (!isToken68(token68)) throw unformattable(token68, 0, `${JSON.stringify(token68)} is not a token68`)
    return `${scheme} ${token68}`
  }
  if (entries.length === 0) return scheme
  // RFC 6750 §3 writes every Bearer parameter as a quoted-string; RFC 9110 §11.5 asks the same of realm.
  const alwaysQuote = scheme.toLowerCase() === "bearer" || scheme.toLowerCase() === "dpop"
  const seen = new Set<string>()
  const parts = entries.map(([name, value]) => {
    if (!isToken(name)) throw unformattable(name, 0, `parameter name ${JSON.stringify(name)} is not a token`)
    const key = name.toLowerCase()
    if (seen.has(key)) throw unformattable(name, 0, `duplicate parameter "${key}"`)
    seen.add(key)
    const bad = isQuotableValue(value)
    if (bad !== -1) {
      throw unformattable(
        value,
        bad,
        `character ${codePoint(value[bad]!)} at position ${bad} of parameter "${name}" cannot appear in a header`,
      )
    }
    return `${name}=${alwaysQuote || key === "realm" || !isToken(value) ? quote(value) : value}`
  })
  return `${scheme} ${parts.join(", ")}`
}

/**
 * Writes one or several challenges as a `WWW-Authenticate` field value. Values are written as tokens when they are
 * tokens and as quoted-strings (escaping `"` and `\`) otherwise; `realm` and all Bearer parameters are always quoted.
 *
 * @throws {@link MalformedChallenge} when a scheme or parameter name is not a token, a token68 is not valid, a
 * challenge has both token68 and parameters, a parameter repeats (case-insensitively), or a value holds a character
 * no header can carry (controls such as CR and LF, DEL, anything above U+00FF).
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.6.1 | RFC 9110 §11.6.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-5.6.4 | RFC 9110 §5.6.4}
 */
export const format = (challenge: Challenge | ReadonlyArray<Challenge>): string =>
  isChallengeList(challenge) ? challenge.map(formatOne).join(", ") : formatOne(challenge)

/**
 * The parameters of a Bearer challenge that Keyway reads and writes.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-5.1 | RFC 9728 §5.1}
 */
export interface BearerParams {
  readonly realm?: string
  /** Space-separated scopes the request needs. */
  readonly scope?: string
  /** `invalid_request`, `invalid_token` or `insufficient_scope` (RFC 6750 §3.1). */
  readonly error?: string
  readonly error_description?: string
  readonly error_uri?: string
  /** URL of the protected resource metadata (RFC 9728 §5.1). */
  readonly resource_metadata?: string
}

const BEARER_ORDER = ["realm", "resource_metadata", "scope", "error", "error_description", "error_uri"] as const

/**
 * The Bearer parameters of the first challenge whose scheme is `Bearer` (case-insensitively); undefined when there is
 * none. Parameters other than those of {@link BearerParams} are left out.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 */
export const bearer = (challenges: ReadonlyArray<Challenge>): BearerParams | undefined =>
  paramsOf(challenges, "Bearer", BEARER_ORDER)

const paramsOf = (
  challenges: ReadonlyArray<Challenge>,
  scheme: string,
  names: ReadonlyArray<string>,
): Record<string, string> | undefined => {
  const found = challenges.find((c) => c.scheme.toLowerCase() === scheme.toLowerCase())
  if (found === undefined) return undefined
  const out: Record<string, string> = {}
  for (const name of names) {
    const value = Object.hasOwn(found.params, name) ? found.params[name] : undefined
    if (value !== undefined) out[name] = value
  }
  return out
}

const formatOrdered = <P extends DPoPParams>(
  scheme: string,
  params: P,
  names: ReadonlyArray<keyof DPoPParams>,
): string => {
  const ordered: Record<string, string> = {}
  for (const name of names) {
    const value = params[name]
    if (value !== undefined) ordered[name] = value
  }
  return format({ scheme, params: ordered })
}

/**
 * The Bearer parameters from every `WWW-Authenticate` line of a response (the Fetch `Headers` object combines them),
 * or, given `schemes`, those of the first listed scheme the response challenges with (a client that presents tokens
 * with DPoP answers a challenge that offers only DPoP; RFC 9449 §7.1).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-5.1 | RFC 9728 §5.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 */
export const fromHeaders = (
  headers: Headers,
  schemes: ReadonlyArray<string> = ["Bearer"],
): Result.Result<BearerParams | undefined, MalformedChallenge> =>
  Result.map(parse(headers.get("www-authenticate")), (challenges) => {
    for (const scheme of schemes) {
      const params = scheme.toLowerCase() === "dpop" ? dpop(challenges) : paramsOf(challenges, scheme, BEARER_ORDER)
      if (params !== undefined) return params
    }
    return undefined
  })

/**
 * The parameters of a DPoP challenge: those of Bearer (RFC 9449 §7.1 reuses them, with the error codes
 * `invalid_dpop_proof` and `use_dpop_nonce` besides RFC 6750's) and `algs`, the space-separated JWS algorithms the
 * resource server accepts in proofs.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7.1 | RFC 9449 §7.1}
 */
export interface DPoPParams extends BearerParams {
  readonly algs?: string
}

const DPOP_ORDER = ["realm", "resource_metadata", "scope", "algs", "error", "error_description", "error_uri"] as const

/**
 * The DPoP parameters of the first challenge whose scheme is `DPoP` (case-insensitively); undefined when there is
 * none.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7.1 | RFC 9449 §7.1}
 */
export const dpop = (challenges: ReadonlyArray<Challenge>): DPoPParams | undefined =>
  paramsOf(challenges, "DPoP", DPOP_ORDER)

/**
 * A DPoP challenge with every present parameter quoted, in the order realm, resource_metadata, scope, algs, error,
 * error_description, error_uri.
 *
 * @throws {@link MalformedChallenge} when a value holds a character no header can carry.
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7.1 | RFC 9449 §7.1}
 */
export const formatDPoP = (params: DPoPParams): string => formatOrdered("DPoP", params, DPOP_ORDER)

/**
 * A Bearer challenge with every present parameter quoted, in the order realm, resource_metadata, scope, error,
 * error_description, error_uri.
 *
 * @throws {@link MalformedChallenge} when a value holds a character no header can carry.
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-5.1 | RFC 9728 §5.1}
 */
export const formatBearer = (params: BearerParams): string => formatOrdered("Bearer", params, BEARER_ORDER)
