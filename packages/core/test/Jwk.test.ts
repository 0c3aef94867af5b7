import { describe, expect, it } from "vitest"
import * as Jwk from "../src/Jwk.js"

const PROBLEM = "must not be present: only public keys may be published"

/** Public keys of each type (RFC 7517 Appendix A.1 shapes, values shortened). */
const publicKeys: ReadonlyArray<Record<string, unknown>> = [
  {
    kty: "EC",
    crv: "P-256",
    x: "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
    y: "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM",
    use: "enc",
    kid: "1",
  },
  {
    kty: "RSA",
    n: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECP",
    e: "AQAB",
    alg: "RS256",
    kid: "2011-04-29",
  },
  { kty: "OKP", crv: "Ed25519", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" },
]

describe("Jwk.findPrivateKeyMaterial (RFC 7517 §4, RFC 7518 §6, RFC 7591 §2)", () => {
  it.each(Jwk.privateMembers.map((member) => [member] as const))("refuses %s in a JWK", (member) => {
    const kind = member === "k" ? "symmetric" : "private"
    const key = member === "k" ? { kty: "oct", k: "GawgguFyGrWKav7AX4VKUg" } : { ...publicKeys[1], [member]: "x" }
    expect(Jwk.findPrivateKeyMaterial(key)).toEqual({
      _tag: "PrivateKeyMaterial",
      member,
      kind,
      path: member,
      problem: PROBLEM,
    })
  })

  it.each(Jwk.privateMembers.map((member) => [member] as const))("refuses %s nested in a JWK Set", (member) => {
    const set = { keys: [...publicKeys, { kty: "RSA", n: "n", e: "AQAB", [member]: "x" }] }
    expect(Jwk.findPrivateKeyMaterial(set)).toEqual({
      _tag: "PrivateKeyMaterial",
      member,
      kind: member === "k" ? "symmetric" : "private",
      path: `keys.${publicKeys.length}.${member}`,
      problem: PROBLEM,
    })
  })

  it("names the first key and the first member (in privateMembers order) that is private", () => {
    const set = { keys: [publicKeys[0], { kty: "RSA", qi: "x", p: "y" }, { kty: "oct", k: "z" }] }
    expect(Jwk.findPrivateKeyMaterial(set)).toMatchObject({ member: "p", path: "keys.1.p" })
  })

  it("counts a member present as null", () => {
    expect(Jwk.findPrivateKeyMaterial({ kty: "EC", d: null })).toMatchObject({ member: "d", path: "d" })
  })

  it.each(publicKeys.map((key) => [key.kty, key] as const))("accepts a public %s key, alone and in a set", (_, key) => {
    expect(Jwk.findPrivateKeyMaterial(key)).toBeUndefined()
    expect(Jwk.findPrivateKeyMaterial({ keys: [key] })).toBeUndefined()
  })

  it.each<[string, unknown]>([
    ["an empty set", { keys: [] }],
    ["a public set", { keys: publicKeys }],
    ["entries that are not objects", { keys: [null, "d", 1, ["k"]] }],
    ["null", null],
    ["a string", "k"],
    ["an array", [{ kty: "oct", k: "x" }]],
  ])("finds nothing in %s", (_, value) => {
    expect(Jwk.findPrivateKeyMaterial(value)).toBeUndefined()
  })
})
