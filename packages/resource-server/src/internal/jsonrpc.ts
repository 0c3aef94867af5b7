/**
 * Reads which MCP operations a JSON-RPC request body asks for (core's {@link McpOperation}), so that per-method and
 * per-tool scope requirements can be checked before the handler runs.
 */
import { McpOperation } from "@keyway/core"

export type OperationScan =
  | { readonly _tag: "Operations"; readonly scopes: ReadonlyArray<string> }
  | McpOperation.ScanFailure

export interface OperationScopes {
  readonly methods: ReadonlyMap<string, ReadonlyArray<string>>
  readonly tools: ReadonlyMap<string, ReadonlyArray<string>>
}

const EMPTY: ReadonlyArray<string> = []

/** A batch (JSON array, MCP 2025-03-26) needs the union of its operations' scopes. */
const scopesOf = (scan: McpOperation.Scan, table: OperationScopes): OperationScan => {
  if (scan._tag !== "Operations") return scan
  const scopes: Array<string> = []
  for (const operation of scan.operations) {
    for (const scope of table.methods.get(operation.method) ?? EMPTY) scopes.push(scope)
    if (operation.tool !== undefined) for (const scope of table.tools.get(operation.tool) ?? EMPTY) scopes.push(scope)
  }
  return { _tag: "Operations", scopes }
}

/** Scopes the operations in `text` need. */
export const scanOperations = (text: string, table: OperationScopes): OperationScan =>
  scopesOf(McpOperation.scan(text), table)

/** Like {@link scanOperations} for a body a framework has already parsed. */
export const scanParsed = (body: unknown, table: OperationScopes): OperationScan =>
  scopesOf(McpOperation.scanParsed(body), table)

/** The JSON-RPC 2.0 error body (§5.1 codes -32700 and -32600) for a body whose operations cannot be read. */
export const errorBody: (scan: McpOperation.ScanFailure) => string = McpOperation.errorBody
