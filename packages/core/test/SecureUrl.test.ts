import { describe, expect, it } from "vitest"
import * as SecureUrl from "../src/SecureUrl.js"

describe("SecureUrl.isLoopbackHost and isLoopbackIp", () => {
  // host, loopback host, loopback IP literal
  it.each<[string, boolean, boolean]>([
    ["127.0.0.1", true, true],
    ["127.0.0.2", true, true],
    ["127.255.255.254", true, true],
    ["127.1", true, true],
    ["[::1]", true, true],
    ["::1", true, true],
    ["[0:0:0:0:0:0:0:1]", true, true],
    ["localhost", true, false],
    ["LOCALHOST", true, false],
    ["app.localhost", true, false],
    ["128.0.0.1", false, false],
    ["126.255.255.255", false, false],
    ["0.0.0.0", false, false],
    ["[::]", false, false],
    ["[::ffff:127.0.0.1]", false, false],
    ["localhost.example.com", false, false],
    ["notlocalhost", false, false],
    ["127.0.0.1.nip.io", false, false],
    ["example.com", false, false],
    ["", false, false],
  ])("%s: loopback host %s, loopback IP %s", (host, loopbackHost, loopbackIp) => {
    expect(SecureUrl.isLoopbackHost(host)).toBe(loopbackHost)
    expect(SecureUrl.isLoopbackIp(host)).toBe(loopbackIp)
  })
})

describe("SecureUrl.transportOf and isAllowed", () => {
  // url, transport, allowed with httpLoopback, allowed with neither, allowed with httpAnyHost
  it.each<[string, SecureUrl.Transport, boolean, boolean, boolean]>([
    ["https://as.example.com", "https", true, true, true],
    ["https://127.0.0.1:8443/", "https", true, true, true],
    ["http://127.0.0.1:9000", "http-loopback", true, false, true],
    ["http://127.0.0.2:9000", "http-loopback", true, false, true],
    ["http://[::1]:9000/mcp", "http-loopback", true, false, true],
    ["http://localhost:3000", "http-loopback", true, false, true],
    ["http://app.localhost", "http-loopback", true, false, true],
    ["http://as.example.com", "http", false, false, true],
    ["http://[::ffff:127.0.0.1]", "http", false, false, true],
    ["ftp://127.0.0.1/", "other", false, false, false],
    ["not a url", "other", false, false, false],
  ])("%s is %s", (url, transport, loopback, neither, anyHost) => {
    expect(SecureUrl.transportOf(url)).toBe(transport)
    if (URL.canParse(url)) expect(SecureUrl.transportOf(new URL(url))).toBe(transport)
    expect(SecureUrl.isAllowed(url, { httpLoopback: true })).toBe(loopback)
    expect(SecureUrl.isAllowed(url, { httpLoopback: false })).toBe(neither)
    expect(SecureUrl.isAllowed(url, { httpLoopback: false, httpAnyHost: true })).toBe(anyHost)
  })
})

describe("SecureUrl.matchRedirectUri (RFC 8252 §7.3)", () => {
  // requested, registered, match
  it.each<[string, ReadonlyArray<string>, string | undefined]>([
    ["https://app.example/cb", ["https://app.example/cb"], "https://app.example/cb"],
    ["https://app.example/cb/", ["https://app.example/cb"], undefined],
    ["https://APP.example/cb", ["https://app.example/cb"], undefined],
    ["http://127.0.0.1:5555/callback", ["http://127.0.0.1/callback"], "http://127.0.0.1/callback"],
    ["http://127.0.0.1/callback", ["http://127.0.0.1:1234/callback"], "http://127.0.0.1:1234/callback"],
    ["http://127.0.0.2:5555/cb", ["http://127.0.0.2/cb"], "http://127.0.0.2/cb"],
    ["http://[::1]:5555/cb?x=1", ["http://[::1]/cb?x=1"], "http://[::1]/cb?x=1"],
    ["http://127.0.0.1:5555/other", ["http://127.0.0.1/callback"], undefined],
    ["http://127.0.0.1:5555/cb", ["http://127.0.0.2/cb"], undefined],
    ["http://127.0.0.1:5555/cb", ["http://[::1]/cb"], undefined],
    ["http://localhost:5555/callback", ["http://localhost/callback"], undefined],
    ["https://127.0.0.1:5555/cb", ["https://127.0.0.1/cb"], undefined],
    ["http://127.0.0.1:5555/a/../cb", ["http://127.0.0.1/cb"], undefined],
  ])("%s against %j -> %s", (requested, registered, expected) => {
    expect(SecureUrl.matchRedirectUri(requested, registered)).toBe(expected)
  })

  it.each<[string, boolean]>([
    ["http://127.0.0.1/cb", true],
    ["http://127.0.0.9:80/cb", true],
    ["http://[::1]:1/", true],
    ["http://localhost/cb", false],
    ["https://127.0.0.1/cb", false],
    ["http://128.0.0.1/cb", false],
  ])("isLoopbackRedirectUri(%s) is %s", (uri, expected) => {
    expect(SecureUrl.isLoopbackRedirectUri(uri)).toBe(expected)
  })
})
