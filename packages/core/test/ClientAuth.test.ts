import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as ClientAuth from "../src/ClientAuth.js"

describe("ClientAuth.formUrlEncode (RFC 6749 Appendix B)", () => {
  it.each<[string, string]>([
    ["s6BhdRkqt3", "s6BhdRkqt3"],
    ["a b", "a+b"],
    ["a+b", "a%2Bb"],
    ["*-._", "*-._"],
    ["!'()~", "%21%27%28%29%7E"],
    [":/?#[]@&=%", "%3A%2F%3F%23%5B%5D%40%26%3D%25"],
    ["é€", "%C3%A9%E2%82%AC"],
    ["", ""],
  ])("%j -> %j", (value, encoded) => {
    expect(ClientAuth.formUrlEncode(value)).toBe(encoded)
  })
})

describe("ClientAuth.encodeClientSecretBasic (RFC 6749 §2.3.1, RFC 7617 §2)", () => {
  it.each<[string, string, string]>([
    // RFC 6749 §2.3.1's example credentials.
    ["s6BhdRkqt3", "gX1fBat3bV", "Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW"],
    // RFC 7617 §2's example user and password (a colon-free id, so only the secret's space is encoded).
    ["Aladdin", "open sesame", `Basic ${btoa("Aladdin:open+sesame")}`],
    ["id:with:colons", "s3cr!t'()~", `Basic ${btoa("id%3Awith%3Acolons:s3cr%21t%27%28%29%7E")}`],
    ["client", "pässwörd", `Basic ${btoa("client:p%C3%A4ssw%C3%B6rd")}`],
  ])("%j / %j -> %s", (id, secret, header) => {
    expect(ClientAuth.encodeClientSecretBasic(id, secret)).toBe(header)
    expect(ClientAuth.decodeClientSecretBasic(header)).toEqual({ clientId: id, clientSecret: secret })
  })

  it("round-trips any identifier and secret", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, unit: "grapheme" }), fc.string({ unit: "grapheme" }), (id, secret) => {
        const header = ClientAuth.encodeClientSecretBasic(id, secret)
        expect(ClientAuth.decodeClientSecretBasic(header)).toEqual({ clientId: id, clientSecret: secret })
      }),
    )
  })
})

describe("ClientAuth.decodeClientSecretBasic", () => {
  it.each<[string, ClientAuth.ClientSecretBasic]>([
    ["basic czZCaGRSa3F0MzpnWDFmQmF0M2JW", { clientId: "s6BhdRkqt3", clientSecret: "gX1fBat3bV" }],
    ["BASIC\tczZCaGRSa3F0MzpnWDFmQmF0M2JW ", { clientId: "s6BhdRkqt3", clientSecret: "gX1fBat3bV" }],
    // Senders that leave `!'()~` unencoded (encodeURIComponent) decode to the same credentials.
    [`Basic ${btoa("a!b:s3cr!t'()~")}`, { clientId: "a!b", clientSecret: "s3cr!t'()~" }],
    [`Basic ${btoa("client:")}`, { clientId: "client", clientSecret: "" }],
    [`Basic ${btoa("client:a:b")}`, { clientId: "client", clientSecret: "a:b" }],
  ])("%s", (header, credentials) => {
    expect(ClientAuth.decodeClientSecretBasic(header)).toEqual(credentials)
  })

  it.each<[string, string]>([
    ["Bearer czZCaGRSa3F0MzpnWDFmQmF0M2JW", "another scheme"],
    ["Basic", "no credentials"],
    ["Basic czZCaGRSa3F0Mz@nWDFmQmF0M2JW", "not base64"],
    ["Basic a", "a base64 length that cannot be"],
    [`Basic ${btoa("no-colon")}`, "no colon"],
    [`Basic ${btoa(":secret")}`, "an empty client identifier"],
    [`Basic ${btoa("client:%E0%A4%A")}`, "a malformed percent escape"],
    [`Basic ${btoa("client:%FF")}`, "a percent escape that is not UTF-8"],
  ])("%s: undefined (%s)", (header) => {
    expect(ClientAuth.decodeClientSecretBasic(header)).toBeUndefined()
  })
})

