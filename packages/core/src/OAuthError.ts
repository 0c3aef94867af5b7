/**
 * The OAuth error vocabulary: every error code the specifications used by MCP authorization define, its HTTP
 * status, and one typed error that renders the JSON error response of RFC 6749 §5.2.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 * @module
 */
import * as Schema from "effect/Schema"

/**
 * Every OAuth error code Keyway emits or understands, in the order of the specifications that define them.
 *
 * - RFC 6749 §5.2 (token endpoint): `invalid_request`, `invalid_client`, `invalid_grant`, `unauthorized_client`,
 *   `unsupported_grant_type`, `invalid_scope`
 * - RFC 6749 §4.1.2.1 (authorization endpoint): `access_denied`, `unsupported_response_type`, `server_error`,
 *   `temporarily_unavailable`
 * - RFC 6750 §3.1 (protected resource): `invalid_token`, `insufficient_scope`
 * - RFC 7591 §3.2.2 (registration): `invalid_redirect_uri`, `invalid_client_metadata`, `invalid_software_statement`,
 *   `unapproved_software_statement`
 * - RFC 8707 §2 (resource indicators): `invalid_target`
 * - RFC 9449 §5 and §8 (DPoP at the token endpoint): `invalid_dpop_proof`, `use_dpop_nonce`
 * - RFC 7009 §2.2.1 (revocation): `unsupported_token_type`
 * - RFC 8628 §3.5 (device access token requests): `authorization_pending`, `slow_down`, `expired_token`
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2.1 | RFC 6749 §4.1.2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.2 | RFC 7591 §3.2.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html#section-2.2.1 | RFC 7009 §2.2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-12.2 | RFC 9449 §12.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.5 | RFC 8628 §3.5}
 */
export const codes = [
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_scope",
  "access_denied",
  "unsupported_response_type",
  "server_error",
  "temporarily_unavailable",
  "invalid_token",
  "insufficient_scope",
  "invalid_redirect_uri",
  "invalid_client_metadata",
  "invalid_software_statement",
  "unapproved_software_statement",
  "invalid_target",
  "unsupported_token_type",
  "invalid_dpop_proof",
  "use_dpop_nonce",
  "authorization_pending",
  "slow_down",
  "expired_token",
] as const

/**
 * One OAuth error code (see {@link codes}).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export type ErrorCode = (typeof codes)[number]

const codeSet: ReadonlySet<string> = new Set(codes)

/**
 * Whether a string is one of the known OAuth error codes.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export const isErrorCode = (s: string): s is ErrorCode => codeSet.has(s)

/**
 * The HTTP status each error code is answered with.
 *
 * `invalid_client` is 401 because RFC 6749 §5.2 requires it whenever the client tried to authenticate with the
 * `Authorization` header, and allows it otherwise; `invalid_token` (401) and `insufficient_scope` (403) follow
 * RFC 6750 §3.1; `server_error` and
 * `temporarily_unavailable` carry the statuses their names stand for (RFC 6749 §4.1.2.1 defines them because a
 * redirect cannot carry 500 or 503). Every other code is a client error, 400: `access_denied` too, which is answered in
 * JSON only at the token endpoint (a device authorization the user denied, RFC 8628 §3.5), where RFC 6749 §5.2 makes
 * every error but `invalid_client` a 400.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export const statuses: Readonly<Record<ErrorCode, number>> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  invalid_scope: 400,
  access_denied: 400,
  unsupported_response_type: 400,
  server_error: 500,
  temporarily_unavailable: 503,
  invalid_token: 401,
  insufficient_scope: 403,
  invalid_redirect_uri: 400,
  invalid_client_metadata: 400,
  invalid_software_statement: 400,
  unapproved_software_statement: 400,
  invalid_target: 400,
  unsupported_token_type: 400,
  invalid_dpop_proof: 400,
  use_dpop_nonce: 400,
  authorization_pending: 400,
  slow_down: 400,
  expired_token: 400,
}

/**
 * The HTTP status of an error code (see {@link statuses}).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export const statusOf = (code: ErrorCode): number => statuses[code]

/**
 * Whether a string may be sent as `error_description`: printable ASCII except `"` and `\`
 * (`%x20-21 / %x23-5B / %x5D-7E`). The empty string is allowed by the grammar (`1*` is not required by the ABNF
 * of RFC 6749 Appendix A.6, which uses `*`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#appendix-A.6 | RFC 6749 Appendix A.6}
 */
