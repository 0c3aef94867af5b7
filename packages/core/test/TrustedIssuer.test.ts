import { describe, expect, it } from "vitest"
import { z } from "zod"
import * as TrustedIssuer from "../src/TrustedIssuer.js"

const key = { kty: "OKP", crv: "Ed25519", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" }
const issuer = "https://issuer.example"

/** Every issue as `path: message`. */
const issues = (schema: z.ZodType, value: unknown): ReadonlyArray<string> => {
  const parsed = schema.safeParse(value)
  return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`)
}

describe("TrustedIssuer.schema (RFC 7517 §5)", () => {
  it("accepts an issuer with jwksUri, or with public inline keys", () => {
    expect(issues(TrustedIssuer.schema, { issuer, jwksUri: `${issuer}/jwks` })).toEqual([])
    expect(issues(TrustedIssuer.schema, { issuer, jwks: { keys: [key] } })).toEqual([])
  })

  it.each([
    ["neither", {}],
    ["both", { jwksUri: `${issuer}/jwks`, jwks: { keys: [key] } }],
  ])("refuses %s of jwksUri and jwks, at jwksUri by default or at the issuer when asked", (_, keys) => {
    expect(issues(TrustedIssuer.schema, { issuer, ...keys })).toEqual(["jwksUri: give exactly one of jwksUri and jwks"])
    expect(issues(TrustedIssuer.schemaWith({ exactlyOneAt: "issuer" }), { issuer, ...keys })).toEqual([
      ": give exactly one of jwksUri and jwks",
    ])
  })

  it.each([
    ["d", { ...key, d: "private" }],
    ["k", { kty: "oct", k: "GawgguFyGrWKav7AX4VKUg" }],
  ])("refuses inline keys with %s, at the member (RFC 7517 §9.2)", (member, secret) => {
    expect(issues(TrustedIssuer.schema, { issuer, jwks: { keys: [key, secret] } })).toEqual([
      `jwks.keys.1.${member}: must not be present: only public keys may be published`,
    ])
  })

  it("refuses an empty key set, an empty issuer and unknown members", () => {
    expect(issues(TrustedIssuer.schema, { issuer, jwks: { keys: [] } })).toEqual([
      "jwks.keys: must hold at least one key",
    ])
    expect(issues(TrustedIssuer.schema, { issuer: "", jwksUri: `${issuer}/jwks` })).toEqual([
      "issuer: must not be empty",
    ])
    const unknown = TrustedIssuer.schema.safeParse({ issuer, jwksUri: `${issuer}/jwks`, rules: [] })
    expect(unknown.error?.issues).toEqual([
      { code: "unrecognized_keys", keys: ["rules"], path: [], message: "must be an object" },
    ])
  })

  it("keeps its refinement when extended with safeExtend", () => {
    const extended = TrustedIssuer.schema.safeExtend({ clients: z.array(z.string()).optional() })
    expect(issues(extended, { issuer, clients: ["chat"] })).toEqual(["jwksUri: give exactly one of jwksUri and jwks"])
    expect(issues(extended, { issuer, jwksUri: `${issuer}/jwks`, clients: ["chat"] })).toEqual([])
  })
})

describe("TrustedIssuer.transportProblem (RFC 7517 §9.1, RFC 8252 §8.3)", () => {
  it.each([
    ["https://issuer.example/jwks", {}, undefined],
    ["https://127.0.0.1/jwks", {}, undefined],
    [
      "http://127.0.0.1:9/jwks",
      {},
      "must use https; set development.allowHttpLoopbackJwks to fetch keys over http from a loopback host",
    ],
    [
      "http://localhost:9/jwks",
      { allowance: "dev.loopbackKeys" },
      "must use https; set dev.loopbackKeys to fetch keys over http from a loopback host",
    ],
    ["http://[::1]:9/jwks", { allowHttpLoopback: true }, undefined],
    ["http://issuer.example/jwks", { allowHttpLoopback: true }, "must be an https URL"],
    ["ftp://issuer.example/jwks", {}, "must be an https URL"],
    ["not a url", {}, "must be an https URL"],
  ] as const)("%s %j: %s", (uri, options, problem) => {
    expect(TrustedIssuer.transportProblem(uri, options)).toBe(problem)
  })
})
