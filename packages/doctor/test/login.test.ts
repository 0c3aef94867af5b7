import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { stage } from "../src/checks/login.js"
import { type KeywayStack, seededWalk, startKeywayStack, USER } from "./support/reg-stack.js"

const outline = (findings: ReadonlyArray<{ check: string; status: string }>) =>
  findings.map((f) => `${f.status} ${f.check}`)

describe("the login stage against Keyway's servers and the MCP SDK server", () => {
  let stack: KeywayStack
  beforeAll(async () => {
    stack = await startKeywayStack()
  })
  afterAll(async () => {
    await stack?.close()
  })

  it("reports nothing without --login", async () => {
    const walk = await seededWalk(stack.mcp, [stack.issuer])
    expect(await stage.run(walk)).toEqual([])
  })

  it("signs in as the test user, then checks the token, the MCP server and the refresh", async () => {
    const walk = await seededWalk(stack.mcp, [stack.issuer], { login: { kind: "test-user", ...USER } })
    const findings = await stage.run(walk)
    expect(outline(findings)).toEqual([
      "pass login.flow",
      "pass token.audience",
      "pass token.issuer",
      "pass token.scope",
      "pass token.lifetime",
      "pass mcp.authorized",
      "pass mcp.insufficient-scope",
      "pass token.refresh",
      "warn mcp.audience-check",
    ])
    const detail = (check: string) => findings.find((f) => f.check === check)?.detail
    expect(detail("login.flow")).toBe(`signed in at ${stack.issuer} and received a Bearer token for ${stack.mcp}`)
    expect(detail("token.audience")).toBe(`aud is "${stack.mcp}", the resource ${stack.mcp}`)
    expect(detail("mcp.insufficient-scope")).toBe(
      'tools/call write_note with scope "notes:read" answered 403 insufficient_scope asking for "notes:read notes:write"',
    )
    expect(JSON.stringify(findings)).not.toContain(walk.token?.accessToken ?? "no token")
  })
})