export const isValidDescription = (s: string): boolean => /^[\x20\x21\x23-\x5B\x5D-\x7E]*$/.test(s)

/**
 * Rewrites a text into a valid `error_description`, so that an error can always be answered even when its text
 * comes from elsewhere (an exception message, user input, a non-English string).
 *
 * `"` becomes `'`, `\` becomes `/`, tabs and line breaks become a space, every other character outside
 * `%x20-21 / %x23-5B / %x5D-7E` (control characters, non-ASCII) becomes `?`. Valid text is returned unchanged.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export const sanitizeDescription = (s: string): string => {
  if (isValidDescription(s)) return s
  let out = ""
  for (const ch of s) {
    if (ch === '"') out += "'"
    else if (ch === "\\") out += "/"
    else if (ch === "\t" || ch === "\n" || ch === "\r") out += " "
    else out += isValidDescription(ch) ? ch : "?"
  }
  return out
}

/**
 * The JSON body of an OAuth error response.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export interface Body {
  readonly error: ErrorCode
  readonly error_description?: string
  readonly error_uri?: string
}

/**
 * Options of {@link OAuthError.toResponse}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export interface ResponseOptions {
  /**
   * Extra headers, e.g. `WWW-Authenticate` for a 401 `invalid_client` after HTTP Basic authentication
   * (RFC 6749 §5.2) or a Bearer challenge (RFC 6750 §3). They cannot remove the cache headers.
   */
  readonly headers?: HeadersInit
}

/**
 * An OAuth error: a spec-defined code with optional human-readable description and URI.
 *
 * Raise it with `return yield* OAuthError.make("invalid_grant", "code expired")` in Effect code or `throw` it in
 * plain code; turn it into the HTTP answer with {@link OAuthError.toResponse}. Construct it through {@link make}
 * so the description is made valid; a description given directly to the constructor is still sanitised in
 * {@link OAuthError.body}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export class OAuthError extends Schema.TaggedError<OAuthError>()("OAuthError", {
  error: Schema.Literals(codes),
  error_description: Schema.optionalKey(Schema.String),
  error_uri: Schema.optionalKey(Schema.String),
  /** Headers the answer carries besides the body, for example a fresh `DPoP-Nonce` with `use_dpop_nonce` (RFC 9449 §8). */
  headers: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
}) {
  /** The HTTP status of the error code ({@link statusOf}). */
  get status(): number {
    return statusOf(this.error)
  }

  /** `"<code>: <description>"`, or the code alone. */
  override get message(): string {
    return this.error_description === undefined ? this.error : `${this.error}: ${this.error_description}`
  }

  /**
   * The JSON body of the error response: `error`, then `error_description` and `error_uri` when present.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
   */
  body(): Body {
    return {
      error: this.error,
      ...(this.error_description === undefined
        ? {}
        : { error_description: sanitizeDescription(this.error_description) }),
      ...(this.error_uri === undefined ? {} : { error_uri: this.error_uri }),
    }
  }

  /**
   * The HTTP error response: the status of the code, `Content-Type: application/json`, the JSON {@link Body}, and
   * `Cache-Control: no-store` with `Pragma: no-cache` as RFC 6749 §5.1 requires for token endpoint answers.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
   * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.1 | RFC 6749 §5.1}
   */
  toResponse(init?: ResponseOptions): Response {
    const headers = new Headers(init?.headers)
    for (const [name, value] of Object.entries(this.headers ?? {})) headers.set(name, value)
    headers.set("Content-Type", "application/json")
    headers.set("Cache-Control", "no-store")
    headers.set("Pragma", "no-cache")
    return new Response(JSON.stringify(this.body()), { status: this.status, headers })
  }
}

/**
 * Builds an {@link OAuthError}. The description is passed through {@link sanitizeDescription}: Keyway sanitises
 * rather than refuses, because an error path must never fail for want of a valid message.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export const make = (error: ErrorCode, description?: string, uri?: string): OAuthError =>
  new OAuthError({
    error,
    ...(description === undefined ? {} : { error_description: sanitizeDescription(description) }),
    ...(uri === undefined ? {} : { error_uri: uri }),
  })
