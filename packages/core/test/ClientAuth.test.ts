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
