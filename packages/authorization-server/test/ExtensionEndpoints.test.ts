import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAuthorizationServer } from "../src/AuthorizationServer.js"
import type { AuthorizationServerExtension } from "../src/Extension.js"
import { recordExtension } from "./support/recordExtension.js"
import {
  basic,
  cookieOf,
  csrfOf,
  MCP,
  PASSWORD,
  SECRET,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

const GRANT = "urn:example:handle"
const form = (values: Record<string, string>) => new URLSearchParams(values).toString()
const FORM = { "content-type": "application/x-www-form-urlencoded" }

let server: TestServer
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${server.issuer}${path}`, { method: "POST", redirect: "manual", headers: { ...FORM, ...headers }, body })

beforeAll(async () => {
  server = await startServer({
    extensions: [recordExtension],
    clients: [
      { clientId: "-device", clientName: "Dash Device", redirectUris: [], grantTypes: [GRANT, "refresh_token"] },
      {
        clientId: "box",
        clientName: "Box",
        redirectUris: [],
        grantTypes: [GRANT],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_basic",
      },
      { clientId: "narrow", redirectUris: [], grantTypes: [GRANT], scope: "tools:read" },
    ],
  })
})
afterAll(() => server.close())

describe("extension API endpoints", () => {
  it("routes the endpoint: another method is 405 with Allow, OPTIONS is a CORS preflight", async () => {
    const get = await fetch(`${server.issuer}/example/authorizations`)
    expect(get.status).toBe(405)
    expect(get.headers.get("allow")).toBe("POST, OPTIONS")
    await server.as.ready()
    expect(server.as.allow("/example/authorizations")).toBe("POST, OPTIONS")
    const options = await fetch(`${server.issuer}/example/authorizations`, { method: "OPTIONS" })
    expect(options.status).toBe(204)
    expect(options.headers.get("access-control-allow-methods")).toBe("POST, OPTIONS")
  })

  it("reads the form as the token endpoint does: media type, repeated parameter, body limit", async () => {
    const json = await post("/example/authorizations", "{}", { "content-type": "application/json" })
    expect(json.status).toBe(400)
    expect(await json.json()).toEqual({
      error: "invalid_request",
      error_description: "the body must be application/x-www-form-urlencoded",
    })
    const repeated = await post("/example/authorizations", "client_id=-device&scope=a&scope=b")
    expect(repeated.status).toBe(400)
    expect(await repeated.json()).toEqual({
      error: "invalid_request",
      error_description: "parameter scope is repeated",
    })
    const large = await post("/example/authorizations", `client_id=-device&x=${"a".repeat(70 * 1024)}`)
    expect(large.status).toBe(413)
    expect((await large.json()).error).toBe("invalid_request")
  })

  it("authenticates the client as the token endpoint does: 401 invalid_client with a Basic challenge", async () => {
    const unknown = await post("/example/authorizations", form({ client_id: "nobody" }))
    expect(unknown.status).toBe(401)
    expect(unknown.headers.get("www-authenticate")).toBe('Basic realm="token"')
    expect((await unknown.json()).error).toBe("invalid_client")
    const wrong = await post("/example/authorizations", form({ handle: "h" }), {
      authorization: basic("box", "wrong-secret"),
    })
    expect(wrong.status).toBe(401)
    expect((await wrong.json()).error).toBe("invalid_client")
    const right = await post(
      "/example/authorizations",
      form({ handle: "-box-1", resource: MCP, scope: "tools:read" }),
      {
        authorization: basic("box", SECRET),
      },
    )
    expect(right.status).toBe(200)
    expect(right.headers.get("access-control-allow-origin")).toBe("*")
    expect(await right.json()).toEqual({ client_id: "box", resource: MCP, scopes: ["tools:read"] })
  })

  it("checks resource and scope as the authorization endpoint does", async () => {
    const target = await post(
      "/example/authorizations",
      form({ client_id: "-device", resource: "https://nope.example" }),
    )
    expect(target.status).toBe(400)
    expect(await target.json()).toEqual({
      error: "invalid_target",
      error_description: "this server does not issue tokens for that resource",
    })
    const relative = await post("/example/authorizations", form({ client_id: "-device", resource: "mcp" }))
    expect(await relative.json()).toEqual({
      error: "invalid_target",
      error_description: "resource is not a valid absolute URI",
    })
    const missing = await post("/example/authorizations", form({ client_id: "-device" }))
    expect(await missing.json()).toEqual({ error: "invalid_target", error_description: "resource is required" })
    const scope = await post("/example/authorizations", form({ client_id: "-device", resource: MCP, scope: "admin" }))
    expect(await scope.json()).toEqual({
      error: "invalid_scope",
      error_description: "scope admin is not defined for this resource",
    })
    const narrow = await post(
      "/example/authorizations",
      form({ client_id: "narrow", resource: MCP, scope: "tools:call" }),
    )
    expect(await narrow.json()).toEqual({
      error: "invalid_scope",
      error_description: "this client may not request tools:call",
    })
    // Without scope, every scope the client may have.
    const all = await post("/example/authorizations", form({ client_id: "narrow", resource: MCP, handle: "-n" }))
    expect(await all.json()).toEqual({ client_id: "narrow", resource: MCP, scopes: ["tools:read"] })
  })
})

describe("extension pages", () => {
  it("serve the server's login, CSRF, layout and security headers; issuance is the code flow's", async () => {
    const created = await post(
      "/example/authorizations",
      form({ client_id: "-device", handle: "-h1", resource: MCP, scope: "tools:read tools:call" }),
    )
    expect(created.status).toBe(200)
    const page = await fetch(`${server.issuer}/example/approve`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    expect(page.headers.get("x-frame-options")).toBe("DENY")
    expect(page.headers.get("cache-control")).toBe("no-store")
    let cookie = cookieOf(page) ?? ""
    const login = await page.text()
    expect(login).toContain("<h1>Sign in</h1>")
    expect(login).toContain('name="request" value="-carried"')

    // A form without the session's CSRF token is refused.
    const forged = await post("/example/approve", form({ csrf_token: "x", username: "alice", password: PASSWORD }), {
      cookie,
    })
    expect(forged.status).toBe(403)
    expect(await forged.text()).toContain('data-error="csrf"')
    const otherOrigin = await post(
      "/example/approve",
      form({ csrf_token: csrfOf(login), username: "alice", password: PASSWORD }),
      { cookie, origin: "https://evil.example" },
    )
    expect(otherOrigin.status).toBe(403)

    const wrong = await post(
      "/example/approve",
      form({ csrf_token: csrfOf(login), username: "alice", password: "x" }),
      {
        cookie,
      },
    )
    expect(wrong.status).toBe(401)
    expect(await wrong.text()).toContain("Wrong username or password.")
    const signedIn = await post(
      "/example/approve",
      form({ csrf_token: csrfOf(login), request: "-carried", username: "alice", password: PASSWORD }),
      { cookie },
    )
    expect(signedIn.status).toBe(303)
    expect(signedIn.headers.get("location")).toBe(`${server.issuer}/example/approve`)
    cookie = cookieOf(signedIn) ?? ""
    const approve = await fetch(`${server.issuer}/example/approve`, { headers: { cookie } })
    const approveHtml = await approve.text()
    expect(approveHtml).toContain("<span data-user>Alice Example</span>")
    // Values are escaped.
    expect(approveHtml).toContain("<p data-script>&lt;script&gt;</p>")
    const done = await post("/example/approve", form({ csrf_token: csrfOf(approveHtml), handle: "-h1" }), { cookie })
    expect(await done.text()).toContain("<h1 data-done>approved</h1>")

    const issued = await tokenRequest(server, { grant_type: GRANT, client_id: "-device", handle: "-h1" })
    expect(issued.status).toBe(200)
    const tokens = await issued.json()
    expect(tokens).toMatchObject({ token_type: "Bearer", expires_in: 300, scope: "tools:read tools:call" })
    expect(typeof tokens.refresh_token).toBe("string")
    const claims = JSON.parse(Buffer.from(tokens.access_token.split(".")[1], "base64url").toString())
    expect(claims).toMatchObject({ sub: "alice", aud: MCP, client_id: "-device", scope: "tools:read tools:call" })
    // Single use.
    const again = await tokenRequest(server, { grant_type: GRANT, client_id: "-device", handle: "-h1" })
    expect(await again.json()).toEqual({ error: "invalid_grant", error_description: "unknown handle" })
    // Consent and grant as the code flow's: remembered, refreshable with rotation, and on the account page.
    expect(await server.as.listConsents("alice")).toEqual([
      expect.objectContaining({ client_id: "-device", resource: MCP, scopes: ["tools:call", "tools:read"] }),
    ])
    const refreshed = await tokenRequest(server, {
      grant_type: "refresh_token",
      client_id: "-device",
      refresh_token: tokens.refresh_token,
    })
    expect(refreshed.status).toBe(200)
    expect((await refreshed.json()).refresh_token).not.toBe(tokens.refresh_token)
    const account = await fetch(`${server.issuer}/account`, { headers: { cookie } })
    expect(await account.text()).toContain("Dash Device")
  })
})

describe("extension endpoint configuration", () => {
  const withPath = (path: string): AuthorizationServerExtension => ({
    id: "example/paths",
    endpoints: [{ path, kind: "api", methods: ["POST"], handle: () => Promise.reject() as never }],
  })
  it.each([
    ["/token", "example/paths: endpoint path /token is already served"],
    [
      "/.well-known/x",
      "example/paths: endpoint path /.well-known/x must begin with / and be a plain path outside /.well-known/",
    ],
    ["device", "example/paths: endpoint path device must begin with / and be a plain path outside /.well-known/"],
  ])("refuses the path %s", (path, message) => {
    expect(() =>
      createAuthorizationServer({
        issuer: "https://as.example.com",
        resources: [{ uri: MCP, name: "MCP", scopes: { read: "Read" } }],
        extensions: [withPath(path)],
        warn: () => undefined,
      }),
    ).toThrow(message)
  })
})
