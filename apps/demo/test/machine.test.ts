import { existsSync } from "node:fs"
import { beforeAll, describe, expect, it } from "vitest"
import { runMachineDemo } from "../src/machine.js"
import { MACHINE_STEPS, STEPS } from "../src/narrator.js"
import { describe as describeSecret } from "../src/redact.js"
import { positions } from "./support/positions.js"
import { recorded } from "./support/recorded.js"

describe("runMachineDemo: client credentials", () => {
  let out = ""
  let secrets: ReadonlyArray<string> = []
  let result: Awaited<ReturnType<typeof runMachineDemo>>

  beforeAll(async () => {
    ;({ out, secrets, result } = await recorded((options) => runMachineDemo("client-credentials", options)))
  })

  it("prints the machine flow in order: no registration, no user, a refused write, a renewal", () => {
    const order = [
      STEPS.challenge,
      STEPS.resourceMetadata,
      STEPS.serverMetadata,
      MACHINE_STEPS.clientCredentials,
      "Authorization: Basic [redacted",
      "grant_type  client_credentials",
      '"sub": "demo-machine"',
      STEPS.mcp,
      'list_notes → "No notes yet."',
      STEPS.insufficientScope,
      "the client stops with a typed error (step-up/insufficient-scope)",
      MACHINE_STEPS.clientCredentials,
      "scope       notes:read\n",
      'list_notes → "No notes yet."',
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
    expect(out).not.toContain(STEPS.registration)
    expect(out).not.toContain(STEPS.login)
    expect(out).not.toContain(STEPS.authorizationRequest)
    expect(out).not.toContain('"refresh_token": ')
    expect(result.steps).toBe(9)
  })

  it("prints no credential: the client secret and both access tokens are redacted", () => {
    const jwts = secrets.filter((s) => /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(s))
    expect(jwts).toHaveLength(2)
    for (const secret of secrets) expect(out.includes(secret), `leaked ${describeSecret(secret)}`).toBe(false)
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })

  it("removes the temporary data directory", () => {
    const dir = /SQLite in (\S+);/.exec(out)?.[1]
    expect(dir).toMatch(/keyway-demo-/)
    expect(existsSync(dir as string)).toBe(false)
  })
})

describe("runMachineDemo: workload identity federation", () => {
  let out = ""
  let secrets: ReadonlyArray<string> = []
  let result: Awaited<ReturnType<typeof runMachineDemo>>

  beforeAll(async () => {
    ;({ out, secrets, result } = await recorded((options) => runMachineDemo("workload-identity", options)))
  })

  it("prints the workload's flow in order: a JWT for the token endpoint, the token, a refused replay, a renewal", () => {
    const order = [
      STEPS.challenge,
      STEPS.resourceMetadata,
      STEPS.serverMetadata,
      'the workload platform issues a fresh JWT for the token endpoint: {"iss":"http://127.0.0.1:',
      MACHINE_STEPS.jwtBearer,
      "assertion   eyJhbGciOi…[redacted",
      '"sub": "spiffe://demo.keyway.test/ns/agents/sa/notes-reader"',
      STEPS.mcp,
      'list_notes → "No notes yet."',
      "Replay: the same workload JWT presented again is refused",
      '"error_description": "the assertion\'s jti was already used: an assertion is accepted once"',
      STEPS.insufficientScope,
      "the client stops with a typed error (step-up/insufficient-scope)",
      "the workload platform issues a fresh JWT for the token endpoint",
      MACHINE_STEPS.jwtBearer,
      'list_notes → "No notes yet."',
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
    expect(out).not.toContain("client_id  ")
    expect(out).not.toContain(STEPS.registration)
    expect(result.steps).toBe(10)
  })

  it("prints no credential: the workload's JWTs and the access tokens are redacted", () => {
    const jwts = secrets.filter((s) => /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(s))
    // Two workload JWTs and two access tokens.
    expect(jwts).toHaveLength(4)
    for (const secret of secrets) expect(out.includes(secret), `leaked ${describeSecret(secret)}`).toBe(false)
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })
})
