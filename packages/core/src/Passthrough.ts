/**
 * Token passthrough, found before it happens: whether a request a server is about to send upstream carries the
 * access token the server itself received. MCP forbids passing that token on; a server calls other APIs with a token
 * of its own (client credentials, or one obtained by token exchange). Pure: the caller refuses the request.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 * @module
 */

/** The parts of an outgoing request searched for the inbound token. */
export interface Outgoing {
  readonly url: string | URL
  readonly headers: Headers
  /** The body, searched when it is text or a form; a stream or binary body cannot be searched. */
  readonly body?: unknown
}

/** Where in a request the inbound token was found. */
export type Where = "url" | "header" | "body"

/**
 * Where the outgoing request carries `inboundToken`: in its URL, a header value, or a text or form body; undefined
 * when it carries it nowhere searchable (or `inboundToken` is empty).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 */
export const find = (inboundToken: string, request: Outgoing): Where | undefined => {
  if (inboundToken === "") return undefined
  if (String(request.url).includes(inboundToken)) return "url"
  for (const [, value] of request.headers) if (value.includes(inboundToken)) return "header"
  const { body } = request
  const text = typeof body === "string" ? body : body instanceof URLSearchParams ? body.toString() : undefined
  return text?.includes(inboundToken) === true ? "body" : undefined
}
