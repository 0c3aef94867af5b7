import { randomBytes } from "node:crypto"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startAuthorizationServer } from "@keyway/app-authorization-server"
import { NOTE_SCOPES, startMcpServer } from "@keyway/app-mcp-server"
import { UserAuthenticator } from "@keyway/authorization-server"
import { Revision } from "@keyway/core"
import { freePort } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { diagnose } from "../src/index.js"

// Keyway's own stack, as the demo starts it: the authorization server (SQLite, a test user, dynamic registration)
// and the notes MCP server (the official SDK's server behind the resource server), both on loopback.
let dataDir: string
let issuer: string
let mcpUrl: string
let close: () => Promise<void>
const password = randomBytes(12).toString("base64url")
const otherResource = (mcpPort: number) => `http://127.0.0.1:${mcpPort}/archive`

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "keyway-doctor-"))
  const asPort = await freePort()
  const mcpPort = await freePort()
  issuer = `http://127.0.0.1:${asPort}`
  const as = await startAuthorizationServer(
    {
      issuer,
      port: asPort,
      dataDir,
      users: [
        { username: "alice", passwordHash: await UserAuthenticator.hashPassword(password), displayName: "Alice" },
      ],
      clients: [],
      // A second resource, so that the audience check has a token for another resource to present.
      resources: [
        { uri: `http://127.0.0.1:${mcpPort}/mcp`, name: "Keyway notes", scopes: NOTE_SCOPES },
        { uri: otherResource(mcpPort), name: "Keyway archive", scopes: NOTE_SCOPES },
      ],
      registration: true,
    },
    { log: () => {} },
  )
  const mcp = await startMcpServer({ authorizationServer: as.issuer, port: mcpPort, log: () => {} })
  mcpUrl = mcp.url
  close = async () => {
    await Promise.allSettled([mcp.close(), as.close()])
    await rm(dataDir, { recursive: true, force: true })
  }
})

afterAll(async () => {
  await close()
})

describe("Keyway's own stack", () => {
  it("passes every check for the revisions with protected resource metadata, the test user's login included", async () => {
    const other = otherResource(Number(new URL(mcpUrl).port))
    const diagnosis = await diagnose(mcpUrl, {
      login: { kind: "test-user", username: "alice", password },
      otherResource: other,
    })
    expect(diagnosis.stopped).toBeUndefined()
    expect(diagnosis.revisions).toEqual(Revision.all)
    // The one thing short of a pass: the authorization server has an origin of its own, and 2025-03-26 clients look
    // for it at the MCP server's origin only (no protected resource metadata in that revision).
    const origin = new URL(mcpUrl).origin
    expect(
      diagnosis.findings
        .filter((f) => f.status !== "pass")
        .map((f) => ({ check: f.check, status: f.status, revisions: f.revisions, detail: f.detail })),
    ).toEqual([
      {
        check: "as.metadata",
        status: "warn",
        revisions: ["2025-03-26"],
        detail: `tried ${origin}/.well-known/oauth-authorization-server → 404: none found, so 2025-03-26 clients use the default endpoints ${origin}/authorize, ${origin}/token and ${origin}/register`,
      },
    ])
    expect(diagnosis.findings.find((f) => f.check === "mcp.audience-check")?.detail).toBe(
      `a token for ${other} (obtained by a second authorization) was refused with 401 invalid_token`,
    )
    const checks = new Set(diagnosis.findings.map((f) => f.check))
    for (const check of [
      "challenge.status",
      "prm.resource",
      "as.metadata",
      "as.pkce-s256",
      "registration.loopback",
      "authorization.resource",
      "login.flow",
      "token.audience",
      "mcp.audience-check",
      "mcp.insufficient-scope",
      "token.refresh",
    ]) {
      expect(checks, check).toContain(check)
    }
  })
})
