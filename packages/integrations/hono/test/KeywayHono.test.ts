import { request as httpRequest } from "node:http"
import type { AddressInfo } from "node:net"
import { serve } from "@hono/node-server"
import { createProtectedResource, custom } from "@keyway/resource-server"
import { Hono } from "hono"
import { afterEach, describe, expect, it } from "vitest"
import { type KeywayVariables, metadata, requireAuth } from "../src/index.js"

const ISSUER = "https://as.example.com"
const closers: Array<() => Promise<void>> = []

afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

const start = async () => {
  let app: Hono | undefined
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: (request) => app!.fetch(request), port: 0, hostname: "127.0.0.1" }, () => resolve(s))
  })
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
      }),
  )
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const guard = createProtectedResource({
    resource: `${origin}/mcp`,
    authorizationServers: [ISSUER],
    scopesSupported: ["mcp"],
    requiredScopes: ["mcp"],
    toolScopes: { write_note: ["notes:write"] },
    verifier: custom((token) =>
      token.startsWith("good")
        ? {
            subject: "alice",
            scopes: token === "good-writer" ? ["mcp", "notes:write"] : ["mcp"],
            audience: [`${origin}/mcp`],
            claims: {},
          }
        : null,
    ),
  })
  const hono = new Hono<{ Variables: KeywayVariables }>()
  hono.use(metadata(guard))
  hono.use("/mcp", requireAuth(guard))
  hono.all("/mcp", async (c) => {
    const body = c.req.method === "POST" ? await c.req.json() : null
    return c.json({ subject: c.get("keyway").token.subject, scopes: c.get("keyway").token.scopes, body })
  })
  app = hono as unknown as Hono
  return { origin, md: `${origin}/.well-known/oauth-protected-resource/mcp` }
}

const call = (name: string) => ({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: {} } })
const post = (origin: string, token: string | undefined, body: string) =>
  fetch(`${origin}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body,
  })

describe("Hono", () => {
  it("serves the protected resource metadata", async () => {
    const { origin } = await start()
    const response = await fetch(`${origin}/.well-known/oauth-protected-resource`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      resource: `${origin}/mcp`,
      authorization_servers: [ISSUER],
      scopes_supported: ["mcp"],
      bearer_methods_supported: ["header"],
    })
  })

  it("401 challenges: without error for no token, invalid_token for a bad token", async () => {
    const { origin, md } = await start()
    const none = await fetch(`${origin}/mcp`)
    expect(none.status).toBe(401)
    expect(none.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${md}", scope="mcp"`)
    const bad = await fetch(`${origin}/mcp`, { headers: { authorization: "Bearer bad" } })
    expect(bad.status).toBe(401)
    expect(bad.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${md}", scope="mcp", error="invalid_token", error_description="The access token was rejected"`,
    )
  })

  it("an authenticated request reaches the handler, which still reads the body", async () => {
    const { origin } = await start()
    const response = await post(origin, "good", JSON.stringify(call("read_note")))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ subject: "alice", scopes: ["mcp"], body: call("read_note") })
  })

  it("403 insufficient_scope for a tool that needs more scope", async () => {
    const { origin, md } = await start()
    const denied = await post(origin, "good", JSON.stringify(call("write_note")))
    expect(denied.status).toBe(403)
    expect(denied.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${md}", scope="mcp notes:write", error="insufficient_scope", error_description="The access token does not grant the scopes this request needs"`,
    )
    expect((await post(origin, "good-writer", JSON.stringify(call("write_note")))).status).toBe(200)
  })

  it("400 for a token in the query; 400 JSON-RPC parse error for a malformed body", async () => {
    const { origin, md } = await start()
    const query = await fetch(`${origin}/mcp?access_token=good`)
    expect(query.status).toBe(400)
    expect(query.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${md}", error="invalid_request", error_description="Access tokens are accepted only in the Authorization header, not in the URI query"`,
    )
    const malformed = await post(origin, "good", "{nope")
    expect(malformed.status).toBe(400)
    expect(((await malformed.json()) as { error: { code: number } }).error.code).toBe(-32700)
  })

  it("two Authorization header lines: 400 invalid_request", async () => {
    const { origin, md } = await start()
    const result = await new Promise<{ status: number; challenge: string | undefined }>((resolve, reject) => {
      const req = httpRequest(
        `${origin}/mcp`,
        { headers: ["host", new URL(origin).host, "authorization", "Bearer good", "authorization", "Bearer good"] },
        (res) => {
          res.resume()
          resolve({ status: res.statusCode ?? 0, challenge: res.headers["www-authenticate"] })
        },
      )
      req.on("error", reject)
      req.end()
    })
    expect(result).toEqual({
      status: 400,
      challenge: `Bearer resource_metadata="${md}", error="invalid_request", error_description="The request carries more than one Authorization header"`,
    })
  })

  it("CORS: preflight answered, authenticated responses carry the CORS headers", async () => {
    const { origin } = await start()
    const pre = await fetch(`${origin}/mcp`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    })
    expect(pre.status).toBe(204)
    const ok = await fetch(`${origin}/mcp`, {
      headers: { authorization: "Bearer good", origin: "https://app.example" },
    })
    expect(ok.headers.get("access-control-allow-origin")).toBe("*")
    expect(ok.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate, Mcp-Session-Id")
  })
})
