import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { stage } from "../src/checks/registration.js"
import { type Fault, startBroken } from "./support/reg-broken.js"
import { type KeywayStack, seededWalk, startKeywayStack } from "./support/reg-stack.js"

const outline = (findings: ReadonlyArray<{ check: string; status: string }>) =>
  findings.map((f) => `${f.status} ${f.check}`)

describe("the registration stage against Keyway's servers", () => {
  let stack: KeywayStack
  beforeAll(async () => {
    stack = await startKeywayStack()
  })
  afterAll(async () => {
    await stack?.close()
  })

  it("passes every check: loopback, private-use and hosted redirects, resource at both endpoints", async () => {
    const walk = await seededWalk(stack.mcp, [stack.issuer])
    const findings = await stage.run(walk)
    expect(outline(findings)).toEqual([
      "pass registration.loopback",
      "pass registration.private-scheme",
      "pass registration.hosted-callbacks",
      "pass registration.hosted-callbacks",
      "pass authorization.resource",
      "pass token.resource",
    ])
    expect(findings.every((f) => f.server === stack.issuer)).toBe(true)
    expect(findings[0]?.detail).toBe(
      `${stack.issuer}/register registered http://127.0.0.1:49327/callback and http://localhost:49327/callback`,
    )
    expect(findings[4]?.revisions).toEqual(["2025-06-18", "2025-11-25", "2026-07-28"])
    expect(findings[5]?.detail).toBe(
      `a code exchange with a made-up code and resource=${stack.mcp} answered invalid_grant (the code, not the resource, was refused)`,
    )
  })

  it("with --cimd, hosts a client ID metadata document on loopback that the authorization endpoint accepts", async () => {
    const walk = await seededWalk(stack.mcp, [stack.issuer], { clientIdMetadataDocument: true })
    const findings = await stage.run(walk)
    const cimd = findings.find((f) => f.check === "registration.cimd")
    expect(cimd?.status).toBe("pass")
    expect(cimd?.revisions).toEqual(["2025-11-25", "2026-07-28"])
    expect(cimd?.detail).toMatch(
      /^an authorization request with client_id http:\/\/127\.0\.0\.1:\d+\/client\.json \(a document this tool hosted\) answered HTTP (200|302|303)$/,
    )
  })
})

describe("the registration stage against misconfigured authorization servers", () => {
  const TARGET = "https://mcp.example.com/mcp"
  const run = async (fault: Fault) => {
    const server = await startBroken(fault)
    try {
      const walk = await seededWalk(TARGET, [server.issuer])
      const findings = await stage.run(walk)
      return { issuer: server.issuer, findings, faults: findings.filter((f) => f.status !== "pass") }
    } finally {
      await server.close()
    }
  }

  it("names a registration endpoint that refuses loopback redirect URIs with a port", async () => {
    const { issuer, faults } = await run("refuses-loopback-port")
    expect(outline(faults)).toEqual(["fail registration.loopback"])
    expect(faults[0]?.detail).toBe(
      `${issuer}/register refused http://127.0.0.1:49327/callback (HTTP 400 invalid_redirect_uri: redirect URI http://127.0.0.1:49327/callback is not allowed) and http://localhost:49327/callback (HTTP 400 invalid_redirect_uri: redirect URI http://localhost:49327/callback is not allowed)`,
    )
  })

  it("names a registration endpoint that refuses private-use schemes, as a warning", async () => {
    const { issuer, faults } = await run("refuses-private-scheme")
    expect(outline(faults)).toEqual(["warn registration.private-scheme"])
    expect(faults[0]?.detail).toBe(
      `${issuer}/register refused com.example.app:/callback (HTTP 400 invalid_redirect_uri: redirect URI com.example.app:/callback is not allowed)`,
    )
  })

  it("names an authorization endpoint that rejects resource", async () => {
    const { faults } = await run("rejects-resource-at-authorization")
    expect(outline(faults)).toEqual(["fail authorization.resource"])
    expect(faults[0]?.detail).toBe(
      `an authorization request with resource=${TARGET} redirected back with error invalid_target: unknown resource`,
    )
    expect(faults[0]?.revisions).toEqual(["2025-06-18", "2025-11-25", "2026-07-28"])
  })

  it("names a token endpoint that rejects resource", async () => {
    const { faults } = await run("rejects-resource-at-token")
    expect(outline(faults)).toEqual(["fail token.resource"])
    expect(faults[0]?.detail).toBe(
      `a code exchange with resource=${TARGET} answered HTTP 400 invalid_target: the resource parameter is not supported: the resource was refused`,
    )
  })
})