describe("ClientAuth.chooseMethod (RFC 8414 §2)", () => {
  const both = { secret: true, privateKey: true }
  it.each([
    [
      "a server that lists none supports client_secret_basic",
      undefined,
      { secret: true, privateKey: false },
      "client_secret_basic",
    ],
    ["a key alone, with a server that lists none: nothing", undefined, { secret: false, privateKey: true }, undefined],
    ["a key is preferred where it is listed", ["client_secret_basic", "private_key_jwt"], both, "private_key_jwt"],
    ["a secret where the key's method is not listed", ["client_secret_post"], both, "client_secret_post"],
    [
      "basic before post",
      ["client_secret_post", "client_secret_basic"],
      { secret: true, privateKey: false },
      "client_secret_basic",
    ],
    [
      "the method asked for, listed",
      ["client_secret_basic", "client_secret_post"],
      { ...both, method: "client_secret_post" },
      "client_secret_post",
    ],
    [
      "the method asked for, not listed: nothing",
      ["client_secret_basic"],
      { ...both, method: "client_secret_post" },
      undefined,
    ],
    [
      "the method asked for without its credential: nothing",
      ["private_key_jwt"],
      { secret: true, privateKey: false, method: "private_key_jwt" },
      undefined,
    ],
    [
      "nothing to authenticate with: nothing",
      ["none", "client_secret_basic"],
      { secret: false, privateKey: false },
      undefined,
    ],
  ] as const)("%s", (_name, supported, available, expected) => {
    expect(ClientAuth.chooseMethod(supported, available)).toBe(expected)
  })
})

describe("ClientAuth.apply (RFC 6749 §2.3.1, RFC 7523 §2.2)", () => {
  it("none sends the client ID in the form", () => {
    expect(ClientAuth.apply("none", { clientId: "-app" })).toEqual({ headers: {}, form: { client_id: "-app" } })
  })
  it("client_secret_basic sends the form-encoded ID and secret in an Authorization header", () => {
    expect(ClientAuth.apply("client_secret_basic", { clientId: "a:b", clientSecret: "s é" })).toEqual({
      headers: { authorization: `Basic ${btoa("a%3Ab:s+%C3%A9")}` },
      form: {},
    })
  })
  it("client_secret_post sends the ID and the secret in the form", () => {
    expect(ClientAuth.apply("client_secret_post", { clientId: "app", clientSecret: "s" })).toEqual({
      headers: {},
      form: { client_id: "app", client_secret: "s" },
    })
  })
  it("private_key_jwt sends the ID, the assertion type and the assertion", () => {
    expect(ClientAuth.apply("private_key_jwt", { clientId: "app", clientAssertion: "h.p.s" })).toEqual({
      headers: {},
      form: {
        client_id: "app",
        client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        client_assertion: "h.p.s",
      },
    })
  })
})

describe("ClientAuth.addTo", () => {
  it("sets the headers and form fields of a method on a request's", () => {
    const headers = new Headers({ accept: "application/json" })
    const body = new URLSearchParams({ grant_type: "refresh_token", client_id: "stale" })
    ClientAuth.addTo(ClientAuth.apply("client_secret_post", { clientId: "app", clientSecret: "s" }), headers, body)
    ClientAuth.addTo(ClientAuth.apply("client_secret_basic", { clientId: "app", clientSecret: "s" }), headers, body)
    expect([...headers]).toEqual([
      ["accept", "application/json"],
      ["authorization", `Basic ${btoa("app:s")}`],
    ])
    expect(body.toString()).toBe("grant_type=refresh_token&client_id=app&client_secret=s")
  })
})

describe("ClientAuth.clientAssertionClaims (RFC 7523 §3)", () => {
  it("names the client as iss and sub, the server as aud, and lives 60 seconds by default", () => {
    expect(ClientAuth.clientAssertionClaims("-notes", "https://as.example.com", 1000, "-j1")).toEqual({
      iss: "-notes",
      sub: "-notes",
      aud: "https://as.example.com",
      jti: "-j1",
      iat: 1000,
      exp: 1060,
    })
  })

  it("takes another lifetime", () => {
    expect(ClientAuth.clientAssertionClaims("c", "https://as.example.com/token", 0, "j", 5).exp).toBe(5)
  })
})
