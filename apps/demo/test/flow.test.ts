import { existsSync } from "node:fs"
import { createAuthClient, isAuthError } from "@keyway/client"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { scriptedUser } from "../src/agent.js"
import { runDemo } from "../src/flow.js"
import { Narrator, STEPS } from "../src/narrator.js"
import { describe as describeSecret, Redactor } from "../src/redact.js"
import { type Stack, startStack } from "../src/stack.js"
import { Transcript } from "../src/transcript.js"
import { positions } from "./support/positions.js"
import { recorded } from "./support/recorded.js"

describe("runDemo", () => {
  let out = ""
  let err = ""
  let secrets: ReadonlyArray<string> = []
  let result: Awaited<ReturnType<typeof runDemo>>

  beforeAll(async () => {
    ;({ out, err, secrets, result } = await recorded(runDemo))
  })

  it("prints every step of the flow, in order", () => {
    const order = [
      STEPS.challenge,
      STEPS.resourceMetadata,
      STEPS.serverMetadata,
      STEPS.registration,
      STEPS.authorizationRequest,
      STEPS.login,
      STEPS.consent,
      STEPS.authorizationResponse,
      STEPS.token,
      STEPS.mcp,
      "tools: list_notes, read_note, write_note, delete_note",
      'list_notes → "No notes yet."',
      STEPS.insufficientScope,
      STEPS.authorizationRequest,
      STEPS.consent,
      STEPS.authorizationResponse,
      STEPS.token,
      'write_note → "Saved note #1."',
      STEPS.refresh,
      'read_note → "#1 Hello\\nWritten by the Keyway demo after a step-up to notes:write."',
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
    expect(result.steps).toBe(19)
    // One registration: the step-up reuses it.
    expect(out.split(STEPS.registration)).toHaveLength(2)
  })

  it("shows the challenge, PKCE S256 and resource, the iss check, and the step-up scope", () => {
    expect(out).toMatch(
      new RegExp(
        `WWW-Authenticate: Bearer resource_metadata="${result.mcpUrl.replace("/mcp", "")}/\\.well-known/oauth-protected-resource/mcp", scope="notes:read"`,
      ),
    )
    expect(out).toMatch(/code_challenge_method {2}S256/)
    expect(out).toMatch(/code_challenge {9}[\w-]{43}\n/)
    expect(out).toContain(`resource               ${result.mcpUrl}`)
    expect(out).toContain("✓ BASE64URL(SHA-256(code_verifier)) equals the code_challenge of the authorization request")
    expect(out).toContain(`iss    ${result.issuer}`)
    expect(out).toContain("then iss = the issuer it discovered (RFC 9207 §2.4)")
    expect(out).toContain('scope="notes:read notes:write", error="insufficient_scope"')
    expect(out).toContain("scope                  notes:read notes:write")
    expect(out).toContain("alice clicks Approve")
    expect(out).toContain("notes:write: Create, change and delete your notes")
    expect(out).toMatch(
      /refresh token rotated: \[redacted, 43 chars, fp [0-9a-f]{8}\] → \[redacted, 43 chars, fp [0-9a-f]{8}\]/,
    )
    expect(err).toContain("… starting the authorization server and the MCP server\n")
  })

  it("prints no credential: tokens, codes, verifiers, cookies, CSRF tokens, the password", () => {
    const jwts = secrets.filter((s) => /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(s))
    // Three access tokens: the first, the stepped-up one, the refreshed one.
    expect(jwts).toHaveLength(3)
    expect(secrets.length).toBeGreaterThan(12)
    for (const secret of secrets) expect(out.includes(secret), `leaked ${describeSecret(secret)}`).toBe(false)
    for (const jwt of jwts) expect(out).toContain(describeSecret(jwt))
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })

  it("removes the temporary data directory", async () => {
    const dir = /SQLite in (\S+)\)/.exec(out)?.[1]
    expect(dir).toMatch(/keyway-demo-/)
    expect(existsSync(dir as string)).toBe(false)
  })
})

describe("the scripted user", () => {
  let stack: Stack
  beforeAll(async () => {
    stack = await startStack()
  })
  afterAll(async () => {
    await stack?.close()
  })

  const client = (password: string, lines: Array<string>) => {
    const redactor = new Redactor()
    const transcript = new Transcript({ write: (text) => lines.push(text), redactor })
    const narrator = new Narrator(transcript, redactor, { mcpUrl: stack.mcpUrl, issuer: stack.issuer })
    return createAuthClient({
      clientName: "Scripted user test",
      userAgent: scriptedUser({ narrator, username: "alice", password }),
    })
  }

  it("fails with the login page's message when the password is wrong", async () => {
    const lines: Array<string> = []
    const auth = client("not-the-password", lines)
    const error = await auth.authorize(stack.mcpUrl).catch((e: unknown) => e)
    await auth.dispose()
    expect(isAuthError(error)).toBe(true)
    expect(error).toMatchObject({
      step: "authorization",
      reason: "user-agent-failed",
      message: "the demo user could not sign in: Wrong username or password.",
    })
    expect(lines.join("")).not.toContain("not-the-password")
  })

  it("fails with interaction-required when the server shows an error page", async () => {
    const auth = client(stack.users[0]!.password, [])
    const begun = await auth.begin(stack.mcpUrl)
    await auth.dispose()
    const bad = new URL(begun.url)
    bad.searchParams.set("redirect_uri", "http://127.0.0.1/elsewhere")
    const redactor = new Redactor()
    const narrator = new Narrator(new Transcript({ write: () => {}, redactor }), redactor, {
      mcpUrl: stack.mcpUrl,
      issuer: stack.issuer,
    })
    const agent = scriptedUser({ narrator, username: "alice", password: stack.users[0]!.password })
    const failure = await Effect.runPromise(Effect.flip(Effect.flatMap(agent.open, (session) => session.run(bad.href))))
    expect(failure).toMatchObject({
      step: "authorization",
      reason: "interaction-required",
      url: `${stack.issuer}/authorize`,
      message:
        'the authorization server showed a page the demo user cannot handle (HTTP 400, "Authorization error"): This request cannot be completed Error: invalid_request redirect_uri does not match any URI registered for this client The application that sent you here made a request this server cannot accept. You can close this page.',
    })
  })
})
