import { beforeAll, describe, expect, it } from "vitest"
import { DOWNSTREAM_SECTIONS, runDownstreamDemo } from "../src/downstream.js"
import { DOWNSTREAM_STEPS, STEPS } from "../src/narrator.js"
import { describe as describeSecret } from "../src/redact.js"
import { positions } from "./support/positions.js"
import { recorded } from "./support/recorded.js"

describe("runDownstreamDemo: the notes server calls the calendar for its user (token exchange)", () => {
  let out = ""
  let secrets: ReadonlyArray<string> = []
  let result: Awaited<ReturnType<typeof runDownstreamDemo>>

  beforeAll(async () => {
    ;({ out, secrets, result } = await recorded(runDownstreamDemo))
  })

  it("prints each step in order: the agent's usual flow, the inbound token, the exchange, the call, a refusal", () => {
    const calendar = /calendar API {10}(\S+)/u.exec(out)?.[1] ?? "(no calendar URL)"
    const order = [
      "the default run's agent, unchanged",
      DOWNSTREAM_SECTIONS.connect,
      STEPS.challenge,
      STEPS.registration,
      STEPS.login,
      STEPS.consent,
      STEPS.token,
      "tools: list_notes, read_note, write_note, delete_note, summarize_calendar",
      DOWNSTREAM_SECTIONS.inbound,
      DOWNSTREAM_STEPS.inbound,
      "Authorization: Bearer eyJhbGciOi…[redacted",
      '"sub": "alice"',
      `"aud": "${result.mcpUrl}"`,
      '"client_id": "',
      "aud = the notes server, client_id = the agent",
      DOWNSTREAM_SECTIONS.call,
      STEPS.mcp,
      "JSON-RPC tools/call summarize_calendar",
      'calendar: 3 event(s) of "alice" read by "notes-server", acting for them',
      "while answering that request, the notes server made these calls of its own",
      DOWNSTREAM_STEPS.exchange,
      `→ POST ${result.issuer}/token`,
      "Authorization: Basic [redacted",
      "grant_type          urn:ietf:params:oauth:grant-type:token-exchange",
      `resource            ${calendar}`,
      "scope               calendar:read",
      "subject_token       eyJhbGciOi…[redacted",
      "subject_token_type  urn:ietf:params:oauth:token-type:access_token",
      "← 200 OK",
      '"access_token": "eyJhbGciOi…[redacted',
      '"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"',
      "the new access token, decoded",
      '"sub": "alice"',
      `"aud": "${calendar}"`,
      '"client_id": "notes-server"',
      '"scope": "calendar:read"',
      '"act": {',
      '"sub": "notes-server"',
      'act.sub = "notes-server": the notes server acts for them',
      DOWNSTREAM_STEPS.call,
      `→ GET ${calendar}`,
      "Authorization: Bearer eyJhbGciOi…[redacted",
      "← 200 OK",
      '"title": "Standup"',
      'summarize_calendar → "3 events:\\n',
      "Standup",
      DOWNSTREAM_SECTIONS.refused,
      DOWNSTREAM_STEPS.refused,
      "Authorization: Basic [redacted",
      "subject_token       eyJhbGciOi…[redacted",
      "resource            http://127.0.0.1:",
      "← 400 Bad Request",
      '"error": "invalid_target"',
      `"error_description": "the client notes-server may not exchange a token for ${result.mcpUrl} for one for http://127.0.0.1:`,
      "Done",
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
  })

  it("prints no credential: the tokens (inbound and exchanged), the secrets and the password are redacted", () => {
    const jwts = secrets.filter((s) => /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(s))
    // The agent's access token and the exchanged one.
    expect(jwts.length).toBeGreaterThanOrEqual(2)
    for (const secret of secrets) expect(out.includes(secret), `leaked ${describeSecret(secret)}`).toBe(false)
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })
})
