import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { createAuthClient, UserAgent } from "@keyway/client"
import { Challenge, Scope } from "@keyway/core"
import { type AuthorizationServerPeer, startAuthorizationServer } from "@keyway/testing/peers"
import { Client } from "@modelcontextprotocol/client"
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server"
import { afterEach, describe, expect, it } from "vitest"
import { createTransport, keywayAuthProvider, keywayFetch } from "../src/index.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

interface McpPeer {
  readonly url: string
  readonly statuses: Array<number>
}

/** A real MCP server (the official SDK's handler) behind a Bearer gate that trusts the loopback authorization server. */
const startMcpServer = async (as: AuthorizationServerPeer): Promise<McpPeer> => {
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: "keyway-test-server", version: "1.0.0" })
    server.registerTool("echo", { description: "Says hello" }, async () => ({
      content: [{ type: "text", text: "hello" }],
    }))
    server.registerTool("admin", { description: "Needs the admin scope" }, async () => ({
      content: [{ type: "text", text: "admin done" }],
    }))
    return server
  })
  const statuses: Array<number> = []
  let origin = ""
  const reply = async (res: ServerResponse, response: Response) => {
    statuses.push(response.status)
    res.writeHead(response.status, Object.fromEntries(response.headers))
    const reader = response.body?.getReader()
    for (let part = await reader?.read(); part !== undefined && !part.done; part = await reader?.read()) {
      res.write(part.value)
    }
    res.end()
  }
  const node = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      const path = new URL(req.url ?? "/", origin).pathname
      void (async () => {
        const metadataUrl = `${origin}/.well-known/oauth-protected-resource/mcp`
        if (path === "/.well-known/oauth-protected-resource/mcp") {
          return reply(
            res,
            Response.json({
              resource: `${origin}/mcp`,
              authorization_servers: [as.issuer],
              scopes_supported: ["tools:read"],
            }),
          )
        }
        if (path !== "/mcp") return reply(res, new Response("Not Found", { status: 404 }))
        const authorization = req.headers.authorization
        const token = authorization?.startsWith("Bearer ") ? authorization.slice(7) : undefined
        const issued = token === undefined ? undefined : as.lookup(token)
        if (issued === undefined || issued.revoked || issued.resource !== `${origin}/mcp`) {
          const params = token === undefined ? {} : { error: "invalid_token" }
          return reply(
            res,
            new Response(null, {
              status: 401,
              headers: { "www-authenticate": Challenge.formatBearer({ resource_metadata: metadataUrl, ...params }) },
            }),
          )
        }
        const message = body === "" ? undefined : (JSON.parse(body) as { method?: string; params?: { name?: string } })
        if (
          message?.method === "tools/call" &&
          message.params?.name === "admin" &&
          !Scope.containsAll(Scope.parse(issued.scope), ["admin"])
        ) {
          return reply(
            res,
            new Response(null, {
              status: 403,
              headers: {
                "www-authenticate": Challenge.formatBearer({
                  resource_metadata: metadataUrl,
                  scope: "admin",
                  error: "insufficient_scope",
                }),
              },
            }),
          )
        }
        const headers = new Headers()
        for (const [name, value] of Object.entries(req.headers)) {
          if (typeof value === "string") headers.set(name, value)
        }
        const request = new Request(`${origin}${req.url}`, {
          method: req.method ?? "GET",
          headers,
          ...(req.method === "GET" || req.method === "HEAD" ? {} : { body }),
        })
        return reply(res, await handler.fetch(request))
      })()
    })
  })
  await new Promise<void>((resolve) => node.listen(0, "127.0.0.1", resolve))
  origin = `http://127.0.0.1:${(node.address() as AddressInfo).port}`
  cleanups.push(async () => {
    await handler.close()
    await new Promise<void>((resolve) => {
      node.close(() => resolve())
      node.closeAllConnections()
    })
  })
  return { url: `${origin}/mcp`, statuses }
}

const setup = async () => {
  const as = await startAuthorizationServer()
  cleanups.push(as.close)
  const mcp = await startMcpServer(as)
  const auth = createAuthClient({ userAgent: UserAgent.headless(), clientName: "sdk test" })
  cleanups.push(auth.dispose)
  const client = new Client({ name: "keyway-sdk-test", version: "1.0.0" })
  cleanups.push(() => client.close())
  return { as, mcp, auth, client }
}

const text = (result: unknown): string =>
  ((result as { content: Array<{ type: string; text: string }> }).content[0] ?? { text: "" }).text

describe("the official MCP SDK v2 client with Keyway's fetch", () => {
  it("connects through the whole authorization flow, lists and calls tools", async () => {
    const { as, mcp, auth, client } = await setup()
    await client.connect(createTransport(mcp.url, auth))
    const tools = await client.listTools()
    expect(tools.tools.map((t) => t.name).sort()).toEqual(["admin", "echo"])
    expect(text(await client.callTool({ name: "echo", arguments: {} }))).toBe("hello")
    expect(as.authorizations).toHaveLength(1)
    expect(as.authorizations[0]?.get("resource")).toBe(mcp.url)
    expect(mcp.statuses[0]).toBe(401)
    expect((await auth.tokens(mcp.url))?.scope).toBe("tools:read offline_access")
  })

  it("steps up on 403 insufficient_scope below the SDK", async () => {
    const { as, mcp, auth, client } = await setup()
    await client.connect(createTransport(mcp.url, auth))
    expect(text(await client.callTool({ name: "admin", arguments: {} }))).toBe("admin done")
    expect(as.authorizations).toHaveLength(2)
    expect(as.authorizations[1]?.get("scope")).toBe("tools:read offline_access admin")
    expect(mcp.statuses).toContain(403)
  })

  it("keywayFetch is a plain fetch the transport options accept", async () => {
    const { mcp, auth } = await setup()
    const response = await keywayFetch(auth)(mcp.url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } },
      }),
    })
    expect(response.status).toBe(200)
  })
})

describe("the official MCP SDK v2 client with Keyway's authProvider", () => {
  it("lets the transport set the header and runs Keyway's flow on 401", async () => {
    const { as, mcp, auth, client } = await setup()
    await client.connect(createTransport(mcp.url, auth, { mode: "authProvider" }))
    expect(text(await client.callTool({ name: "echo", arguments: {} }))).toBe("hello")
    expect(as.authorizations).toHaveLength(1)
  })

  it("refreshes through onUnauthorized when the token is rejected", async () => {
    const { as, mcp, auth } = await setup()
    const provider = keywayAuthProvider(auth, mcp.url)
    expect(await provider.token()).toBeUndefined()
    await auth.authorize(mcp.url)
    const first = await provider.token()
    expect(first).toBeDefined()
    as.tokens.get(first!)!.revoked = true
    const rejected = new Response(null, {
      status: 401,
      headers: { "www-authenticate": 'Bearer error="invalid_token"' },
    })
    await provider.onUnauthorized?.({ response: rejected, serverUrl: new URL(mcp.url), fetchFn: fetch })
    const second = await provider.token()
    expect(second).not.toBe(first)
    expect(as.refreshes).toBe(1)
    expect(as.authorizations).toHaveLength(1)
  })
})
