import { beforeAll, describe, expect, it } from "vitest"
import { DPOP_SECTIONS, runDpopDemo } from "../src/dpop.js"
import { DPOP_STEPS, MACHINE_STEPS, STEPS } from "../src/narrator.js"
import { recorded } from "./support/recorded.js"

/** Where each expected text first appears after the previous one; -1 when missing. */
const positions = (text: string, needles: ReadonlyArray<string>): Array<number> => {
  let from = 0
  return needles.map((needle) => {
    const at = text.indexOf(needle, from)
    if (at >= 0) from = at + needle.length
    return at
  })
}

describe("runDpopDemo", () => {
  let out = ""
  let secrets: ReadonlyArray<string> = []

  beforeAll(async () => {
    ;({ out, secrets } = await recorded(runDpopDemo))
  })

  it("shows the nonces, a decoded proof, a refused replay and the bound token refused as Bearer, in order", () => {
    const order = [
      DPOP_SECTIONS.connect,
      DPOP_STEPS.challenge,
      'WWW-Authenticate: Bearer resource_metadata="',
      ', DPoP resource_metadata="',
      MACHINE_STEPS.clientCredentials,
      '"error": "use_dpop_nonce"',
      '"token_type": "DPoP"',
      '"cnf": {',
      '"jkt": "',
      "cnf.jkt = ",
      'error="use_dpop_nonce"',
      DPOP_STEPS.mcp,
      "Authorization: DPoP ",
      "DPoP: ",
      'list_notes → "No notes yet."',
      "token endpoint answers: 400, 200",
      DPOP_SECTIONS.proof,
      '"typ": "dpop+jwt"',
      '"htm": "POST"',
      "the key's thumbprint equals the token's cnf.jkt",
      DPOP_SECTIONS.replay,
      'HTTP 401  WWW-Authenticate: DPoP resource_metadata="',
      'error="invalid_dpop_proof", error_description="the DPoP proof was already used"',
      DPOP_SECTIONS.bearer,
      'error="invalid_token", error_description="The access token is bound to a key: present it with the DPoP scheme"',
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
  })

  it("calls the DPoP challenge and the DPoP requests by their scheme, never Bearer", () => {
    expect(out).not.toContain(STEPS.challenge)
    expect(out).not.toContain(STEPS.mcp)
    expect(out).not.toContain("Authorization: Bearer")
  })

  it("prints no key material, no token and no secret", () => {
    expect(out).not.toMatch(/"(x|y|d)": "/)
    expect(secrets.length).toBeGreaterThan(0)
    for (const secret of secrets) expect(out).not.toContain(secret)
  })
})
