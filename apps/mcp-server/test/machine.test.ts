import { createServer } from "node:http"
import { createAuthClient, Extension } from "@keyway/client"
import { clientCredentials } from "@keyway/ext-client-credentials/client"
import { createTransport } from "@keyway/mcp-sdk-client"
import { closing, listening } from "@keyway/testing"
import { Client } from "@modelcontextprotocol/client"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
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

  it.each(["2025-11-25", "2026-07-28"])(
    "serves Keyway's client with the extension under the official SDK client (%s), which declares the extension",
    async (revision) => {
      const s = await stack()
      const bodies: Array<Record<string, unknown>> = []
      const extensions = [clientCredentials({ issuer: s.as.issuer, clientId: "nightly", clientSecret: SECRET })]
      const auth = createAuthClient({
        extensions,
        fetch: async (input, init) => {
          const url = input instanceof Request ? input.url : String(input)
          const body = init?.body
          const text =
            typeof body === "string" ? body : body instanceof ArrayBuffer ? new TextDecoder().decode(body) : ""
          if (url === s.mcp.url && text !== "") bodies.push(JSON.parse(text))
          return globalThis.fetch(input, init)
        },
      })
      cleanups.push(() => auth.dispose())
      const mcp = new Client(
        { name: "machine", version: "1.0.0" },
        {
          capabilities: Extension.capabilities(extensions),
          ...(revision === "2026-07-28" ? { versionNegotiation: { mode: { pin: revision } } } : {}),
        },
      )
      await mcp.connect(createTransport(s.mcp.url, auth))
      cleanups.push(() => mcp.close())
      const { tools } = await mcp.listTools()
      expect(tools.map((tool) => tool.name)).toContain("list_notes")
      const declared = { extensions: { "io.modelcontextprotocol/oauth-client-credentials": {} } }
      const list = bodies.find((body) => body.method === "tools/list") as { params?: { _meta?: object } }
      if (revision === "2026-07-28") {
        // The stateless wire: every request carries the client's capabilities.
        expect(list.params?._meta).toMatchObject({ "io.modelcontextprotocol/clientCapabilities": declared })
      } else {
        const init = bodies.find((body) => body.method === "initialize") as { params: { capabilities: object } }
        expect(init.params.capabilities).toMatchObject(declared)
      }
    },
  )
})

describe("notes MCP server with workload tokens (workload identity federation)", () => {
  it("accepts a token for itself obtained with a workload's JWT and refuses one bound to another resource", async () => {
    const keys = await generateKeyPair("ES256")
    const jwk = { ...(await exportJWK(keys.publicKey)), kid: "w1", alg: "ES256" }
    const platform = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] }))
    })
    const platformUrl = await listening(platform)
    cleanups.push(() => closing(platform))
    const subject = "spiffe://example.test/agent"
    // The rule names both resources of the stack.
    const s = await startStack(({ resource, other }) => ({
      extensions: {
        workloadIdentity: {
          issuers: [
            {
              issuer: platformUrl,
              jwksUri: `${platformUrl}/jwks.json`,
              rules: [{ claims: { sub: subject }, resources: [resource, other], scopes: ["notes:read"] }],
            },
          ],
          development: { allowHttpLoopbackJwks: true },
        },
      },
    }))
    cleanups.push(s.close)
    const token = async (resource: string) => {
      const now = Math.floor(Date.now() / 1000)
      const assertion = await new SignJWT({ jti: crypto.randomUUID() })
        .setProtectedHeader({ alg: "ES256", kid: "w1" })
        .setIssuer(platformUrl)
        .setSubject(subject)
        .setAudience(`${s.as.issuer}/token`)
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .sign(keys.privateKey)
      const response = await fetch(`${s.as.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion, resource }),
      })
      expect(response.status).toBe(200)
      return ((await response.json()) as { access_token: string }).access_token
    }
    expect((await initialize(s.mcp.url, await token(s.mcp.url))).status).toBe(200)
    const refused = await initialize(s.mcp.url, await token(s.other))
    expect(refused.status).toBe(401)
    expect(refused.headers.get("www-authenticate")).toContain('error="invalid_token"')
  })
})
