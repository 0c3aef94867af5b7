import type { Server } from "node:http"
import { request as httpRequest } from "node:http"
import type { AddressInfo } from "node:net"
import { createProtectedResource, custom, type ProtectedResource } from "@keyway/resource-server"
import express from "express"
import { afterEach, describe, expect, it } from "vitest"
import { authOf, metadata, requireAuth } from "../src/index.js"

const ISSUER = "https://as.example.com"
const servers: Array<Server> = []

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

/** Starts an Express app on loopback; the guard is built once the port (and so the resource URI) is known. */
const start = async (build: (origin: string) => express.Express) => {
  let app: express.Express | undefined
  const server = await new Promise<Server>((resolve) => {
    const s = express()
      .use((req, res, next) => (app === undefined ? next() : app(req, res, next)))
      .listen(0, "127.0.0.1", () => resolve(s))
  })
  servers.push(server)
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  app = build(origin)
  return origin
}

const guardFor = (origin: string, extra: Partial<ProtectedResource.ProtectedResourceOptions> = {}) =>
  createProtectedResource({
    resource: `${origin}/mcp`,
    authorizationServers: [ISSUER],
    scopesSupported: ["mcp"],
    requiredScopes: ["mcp"],
    toolScopes: { write_note: ["notes:write"] },
    verifier: custom((token) =>
      token.startsWith("good")
        ? {
            subject: "alice",
            clientId: "client-1",
            scopes: token === "good-writer" ? ["mcp", "notes:write"] : ["mcp"],
            audience: [`${origin}/mcp`],
            claims: {},
          }
        : null,
    ),
    ...extra,
  })

const app = (withJsonParser: boolean) => (origin: string) => {
  const guard = guardFor(origin)
  const a = express()
  a.use(metadata(guard))
  if (withJsonParser) a.use(express.json())
  a.all("/mcp", requireAuth(guard), (req, res) => {
    const auth = authOf(req)
    res.json({ subject: auth?.token.subject, scopes: auth?.token.scopes, body: req.body ?? null })
  })
  return a
}

const call = (name: string) => ({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: {} } })

describe.each([true, false])("Express (express.json() before: %s)", (withJsonParser) => {
  it("serves the protected resource metadata at both well-known paths", async () => {
    const origin = await start(app(withJsonParser))
    for (const path of ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]) {
      const response = await fetch(`${origin}${path}`)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("application/json")
      expect(await response.json()).toEqual({
        resource: `${origin}/mcp`,
        authorization_servers: [ISSUER],
        scopes_supported: ["mcp"],
        bearer_methods_supported: ["header"],
      })
    }
  })

  it("401 with the challenge when there is no token, 401 invalid_token for a bad one", async () => {
    const origin = await start(app(withJsonParser))
    const md = `${origin}/.well-known/oauth-protected-resource/mcp`
    const none = await fetch(`${origin}/mcp`)
    expect(none.status).toBe(401)
    expect(none.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${md}", scope="mcp"`)
    expect(none.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate, Mcp-Session-Id")
    const bad = await fetch(`${origin}/mcp`, { headers: { authorization: "Bearer bad" } })
    expect(bad.status).toBe(401)
    expect(bad.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${md}", scope="mcp", error="invalid_token", error_description="The access token was rejected"`,
    )
    expect(await bad.json()).toEqual({ error: "invalid_token", error_description: "The access token was rejected" })
  })

  it("passes an authenticated request on, with the token and the body for the handler", async () => {
    const origin = await start(app(withJsonParser))
    const response = await fetch(`${origin}/mcp`, {
      method: "POST",
      headers: { authorization: "Bearer good", "content-type": "application/json" },
      body: JSON.stringify(call("read_note")),
    })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ subject: "alice", scopes: ["mcp"], body: call("read_note") })
  })

  it("403 insufficient_scope for a tool that needs more scope", async () => {
    const origin = await start(app(withJsonParser))
    const post = (token: string) =>
      fetch(`${origin}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(call("write_note")),
      })
    const denied = await post("good")
    expect(denied.status).toBe(403)
    expect(denied.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", scope="mcp notes:write", error="insufficient_scope", error_description="The access token does not grant the scopes this request needs"`,
    )
    expect((await post("good-writer")).status).toBe(200)
  })

  it("400 invalid_request for a token in the query and for two Authorization lines", async () => {
    const origin = await start(app(withJsonParser))
    const query = await fetch(`${origin}/mcp?access_token=good`, { headers: { authorization: "Bearer good" } })
    expect(query.status).toBe(400)
    expect(query.headers.get("www-authenticate")).toContain(`error="invalid_request"`)
    const port = new URL(origin).port
    const status = await new Promise<{ status: number; challenge: string | undefined }>((resolve, reject) => {
      const req = httpRequest(
        `${origin}/mcp`,
        { headers: ["host", `127.0.0.1:${port}`, "authorization", "Bearer good", "authorization", "Bearer good"] },
        (res) => {
          res.resume()
          resolve({ status: res.statusCode ?? 0, challenge: res.headers["www-authenticate"] })
        },
      )
      req.on("error", reject)
      req.end()
    })
    expect(status).toEqual({
      status: 400,
      challenge: `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", error="invalid_request", error_description="The request carries more than one Authorization header"`,
    })
  })

  it("malformed JSON-RPC body with per-tool scopes: 400 parse error for an authenticated caller", async () => {
    const origin = await start((o) => {
      const guard = guardFor(o)
      // The JSON parser would itself refuse malformed JSON, so this route reads the raw body through Keyway.
      return express().all("/mcp", requireAuth(guard), (_req, res) => {
        res.json({ ok: true })
      })
    })
    const response = await fetch(`${origin}/mcp`, {
      method: "POST",
      headers: { authorization: "Bearer good", "content-type": "application/json" },
      body: "{nope",
    })
    expect(response.status).toBe(400)
    expect(response.headers.get("www-authenticate")).toBeNull()
    expect(await response.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: "Parse error: the request body is not valid JSON" },
    })
  })

  it("answers CORS preflights and adds CORS headers to authenticated responses", async () => {
    const origin = await start(app(withJsonParser))
    const pre = await fetch(`${origin}/mcp`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    })
    expect(pre.status).toBe(204)
    expect(pre.headers.get("access-control-allow-origin")).toBe("*")
    const ok = await fetch(`${origin}/mcp`, {
      headers: { authorization: "Bearer good", origin: "https://app.example" },
    })
    expect(ok.status).toBe(200)
    expect(ok.headers.get("access-control-allow-origin")).toBe("*")
  })
})
