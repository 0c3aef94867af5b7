/**
 * Client authentication at the token, introspection and revocation endpoints: its encodings, the choice of a method
 * from what a server lists, and a method with its credentials as the headers and form fields that carry it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 * @module
 */
import { JWT_CLIENT_ASSERTION_TYPE } from "./Grant.js"

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

/**
 * The client authentication methods of the token, introspection and revocation endpoints that Keyway's clients use.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2 (token_endpoint_auth_method)}
 */
export type Method = "none" | "client_secret_basic" | "client_secret_post" | "private_key_jwt"

/** The methods that send a client secret. */
export type SecretMethod = "client_secret_basic" | "client_secret_post"

/** What a client has to authenticate with, and the method it asks for, if any. */
export interface Available {
  readonly secret: boolean
  readonly privateKey: boolean
  /** The method asked for: used only when the server lists it and the client has its credential. */
  readonly method?: "private_key_jwt" | SecretMethod | undefined
}

/**
 * The method to authenticate with at a server that lists `supported` (its `token_endpoint_auth_methods_supported`;
 * a server that lists none supports `client_secret_basic`, RFC 8414 §2): the one asked for, else `private_key_jwt`
 * when the client has a key and the server lists it, else `client_secret_basic` or `client_secret_post` for a secret,
 * in that order. `undefined` when nothing the client has works with the server.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 */
export const chooseMethod = (
  supported: ReadonlyArray<string> | undefined,
  available: Available,
): "private_key_jwt" | SecretMethod | undefined => {
  const listed = supported ?? ["client_secret_basic"]
  const usable = (method: "private_key_jwt" | SecretMethod) =>
    listed.includes(method) && (method === "private_key_jwt" ? available.privateKey : available.secret)
  if (available.method !== undefined) return usable(available.method) ? available.method : undefined
  return (["private_key_jwt", "client_secret_basic", "client_secret_post"] as const).find(usable)
}

/**
 * Client authentication as a value: the request headers and form fields that carry it. `form` is added to the
 * request's form body, `headers` to its headers.
 */
export interface Applied {
  readonly headers: Readonly<Record<string, string>>
  readonly form: Readonly<Record<string, string>>
}

/**
 * The headers and form fields of a method with its credentials: `none` sends `client_id`; `client_secret_basic` an
 * `Authorization: Basic` header; `client_secret_post` `client_id` and `client_secret`; `private_key_jwt` `client_id`,
 * `client_assertion_type` and the signed `client_assertion` (signing it is the caller's: it holds the key).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-2.4 | OAuth 2.1 §2.4}
 */
export const apply: {
  (method: "none", credentials: { readonly clientId: string }): Applied
  (method: SecretMethod, credentials: { readonly clientId: string; readonly clientSecret: string }): Applied
  (method: "private_key_jwt", credentials: { readonly clientId: string; readonly clientAssertion: string }): Applied
} = (
  method: Method,
  credentials: { readonly clientId: string; readonly clientSecret?: string; readonly clientAssertion?: string },
): Applied => {
  const { clientId } = credentials
  switch (method) {
    case "none":
      return { headers: {}, form: { client_id: clientId } }
    case "client_secret_basic":
      return {
        headers: { authorization: encodeClientSecretBasic(clientId, credentials.clientSecret ?? "") },
        form: {},
      }
    case "client_secret_post":
      return { headers: {}, form: { client_id: clientId, client_secret: credentials.clientSecret ?? "" } }
    case "private_key_jwt":
      return {
        headers: {},
        form: {
          client_id: clientId,
          client_assertion_type: JWT_CLIENT_ASSERTION_TYPE,
          client_assertion: credentials.clientAssertion ?? "",
        },
      }
  }
}

/**
 * The claims of a `private_key_jwt` client assertion (RFC 7523 §3, as RFC 7523 §2.2 uses it): the client as `iss`
 * and `sub`, the authorization server as `aud` (its issuer, or its token endpoint for servers that want that), a
 * fresh `jti` for single use, issued at `now` and expiring `lifetime` seconds later (60 by default). Signing them is
 * the caller's: it holds the key.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 */
export const clientAssertionClaims = (
  clientId: string,
  audience: string,
  now: number,
  jti: string,
  lifetime = 60,
): { iss: string; sub: string; aud: string; jti: string; iat: number; exp: number } => ({
  iss: clientId,
  sub: clientId,
  aud: audience,
  jti,
  iat: now,
  exp: now + lifetime,
})

/** Adds client authentication's headers and form fields to a request's `headers` and form `body`. */
export const addTo = (applied: Applied, headers: Headers, body: URLSearchParams): void => {
  for (const [name, value] of Object.entries(applied.headers)) headers.set(name, value)
  for (const [name, value] of Object.entries(applied.form)) body.set(name, value)
}
