/**
 * Client authentication encodings at the token, introspection and revocation endpoints.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 * @module
 */

/**
 * The application/x-www-form-urlencoded encoding of one value (the WHATWG serializer: everything but ASCII
 * alphanumerics and `*-._` is percent-encoded from UTF-8, a space becomes `+`), which RFC 6749 Appendix B names.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#appendix-B | RFC 6749 Appendix B}
 */
export const formUrlEncode = (value: string): string => new URLSearchParams({ v: value }).toString().slice(2)

/** The inverse of {@link formUrlEncode}; undefined when a percent escape is malformed or not UTF-8. */
const formUrlDecode = (value: string): string | undefined => {
  try {
    return decodeURIComponent(value.replace(/\+/g, " "))
  } catch {
    return undefined
  }
}

/**
 * The `Authorization` header value of `client_secret_basic`: `Basic ` and the base64 of the form-urlencoded client
 * identifier, a colon, and the form-urlencoded secret.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7617.html#section-2 | RFC 7617 §2}
 */
export const encodeClientSecretBasic = (clientId: string, clientSecret: string): string =>
  // Form-urlencoding leaves only ASCII, so btoa's Latin-1 input rule holds.
  `Basic ${btoa(`${formUrlEncode(clientId)}:${formUrlEncode(clientSecret)}`)}`

/** The client credentials carried by `client_secret_basic`. */
export interface ClientSecretBasic {
  readonly clientId: string
  readonly clientSecret: string
}

/**
 * The credentials of an `Authorization: Basic` header value, decoded as {@link encodeClientSecretBasic} encodes them;
 * undefined when the scheme is not Basic, or the credentials are not base64, have no colon, an empty client
 * identifier, or a malformed percent escape. The scheme name is case-insensitive.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7617.html#section-2 | RFC 7617 §2}
 */
export const decodeClientSecretBasic = (authorization: string): ClientSecretBasic | undefined => {
  const match = /^basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i.exec(authorization)
  if (match === null) return undefined
  let binary: string
  try {
    binary = atob(match[1] as string)
  } catch {
    return undefined
  }
  const decoded = new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)))
  const colon = decoded.indexOf(":")
  if (colon < 0) return undefined
  const clientId = formUrlDecode(decoded.slice(0, colon))
  const clientSecret = formUrlDecode(decoded.slice(colon + 1))
  if (clientId === undefined || clientSecret === undefined || clientId === "") return undefined
  return { clientId, clientSecret }
}
