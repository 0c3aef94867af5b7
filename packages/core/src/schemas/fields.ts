/**
 * Field builders shared by the wire schemas. Each builder sets its own messages so that a rejection reads
 * `"<field>" is required` or `"<field>" must be <what>` once the path is prefixed (see Wire.fromZodError).
 */
import { z } from "zod"

type Issue = { readonly input?: unknown }

/** "is required" when the field is missing, "must be <what>" otherwise. */
const expected =
  (what: string) =>
  (issue: Issue): string =>
    issue.input === undefined ? "is required" : `must be ${what}`

/** Absolute URI (RFC 3986 §4.3): a scheme, no surrounding or embedded whitespace, and parseable by WHATWG URL. */
export const isAbsoluteUrl = (value: string): boolean =>
  /^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$/.test(value) && URL.canParse(value)

export const string = () => z.string({ error: expected("a string") })

export const nonEmptyString = () => string().refine((s) => s.length > 0, { error: "must not be empty" })

export const url = () => string().refine(isAbsoluteUrl, { error: "must be a URL" })

export const boolean = () => z.boolean({ error: expected("a boolean") })

/** A JSON number (RFC 7519 NumericDate allows fractions). */
export const number = () => z.number({ error: expected("a number") })

export const nonNegativeInteger = () =>
  number().refine((n) => Number.isInteger(n) && n >= 0, { error: "must be a non-negative integer" })

export const strings = () => z.array(string(), { error: expected("an array of strings") })

export const urls = () => z.array(url(), { error: expected("an array of URLs") })

export const stringOrStrings = () =>
  z.union([string(), strings()], { error: expected("a string or an array of strings") })

/** A JSON Web Key Set (RFC 7517 §5): an object with a `keys` array of objects. */
export const jwks = () =>
  z.looseObject(
    { keys: z.array(z.looseObject({}, { error: expected("a JSON object") }), { error: expected("an array of keys") }) },
    { error: expected("a JSON Web Key Set object") },
  )

export const urlRecord = () => z.record(z.string(), url(), { error: expected("an object of URLs") })

export const document = <Shape extends z.ZodRawShape>(shape: Shape) =>
  z.looseObject(shape, { error: expected("a JSON object") })
