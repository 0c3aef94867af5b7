import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { createProtectedResource, custom, toNodeListener } from "@keyway/resource-server/node"
import { Client, InsufficientScopeError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { createMcpHandler, McpServer, WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server"
import { afterEach, describe, expect, it } from "vitest"
import { z } from "zod"
import { authenticatedOf, callerOf, hasScopes, protectMcp } from "../src/index.js"

const ISSUER = "https://as.example.com"
const servers: Array<Server> = []

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

const makeServer = () => {
  const server = new McpServer({ name: "notes", version: "1.0.0" })
  server.registerTool("whoami", { description: "Who is calling" }, async (ctx) => ({
    content: [{ type: "text", text: JSON.stringify(callerOf(ctx)) }],
  }))
  server.registerTool("inbound", { description: "The authentication a tool hands on" }, async (ctx) => {
    const auth = authenticatedOf(ctx)
    return {
      content: [
        { type: "text", text: JSON.stringify({ accessToken: auth?.accessToken, subject: auth?.token.subject }) },
      ],
    }
  })
  server.registerTool(
    "write_note",
    { description: "Write a note", inputSchema: z.object({ text: z.string() }) },
    async ({ text }, ctx) => ({
      content: [{ type: "text", text: `${callerOf(ctx)?.subject} wrote ${text} (admin: ${hasScopes(ctx, "admin")})` }],
    }),
  )
  return server
}

type Mode = "createMcpHandler" | "transport"

const start = async (mode: Mode) => {
  let handler: ((request: Request) => Promise<Response>) | undefined
  const server = await new Promise<Server>((resolve) => {
    const s = createServer(toNodeListener((request) => handler!(request))).listen(0, "127.0.0.1", () => resolve(s))
  })
  servers.push(server)
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const resource = `${origin}/mcp`
  const guard = createProtectedResource({
    resource,
    authorizationServers: [ISSUER],
    scopesSupported: ["mcp"],
    requiredScopes: ["mcp"],
    toolScopes: { write_note: ["notes:write"] },
    delegation: { actors: ["notes-server"] },
    verifier: custom((token) =>
      token.startsWith("good")
        ? {
            subject: "alice",
            clientId: "client-1",
            issuer: ISSUER,
            scopes: token === "good-writer" ? ["mcp", "notes:write"] : ["mcp"],
            audience: [resource],
            expiresAt: Math.floor(Date.now() / 1000) + 600,
            claims: token === "good-delegated" ? { sub: "alice", act: { sub: "notes-server" } } : { sub: "alice" },
          }
        : null,
    ),
  })
  handler =
    mode === "createMcpHandler"
      ? protectMcp(guard, createMcpHandler(makeServer))
      : protectMcp(guard, async (request, { authInfo }) => {
          const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined })
          await makeServer().connect(transport)
          return transport.handleRequest(request, { authInfo })
        })
  return { origin, resource, md: `${origin}/.well-known/oauth-protected-resource/mcp` }
}

const connect = async (resource: string, token: string) => {
  const client = new Client({ name: "test-client", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(resource), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  })
  await client.connect(transport)
  return client
}

const text = (result: unknown) => ((result as { content: Array<{ text: string }> }).content[0] as { text: string }).text

describe.each(["createMcpHandler", "transport"] as const)("MCP SDK server via %s", (mode) => {
  it("tool handlers see the caller and its scopes", async () => {
    const { resource } = await start(mode)
    const client = await connect(resource, "good")
    const result = await client.callTool({ name: "whoami", arguments: {} })
    expect(JSON.parse(text(result))).toMatchObject({
      subject: "alice",
      clientId: "client-1",
      issuer: ISSUER,
      scopes: ["mcp"],
      claims: { sub: "alice" },
    })
    await client.close()
  })

  it("a delegated token's actors reach the caller, and authenticatedOf hands on the token as presented", async () => {
    const { resource } = await start(mode)
    const client = await connect(resource, "good-delegated")
    const caller = JSON.parse(text(await client.callTool({ name: "whoami", arguments: {} })))
    expect(caller.actors).toEqual([{ sub: "notes-server" }])
    expect(JSON.parse(text(await client.callTool({ name: "inbound", arguments: {} })))).toEqual({
      accessToken: "good-delegated",
      subject: "alice",
    })
    await client.close()
    const plain = await connect(resource, "good")
    expect(JSON.parse(text(await plain.callTool({ name: "whoami", arguments: {} }))).actors).toBeUndefined()
    await plain.close()
  })

  it("authenticatedOf is undefined for an AuthInfo Keyway did not make, or one whose token was replaced", () => {
    expect(authenticatedOf(undefined)).toBeUndefined()
    expect(authenticatedOf({ token: "t", clientId: "c", scopes: [] })).toBeUndefined()
    const auth = { accessToken: "t", token: { scopes: [], audience: [], claims: {} } }
    expect(authenticatedOf({ token: "t", clientId: "c", scopes: [], extra: { authenticated: auth } })).toBe(auth)
    expect(
      authenticatedOf({ token: "other", clientId: "c", scopes: [], extra: { authenticated: auth } }),
    ).toBeUndefined()
    expect(authenticatedOf({ http: {} })).toBeUndefined()
  })

  it("per-tool scopes: write_note needs notes:write", async () => {
    const { resource } = await start(mode)
    const writer = await connect(resource, "good-writer")
    expect(text(await writer.callTool({ name: "write_note", arguments: { text: "hi" } }))).toBe(
      "alice wrote hi (admin: false)",
    )
    await writer.close()
    const reader = await connect(resource, "good")
    const error = await reader.callTool({ name: "write_note", arguments: { text: "hi" } }).catch((e: unknown) => e)
    // The official client reads the 403 challenge: scope and metadata URL come from Keyway's WWW-Authenticate.
    expect(error).toBeInstanceOf(InsufficientScopeError)
    expect((error as InsufficientScopeError).requiredScope).toBe("mcp notes:write")
    expect((error as InsufficientScopeError).resourceMetadataUrl?.href).toBe(
      `${new URL(resource).origin}/.well-known/oauth-protected-resource/mcp`,
    )
    expect((error as InsufficientScopeError).errorDescription).toBe(
      "The access token does not grant the scopes this request needs",
    )
    await reader.close()
  })

  it("exact 401/403 challenges over raw HTTP, and the metadata", async () => {
    const { origin, resource, md } = await start(mode)
    const post = (token: string | undefined, body: unknown) =>
      fetch(resource, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        },
        body: JSON.stringify(body),
      })
    const call = {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "write_note", arguments: { text: "x" } },
    }
    const none = await post(undefined, call)
    expect(none.status).toBe(401)
    expect(none.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${md}", scope="mcp notes:write"`)
    const bad = await post("bad", call)
    expect(bad.status).toBe(401)
    expect(bad.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${md}", scope="mcp notes:write", error="invalid_token", error_description="The access token was rejected"`,
    )
    const denied = await post("good", call)
    expect(denied.status).toBe(403)
    expect(denied.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${md}", scope="mcp notes:write", error="insufficient_scope", error_description="The access token does not grant the scopes this request needs"`,
    )
    const metadata = await fetch(md)
    expect(await metadata.json()).toEqual({
      resource,
      authorization_servers: [ISSUER],
      scopes_supported: ["mcp"],
      bearer_methods_supported: ["header"],
    })
    expect((await fetch(`${origin}/.well-known/oauth-protected-resource`)).status).toBe(200)
  })
})
