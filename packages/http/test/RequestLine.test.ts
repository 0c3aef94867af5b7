import { describe, expect, it } from "vitest"
import { classifyMethod, isValidHost, parseTarget } from "../src/RequestLine.js"

describe("isValidHost", () => {
  it.each([
    "example.com",
    "example.com:443",
    "127.0.0.1",
    "127.0.0.1:8080",
    "[::1]",
    "[::1]:9100",
    "localhost:0",
    "xn--bcher-kva.example",
    "a.b-c_d~e",
    "x:",
    "x:65535",
  ])("accepts %s", (host) => {
    expect(isValidHost(host)).toBe(true)
  })

  it.each([
    ["empty", ""],
    ["a space", " "],
    ["inner space", "a b"],
    ["lone bracket", "["],
    ["lone percent", "%"],
    ["bad escape", "a%zz"],
    ["hash", "#"],
    ["question mark", "?"],
    ["unbracketed IPv6", "::1"],
    ["out-of-range port", "x:99999"],
    ["port 65536", "x:65536"],
    ["non-numeric port", "x:http"],
    ["userinfo", "evil@127.0.0.1"],
    ["path", "a/b"],
    ["backslash", "a\\b"],
    ["bracketed non-address", "[zz]"],
    ["bracketed bad IPv6", "[1:2:3]"],
  ])("refuses %s", (_, host) => {
    expect(isValidHost(host)).toBe(false)
  })
})

describe("parseTarget", () => {
  it.each([
    ["/", "/"],
    ["/mcp?x=1", "/mcp?x=1"],
    ["/a#frag", "/a"],
    ["//evil.example/x", "//evil.example/x"],
    ["http://other.example/x?y", "/x?y"],
    ["https://other.example", "/"],
  ])("%s routes on %s", (target, path) => {
    expect(parseTarget(target)).toEqual({ _tag: "Path", path })
  })

  it("asterisk-form", () => {
    expect(parseTarget("*")).toEqual({ _tag: "Asterisk" })
  })

  it.each([
    ["", "the request-target must be an absolute path starting with / or an absolute URI"],
    ["%", "the request-target must be an absolute path starting with / or an absolute URI"],
    ["mcp", "the request-target must be an absolute path starting with / or an absolute URI"],
    ["http://[", "the request-target is not a valid absolute URI"],
    ["ftp://example.com/x", "the request-target's scheme must be http or https"],
    ["http://u:p@example.com/x", "the request-target must not contain userinfo"],
  ])("refuses %j: %s", (target, reason) => {
    expect(parseTarget(target)).toEqual({ _tag: "Invalid", reason })
  })
})

describe("classifyMethod", () => {
  it.each([
    ["GET", "handled"],
    ["POST", "handled"],
    ["DELETE", "handled"],
    ["PATCH", "handled"],
    ["OPTIONS", "handled"],
    ["TRACE", "forbidden"],
    ["TRACK", "forbidden"],
    ["CONNECT", "forbidden"],
    ["connect", "forbidden"],
    ["PROPFIND", "unknown"],
    ["QUERY", "unknown"],
    ["get", "unknown"],
  ])("%s is %s", (method, kind) => {
    expect(classifyMethod(method)).toBe(kind)
  })
})
