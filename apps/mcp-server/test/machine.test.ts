import { afterEach, describe, expect, it } from "vitest"
import { type Stack, startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const SECRET = "machine-secret-machine-secret-machine-secret"

/** The app's authorization server with a machine client and the client credentials extension. */
const stack = async (): Promise<Stack> => {
  const s = await startStack({
    clients: [{ clientId: "nightly", clientSecret: SECRET, redirectUris: [], grantTypes: ["client_credentials"] }],
    extensions: { clientCredentials: {} },
  })
  cleanups.push(s.close)
  return s
}

const machineToken = async (s: Stack, resource: string): Promise<string> => {
  const response = await fetch(`${s.as.issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `Basic ${btoa(`nightly:${SECRET}`)}`,
    },
    body: new URLSearchParams({ grant_type: "client_credentials", resource, scope: "notes:read" }),
  })
  expect(response.status).toBe(200)
  return ((await response.json()) as { access_token: string }).access_token
}

const initialize = (url: string, token: string) =>
  fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "machine", version: "1.0.0" } },
    }),
  })

describe("notes MCP server with machine tokens (client credentials)", () => {
  it("accepts a client credentials token for itself and refuses one bound to another resource", async () => {
    const s = await stack()
    expect((await initialize(s.mcp.url, await machineToken(s, s.mcp.url))).status).toBe(200)
    const refused = await initialize(s.mcp.url, await machineToken(s, s.other))
    expect(refused.status).toBe(401)
    expect(refused.headers.get("www-authenticate")).toContain('error="invalid_token"')
  })
})
