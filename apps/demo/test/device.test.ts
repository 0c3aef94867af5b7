import { beforeAll, describe, expect, it } from "vitest"
import { DEVICE_SECTIONS, runDeviceDemo } from "../src/device.js"
import { DEVICE_STEPS, STEPS } from "../src/narrator.js"
import { describe as describeSecret } from "../src/redact.js"
import { positions } from "./support/positions.js"
import { recorded } from "./support/recorded.js"

describe("runDeviceDemo: an agent without a browser (device authorization grant)", () => {
  let out = ""
  let secrets: ReadonlyArray<string> = []
  let result: Awaited<ReturnType<typeof runDeviceDemo>>

  beforeAll(async () => {
    ;({ out, secrets, result } = await recorded(runDeviceDemo))
  })

  it("prints each step in order: the code shown, pending polls, the user on the page, the token, a tool, a refresh", () => {
    const userCode =
      /enter the code ([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\n/u.exec(out)?.[1] ?? "(none)"
    const typed = userCode.replace("-", "").toLowerCase()
    const order = [
      "device authorization on, polling interval 1 second",
      DEVICE_SECTIONS.connect,
      STEPS.challenge,
      STEPS.resourceMetadata,
      STEPS.serverMetadata,
      `"device_authorization_endpoint": "${result.issuer}/device_authorization"`,
      DEVICE_STEPS.deviceAuthorization,
      `→ POST ${result.issuer}/device_authorization`,
      `resource   ${result.mcpUrl}`,
      "scope      notes:read",
      "client_id  demo-device",
      "← 200 OK",
      '"device_code": "[redacted, 43 chars, fp ',
      `"user_code": "${userCode}"`,
      `"verification_uri": "${result.issuer}/device"`,
      `"verification_uri_complete": "${result.issuer}/device?user_code=${userCode}"`,
      '"expires_in": 600',
      '"interval": 1',
      "the agent shows the user, on its terminal",
      `To authorize, visit ${result.issuer}/device and enter the code ${userCode}`,
      `or open ${result.issuer}/device?user_code=${userCode}`,
      "(the code expires in 10 minutes)",
      DEVICE_STEPS.poll,
      "grant_type   urn:ietf:params:oauth:grant-type:device_code",
      "device_code  [redacted, 43 chars, fp ",
      "← 400 Bad Request",
      '"error": "authorization_pending"',
      DEVICE_SECTIONS.user,
      DEVICE_STEPS.verification,
      `→ GET ${result.issuer}/device  (typed in by hand`,
      'the browser shows "Sign in"',
      STEPS.login,
      'alice signs in; the browser shows "Connect a device": Enter the code shown on your device.',
      DEVICE_STEPS.code,
      `alice types "${typed}": the code ${userCode} in lower case and without its dash`,
      DEVICE_STEPS.consent,
      "heading   Authorize Demo terminal agent?",
      "client    Demo terminal agent",
      "resource  Keyway notes",
      "scopes    notes:read: Read your notes",
      `code      ${userCode}`,
      "warning   This request started on another device. Approve only if you started it yourself",
      'alice clicks Approve; the browser shows "Device connected"',
      DEVICE_STEPS.poll,
      "← 200 OK",
      '"access_token": "eyJhbGciOi…[redacted',
      '"refresh_token": "[redacted',
      `"aud": "${result.mcpUrl}"`,
      '"client_id": "demo-device"',
      STEPS.mcp,
      "tools: list_notes, read_note, write_note, delete_note",
      DEVICE_SECTIONS.call,
      'list_notes → "No notes yet."',
      DEVICE_SECTIONS.refresh,
      STEPS.refresh,
      "refresh token rotated",
      'list_notes → "No notes yet."',
      "Done",
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
    // One device authorization: the refresh did not ask the user again; no browser, no redirect.
    expect(out.split(`→ POST ${result.issuer}/device_authorization`)).toHaveLength(2)
    expect(out).not.toContain(STEPS.authorizationRequest)
    expect(out).not.toContain(STEPS.registration)
    // The QR code is for terminals, not for the transcript.
    expect(out).not.toContain("or scan:")
    expect(out).not.toMatch(/[▀▄█]/u)
  })

  it("prints no credential: the device code, the tokens, the password and the cookies are redacted", () => {
    const deviceCode = /"device_code": "(\[redacted[^\]]*\])"/u.exec(out)?.[1]
    expect(deviceCode).toMatch(/^\[redacted, 43 chars, fp [0-9a-f]{8}\]$/u)
    const jwts = secrets.filter((s) => /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(s))
    // The first access token and the refreshed one.
    expect(jwts).toHaveLength(2)
    for (const secret of secrets) expect(out.includes(secret), `leaked ${describeSecret(secret)}`).toBe(false)
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })
})
