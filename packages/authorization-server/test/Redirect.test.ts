import { describe, expect, it } from "vitest"
import { isLocalhostOnly, isPrivateUseScheme, redirectUriProblem } from "../src/internal/redirect.js"

describe("redirectUriProblem: the one rule for registered redirect URIs", () => {
  it.each([
    ["https://app.example.com/cb", undefined],
    ["http://127.0.0.1:8080/cb", undefined],
    ["http://localhost/cb", undefined],
    ["http://[::1]/cb", undefined],
    ["com.example.app:/cb", undefined],
    ["/cb", { kind: "not-absolute" }],
    ["https://app.example.com/cb#x", { kind: "fragment" }],
    ["https://app.example.com/cb#", { kind: "fragment" }],
    ["http://app.example.com/cb", { kind: "http-not-loopback" }],
    ["javascript:alert(1)", { kind: "scheme", scheme: "javascript", forbidden: true }],
    ["myapp:/cb", { kind: "scheme", scheme: "myapp", forbidden: false }],
    ["myapp.:/cb", { kind: "scheme", scheme: "myapp.", forbidden: false }],
  ])("%s -> %j", (uri, problem) => {
    expect(redirectUriProblem(uri)).toEqual(problem)
  })

  it("tells private-use schemes from web redirects", () => {
    expect(isPrivateUseScheme("com.example.app:/cb")).toBe(true)
    expect(isPrivateUseScheme("http://127.0.0.1/cb")).toBe(false)
    expect(isPrivateUseScheme("https://app.example.com/cb")).toBe(false)
  })
})

describe("isLocalhostOnly: the consent page's warning rule", () => {
  it.each([
    ["http://127.0.0.1:3000/cb", true],
    ["http://localhost/cb", true],
    ["http://app.localhost/cb", true],
    ["com.example.app:/cb", true],
    ["https://app.example.com/cb", false],
    ["not a uri", false],
  ])("%s -> %s", (uri, expected) => {
    expect(isLocalhostOnly(uri)).toBe(expected)
  })
})
