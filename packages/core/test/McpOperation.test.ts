import { describe, expect, it } from "vitest"
import * as McpOperation from "../src/McpOperation.js"

const call = (name: unknown, id = 1) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name } })

describe("McpOperation.scan", () => {
  // body text, operations
  it.each<[string, ReadonlyArray<McpOperation.Operation>]>([
    [JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }), [{ method: "tools/list" }]],
    [JSON.stringify(call("search")), [{ method: "tools/call", tool: "search" }]],
    [JSON.stringify(call(42)), [{ method: "tools/call" }]],
    [JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call" }), [{ method: "tools/call" }]],
    [
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "resources/read", params: { name: "x" } }),
      [{ method: "resources/read" }],
    ],
    [
      JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
      [{ method: "notifications/initialized" }],
    ],
    // A response to a server-initiated request names no operation.
    [JSON.stringify({ jsonrpc: "2.0", id: 7, result: {} }), []],
    // A batch (MCP 2025-03-26): every member's operation, in order.
    [
      JSON.stringify([
        call("a"),
        { jsonrpc: "2.0", id: 2, method: "tools/list" },
        { jsonrpc: "2.0", id: 3, result: {} },
      ]),
      [{ method: "tools/call", tool: "a" }, { method: "tools/list" }],
    ],
  ])("%s", (text, operations) => {
    expect(McpOperation.scan(text)).toEqual({ _tag: "Operations", operations })
  })

  it.each<[string, McpOperation.ScanFailure]>([
    ["", { _tag: "ParseError", message: "Parse error: the request body is not valid JSON" }],
    [
      '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
      { _tag: "ParseError", message: "Parse error: the request body is not valid JSON" },
    ],
    ["[]", { _tag: "InvalidRequest", message: "Invalid Request: empty batch" }],
    ["[1,2,3]", { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" }],
    ["1", { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" }],
    ["null", { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" }],
    [
      '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
      { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" },
    ],
    [
      `[${JSON.stringify(call("a"))}, 1]`,
      { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" },
    ],
    ["[[]]", { _tag: "InvalidRequest", message: "Invalid Request: the body is not a JSON-RPC message" }],
  ])("%s fails", (text, failure) => {
    expect(McpOperation.scan(text)).toEqual(failure)
  })

  it("scans a parsed body as its text", () => {
    expect(McpOperation.scanParsed(call("a"))).toEqual(McpOperation.scan(JSON.stringify(call("a"))))
  })
})

describe("McpOperation.errorBody (JSON-RPC 2.0 §5.1)", () => {
  it.each<[string, string]>([
    [
      "{",
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the request body is not valid JSON"}}',
    ],
    ["[]", '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}'],
    [
      "2",
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the body is not a JSON-RPC message"}}',
    ],
  ])("%s", (text, body) => {
    const scan = McpOperation.scan(text)
    if (scan._tag === "Operations") throw new Error("expected a failure")
    expect(McpOperation.errorBody(scan)).toBe(body)
  })
})

describe("McpOperation.nameOf", () => {
  it.each<[string, string]>([
    [JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }), "tools/list"],
    [JSON.stringify(call("search")), "tools/call search"],
    [JSON.stringify(call(1)), "tools/call"],
    [JSON.stringify([call("a"), call("b", 2), call("a", 3)]), "tools/call a, tools/call b"],
    [JSON.stringify({ jsonrpc: "2.0", id: 7, result: {} }), "*"],
    ["not json", "*"],
    ["[]", "*"],
  ])("%s -> %s", (text, name) => {
    expect(McpOperation.nameOf(McpOperation.scan(text))).toBe(name)
  })
})
