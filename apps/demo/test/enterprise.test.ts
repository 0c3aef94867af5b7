import { beforeAll, describe, expect, it } from "vitest"
import { runEnterpriseDemo } from "../src/enterprise.js"
import { ENTERPRISE_STEPS, STEPS } from "../src/narrator.js"
import { describe as describeSecret } from "../src/redact.js"
import { positions } from "./support/positions.js"
import { recorded } from "./support/recorded.js"

describe("runEnterpriseDemo: enterprise-managed authorization", () => {
  let out = ""
  let secrets: ReadonlyArray<string> = []
  let result: Awaited<ReturnType<typeof runEnterpriseDemo>>

  beforeAll(async () => {
    ;({ out, secrets, result } = await recorded(runEnterpriseDemo))
  })

  it("prints the flow in order: one sign-in at the identity provider, the exchange, the assertion, the MCP call", () => {
    const order = [
      "Sign in once, at the identity provider",
      '"sub": "alice"',
      '"aud": "demo-chat"',
      STEPS.challenge,
      STEPS.resourceMetadata,
      STEPS.serverMetadata,
      '"authorization_grant_profiles_supported": ["urn:ietf:params:oauth:grant-profile:id-jag"]',
      ENTERPRISE_STEPS.tokenExchange,
      "audience              http://127.0.0.1:",
      "subject_token         eyJhbGciOi…[redacted",
      '"issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"',
      '"typ": "oauth-id-jag+jwt"',
      '"client_id": "demo-chat"',
      ENTERPRISE_STEPS.jwtBearer,
      "assertion   eyJhbGciOi…[redacted",
      '"sub": "alice"',
      STEPS.mcp,
      'list_notes → "No notes yet."',
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
    // No consent page, no login page of the MCP server's authorization server, no registration.
    expect(out).not.toContain(STEPS.registration)
    expect(out).not.toContain(STEPS.login)
    expect(out).not.toContain(STEPS.authorizationRequest)
    expect(result.steps).toBeGreaterThanOrEqual(6)
  })

  it("prints no credential: the ID token, the assertion, the access token and the secrets are redacted", () => {
    const jwts = secrets.filter((s) => /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(s))
    expect(jwts.length).toBeGreaterThanOrEqual(3)
    for (const secret of secrets) expect(out.includes(secret), `leaked ${describeSecret(secret)}`).toBe(false)
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })
})
