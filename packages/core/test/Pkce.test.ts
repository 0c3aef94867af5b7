import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Pkce from "../src/Pkce.js"

describe("Pkce", () => {
  it("computes the RFC 7636 Appendix B challenge", async () => {
    const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    expect(await Pkce.challengeS256(verifier)).toBe("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    expect(await Pkce.verifyS256(verifier, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")).toBe(true)
  })

  it("rejects a verifier that does not match, one that is too short, and one with illegal characters", async () => {
    const challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    expect(await Pkce.verifyS256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXl", challenge)).toBe(false)
    expect(await Pkce.verifyS256("short", challenge)).toBe(false)
    expect(await Pkce.verifyS256(`${"a".repeat(42)}+`, challenge)).toBe(false)
    expect(await Pkce.verifyS256("a".repeat(129), challenge)).toBe(false)
  })

  it("generates verifiers of the requested length from the unreserved alphabet", () => {
    fc.assert(
      fc.property(fc.integer({ min: 43, max: 128 }), (length) => {
        const verifier = Pkce.generateVerifier(length)
        expect(verifier).toHaveLength(length)
        expect(Pkce.isVerifier(verifier)).toBe(true)
      }),
    )
  })

  it("refuses lengths outside 43..128 with a message that says the range", () => {
    expect(() => Pkce.generateVerifier(42)).toThrow(
      "PKCE code verifier length must be an integer from 43 to 128, got 42",
    )
    expect(() => Pkce.generateVerifier(129)).toThrow("got 129")
  })

  it("generates distinct verifiers whose challenge verifies", async () => {
    const a = await Pkce.generate()
    const b = await Pkce.generate()
    expect(a.verifier).not.toBe(b.verifier)
    expect(a.method).toBe("S256")
    expect(await Pkce.verifyS256(a.verifier, a.challenge)).toBe(true)
    expect(await Pkce.verifyS256(b.verifier, a.challenge)).toBe(false)
  })
})
