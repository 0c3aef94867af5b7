/**
 * What the `Authorization` header of a request says about a Bearer token (RFC 6750 §2.1, RFC 9110 §11.6.2).
 * Kept free of I/O and allocation-light: it runs on every request.
 */
export type BearerCredentials =
  | { readonly _tag: "None" }
  | { readonly _tag: "OtherScheme"; readonly scheme: string; readonly credentials: string }
  | { readonly _tag: "Empty" }
  | { readonly _tag: "Token"; readonly token: string }
  | { readonly _tag: "Malformed"; readonly description: string }

const NONE: BearerCredentials = { _tag: "None" }
const EMPTY: BearerCredentials = { _tag: "Empty" }

// RFC 9110 §5.6.2 token (the auth-scheme) and RFC 6750 §2.1 b64token (token68 with a restricted alphabet).
const SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/

/** Descriptions used in `error_description`; tests assert them verbatim. */
export const Descriptions = {
  multipleHeaders: "The request carries more than one Authorization header",
  multipleTokens: "The Authorization header carries more than one token",
  illegalCharacters: "The access token is not a valid RFC 6750 b64token",
  malformedHeader: "The Authorization header is malformed",
} as const

const malformed = (description: string): BearerCredentials => ({ _tag: "Malformed", description })

/**
 * Reads the credentials from the `Authorization` header value(s).
 * `values` is either the single (possibly comma-joined, as `Headers.get` joins repeated fields) value, or every
 * raw header line when the server framework keeps them apart.
 */
export const parseAuthorization = (values: string | ReadonlyArray<string> | null | undefined): BearerCredentials => {
  if (values === null || values === undefined) return NONE
  let value: string
  if (typeof values === "string") {
    value = values
  } else {
    if (values.length === 0) return NONE
    if (values.length > 1) return malformed(Descriptions.multipleHeaders)
    value = values[0] as string
  }
  value = value.trim()
  if (value.length === 0) return NONE
  const space = value.indexOf(" ")
  const scheme = space === -1 ? value : value.slice(0, space)
  if (!SCHEME.test(scheme)) {
    // A comma right after the scheme means two header lines were joined: "Basic, Bearer x".
    return value.includes(",") ? malformed(Descriptions.multipleHeaders) : malformed(Descriptions.malformedHeader)
  }
  const rest = space === -1 ? "" : value.slice(space + 1).trim()
  if (scheme.length !== 6 || scheme.toLowerCase() !== "bearer") {
    if (/, bearer( |$)/i.test(rest)) return malformed(Descriptions.multipleHeaders)
    return { _tag: "OtherScheme", scheme, credentials: rest }
  }
  if (rest.length === 0) return EMPTY
  if (TOKEN68.test(rest)) return { _tag: "Token", token: rest }
  // Repeated header fields arrive joined with ", " (RFC 9110 §5.3).
  if (/, [!#$%&'*+.^_`|~0-9A-Za-z-]+( |$)/.test(rest)) return malformed(Descriptions.multipleHeaders)
  if (/\s/.test(rest)) return malformed(Descriptions.multipleTokens)
  return malformed(Descriptions.illegalCharacters)
}
