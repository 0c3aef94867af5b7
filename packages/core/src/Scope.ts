/**
 * OAuth scope strings and scope sets.
 *
 * ```
 * scope       = scope-token *( SP scope-token )
 * scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
 * ```
 *
 * Functions taking `Iterable<string>` read a plain string as a scope string (`"read write"` is two scopes), never as
 * its characters.
 *
 * Scopes are case-sensitive and order-independent, so a scope string is handled as an ordered set: parsing and
 * every set operation keep the first occurrence of each scope, in order, and drop repeats.
 *
 * Parsing is lenient about spaces only: runs of spaces and leading or trailing spaces are accepted (real servers
 * emit them, and they cannot change the meaning), while any other whitespace (tab, newline) and the characters
 * `"` and `\` are refused, since no scope token may contain them.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 * @module
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"

/**
 * A scope string, or a scope in a list, with a character no scope token may contain.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export class InvalidScope extends Schema.TaggedError<InvalidScope>()("InvalidScope", {
  input: Schema.String,
  message: Schema.String,
}) {}

const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/
const SCOPE_CHAR = /[\x21\x23-\x5b\x5d-\x7e]/

/**
 * Whether a string is one scope token: one or more of `%x21 / %x23-5B / %x5D-7E` (printable ASCII except space,
 * `"` and `\`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const isScopeToken = (s: string): boolean => SCOPE_TOKEN.test(s)

const describe = (c: string): string => {
  const code = `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`
  return c >= "\x21" && c <= "\x7e" ? `${JSON.stringify(c)} (${code})` : code
}

/**
 * Parses a space-separated scope string without throwing. `""` and a string of spaces give `[]`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const validate = (value: string): Result.Result<ReadonlyArray<string>, InvalidScope> => {
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!
    if (c !== " " && !SCOPE_CHAR.test(c)) {
      return Result.fail(
        new InvalidScope({
          input: value,
          message: `Invalid scope ${JSON.stringify(value)}: character ${describe(c)} at position ${i} is not allowed in a scope token`,
        }),
      )
    }
  }
  return Result.succeed([...new Set(value.split(" ").filter((s) => s !== ""))])
}

/**
 * Parses a space-separated scope string into its scopes, first occurrences in order. An absent, empty or blank value
 * gives `[]`.
 *
 * @throws {@link InvalidScope} when the value holds a character that is neither a space nor a scope-token character.
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const parse = (value: string | undefined | null): ReadonlyArray<string> => {
  if (value === undefined || value === null) return []
  const result = validate(value)
  if (Result.isFailure(result)) throw result.failure
  return result.success
}

/**
 * {@link validate} as an Effect.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const decode = (value: string): Effect.Effect<ReadonlyArray<string>, InvalidScope> =>
  Effect.suspend(() => Effect.fromResult(validate(value)))

/**
 * Writes scopes as one space-separated string, first occurrences in order. No scopes give `""`.
 *
 * @throws {@link InvalidScope} when an item is not a single scope token (empty, or holding a space or an illegal
 * character).
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const format = (scopes: Iterable<string>): string => {
  const list = dedupe(scopes)
  for (const scope of list) {
    if (!isScopeToken(scope)) {
      throw new InvalidScope({
        input: scope,
        message: `Invalid scope ${JSON.stringify(scope)}: not a single scope token (RFC 6749 §3.3)`,
      })
    }
  }
  return list.join(" ")
}

/** A plain string passed where scopes are expected is a scope string, not a list of characters. */
const items = (scopes: Iterable<string>): Iterable<string> => (typeof scopes === "string" ? parse(scopes) : scopes)

/**
 * The scopes with repeats removed, first occurrences in order.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const dedupe = (scopes: Iterable<string>): ReadonlyArray<string> => [...new Set(items(scopes))]

/**
 * The scopes of `a`, then those of `b` not in `a`, without repeats.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const union = (a: Iterable<string>, b: Iterable<string>): ReadonlyArray<string> => [
  ...new Set([...items(a), ...items(b)]),
]

/**
 * The scopes of `a` that are not in `b`, in the order of `a`, without repeats.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const difference = (a: Iterable<string>, b: Iterable<string>): ReadonlyArray<string> => {
  const exclude = new Set(items(b))
  return dedupe(a).filter((s) => !exclude.has(s))
}

/**
 * The scopes of `a` that are also in `b`, in the order of `a`, without repeats.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const intersection = (a: Iterable<string>, b: Iterable<string>): ReadonlyArray<string> => {
  const keep = new Set(items(b))
  return dedupe(a).filter((s) => keep.has(s))
}

/**
 * Whether every required scope was granted (comparison is exact: scopes are case-sensitive). Nothing required is
 * always satisfied.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 */
export const containsAll = (granted: Iterable<string>, required: Iterable<string>): boolean => {
  const have = new Set(items(granted))
  for (const scope of items(required)) if (!have.has(scope)) return false
  return true
}
