/**
 * Which MCP operations a JSON-RPC body asks for: the method of each request or notification, and for `tools/call` the
 * tool's name. The resource server maps them to required scopes; the client keys its step-up accounting on them.
 *
 * @see {@link https://www.jsonrpc.org/specification#batch | JSON-RPC 2.0 §6 (batch)}
 * @see {@link https://modelcontextprotocol.io/specification/2025-03-26/basic/transports#sending-messages-to-the-server | MCP 2025-03-26 transports (batches)}
 * @module
 */

/** One operation: a JSON-RPC method, and the tool's name when the method is `tools/call` with a string `params.name`. */
export interface Operation {
  readonly method: string
  readonly tool?: string
}

/**
 * The operations of a body, in order (responses to server-initiated requests carry no method and add none), or why
 * they cannot be read: `ParseError` (JSON-RPC -32700) or `InvalidRequest` (-32600), with the message to answer.
 */
export type Scan =
  | { readonly _tag: "Operations"; readonly operations: ReadonlyArray<Operation> }
  | { readonly _tag: "ParseError"; readonly message: string }
  | { readonly _tag: "InvalidRequest"; readonly message: string }

/** A {@link Scan} that failed. */
export type ScanFailure = Exclude<Scan, { readonly _tag: "Operations" }>

/** Appends the message's operation; false when the value is not a JSON-RPC message. */
const operationOfMessage = (message: unknown, into: Array<Operation>): boolean => {
  if (typeof message !== "object" || message === null || Array.isArray(message)) return false
  const method = (message as { readonly method?: unknown }).method
  if (method === undefined) return true
  if (typeof method !== "string") return false
  const params = (message as { readonly params?: unknown }).params
  const tool =
    method === "tools/call" && typeof params === "object" && params !== null
      ? (params as { readonly name?: unknown }).name
      : undefined
  into.push(typeof tool === "string" ? { method, tool } : { method })
  return true
}

/**
 * The operations of a parsed body: one message, or a batch (a JSON array, MCP 2025-03-26), whose operations are all
 * of its members'. An empty batch, or a member that is not an object with a string `method` (or no `method`, a
 * response), is an invalid request.
 *
 * @see {@link https://www.jsonrpc.org/specification#request_object | JSON-RPC 2.0 §4}
 * @see {@link https://www.jsonrpc.org/specification#batch | JSON-RPC 2.0 §6}
 */
export const scanParsed = (body: unknown): Scan => {
  const operations: Array<Operation> = []
  const messages = Array.isArray(body) ? body : [body]
  if (messages.length === 0) return { _tag: "InvalidRequest", message: "Invalid Request: empty batch" }
  for (const message of messages) {
    if (!operationOfMessage(message, operations)) {
      return { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" }
    }
  }
  return { _tag: "Operations", operations }
}

/**
 * The operations of a body's text; text that is not JSON is a parse error.
 *
 * @see {@link https://www.jsonrpc.org/specification#error_object | JSON-RPC 2.0 §5.1}
 */
export const scan = (text: string): Scan => {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return { _tag: "ParseError", message: "Parse error: the request body is not valid JSON" }
  }
  return scanParsed(body)
}

/**
 * The JSON-RPC error response for a body whose operations cannot be read: code -32700 (parse error) or -32600
 * (invalid request), with `id` null because no request id could be read.
 *
 * @see {@link https://www.jsonrpc.org/specification#error_object | JSON-RPC 2.0 §5.1}
 */
export const errorBody = (failure: ScanFailure): string =>
  JSON.stringify({
    jsonrpc: "2.0",
    id: null,
    error: { code: failure._tag === "ParseError" ? -32700 : -32600, message: failure.message },
  })

/**
 * A stable name for the operations of a body, for accounting per operation (the client's step-up limit): `method`,
 * or `tools/call <tool>`; a batch's distinct names joined by `, ` in order, since its scopes are the union of its
 * members'; `*` when the body names no operation or cannot be read.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#step-up-authorization-flow | MCP step-up}
 */
export const nameOf = (result: Scan): string => {
  if (result._tag !== "Operations" || result.operations.length === 0) return "*"
  const names = result.operations.map((op) => (op.tool === undefined ? op.method : `${op.method} ${op.tool}`))
  return [...new Set(names)].join(", ")
}
