/**
 * Reads which MCP operations a JSON-RPC request body asks for, so that per-method and per-tool scope requirements
 * can be checked before the handler runs.
 */
export type OperationScan =
  | { readonly _tag: "Operations"; readonly scopes: ReadonlyArray<string> }
  | { readonly _tag: "ParseError"; readonly message: string }
  | { readonly _tag: "InvalidRequest"; readonly message: string }

export interface OperationScopes {
  readonly methods: ReadonlyMap<string, ReadonlyArray<string>>
  readonly tools: ReadonlyMap<string, ReadonlyArray<string>>
}

const EMPTY: ReadonlyArray<string> = []

const scopesOfMessage = (message: unknown, table: OperationScopes, into: Array<string>): boolean => {
  if (typeof message !== "object" || message === null || Array.isArray(message)) return false
  const method = (message as { readonly method?: unknown }).method
  // Responses from the client (to server-initiated requests) carry no method and need no operation scope.
  if (method === undefined) return true
  if (typeof method !== "string") return false
  for (const scope of table.methods.get(method) ?? EMPTY) into.push(scope)
  if (method === "tools/call") {
    const params = (message as { readonly params?: unknown }).params
    const name =
      typeof params === "object" && params !== null ? (params as { readonly name?: unknown }).name : undefined
    if (typeof name === "string") for (const scope of table.tools.get(name) ?? EMPTY) into.push(scope)
  }
  return true
}

/** Scopes the operations in `text` need; a batch (JSON array, MCP 2025-03-26) needs the union of its messages. */
export const scanOperations = (text: string, table: OperationScopes): OperationScan => {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return { _tag: "ParseError", message: "Parse error: the request body is not valid JSON" }
  }
  return scanParsed(body, table)
}

/** Like {@link scanOperations} for a body a framework has already parsed. */
export const scanParsed = (body: unknown, table: OperationScopes): OperationScan => {
  const scopes: Array<string> = []
  const messages = Array.isArray(body) ? body : [body]
  if (messages.length === 0) return { _tag: "InvalidRequest", message: "Invalid Request: empty batch" }
  for (const message of messages) {
    if (!scopesOfMessage(message, table, scopes)) {
      return { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" }
    }
  }
  return { _tag: "Operations", scopes }
}

/** The JSON-RPC 2.0 error body (§5.1 codes -32700 and -32600) for a body whose operations cannot be read. */
export const errorBody = (scan: Exclude<OperationScan, { _tag: "Operations" }>): string =>
  JSON.stringify({
    jsonrpc: "2.0",
    id: null,
    error: { code: scan._tag === "ParseError" ? -32700 : -32600, message: scan.message },
  })
