import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { SecurityEvent } from "../src/Operations.js"
import {
  authorizeUrl,
  cookieOf,
  csrfOf,
  loginAndConsent,
  PASSWORD,
  publicAppTokens,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

let server: TestServer
const events: Array<SecurityEvent> = []
beforeAll(async () => {
  server = await startServer({ onSecurityEvent: (event) => events.push(event) })
})
afterAll(() => server?.close())

const post = (path: string, cookie: string, values: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${server.issuer}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie, ...headers },
    body: new URLSearchParams(values).toString(),
  })

describe("the account page", () => {
  it("asks to sign in first, with the consent page's headers", async () => {
    const response = await fetch(`${server.issuer}/account`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-security-policy")).toMatch(/frame-ancestors 'none'/)
    expect(response.headers.get("x-frame-options")).toBe("DENY")
    expect(response.headers.get("cache-control")).toBe("no-store")
    const body = await response.text()
    expect(body).toContain('action="/account/login"')
    expect(body).toContain("Sign in to continue to <strong>your account</strong>")
  })

  it("lists the apps of the login session from the authorization flow, and revokes one with its grants", async () => {
    const issued = await publicAppTokens(server)
    // The session of the authorization flow is the account page's.
    const request = await authorizeUrl(server, { scope: "tools:read" })
    const { cookie } = await loginAndConsent(server, request.url)
    const page = await fetch(`${server.issuer}/account`, { headers: { cookie } })
    const html = await page.text()
    expect(html).toContain("<h1>Connected apps</h1>")
    expect(html).toContain("<h2 data-app-name>Public App</h2>")
    expect(html).toContain('<span class="host" data-app-host>app.example.com</span>')
    expect(html).toContain(
      '<li data-app-access="https://mcp.example.com/mcp"><code>Example MCP</code>: tools:call, tools:read</li>',
    )

    // Without the CSRF token, or from another origin, nothing is revoked.
    expect((await post("/account/revoke", cookie, { client_id: "public-app" })).status).toBe(403)
    const csrf = csrfOf(html)
    const crossSite = await post(
      "/account/revoke",
      cookie,
      { client_id: "public-app", csrf_token: csrf },
      { origin: "https://evil.example" },
    )
    expect(crossSite.status).toBe(403)
    expect((await server.as.listConsents("alice")).length).toBe(1)

    const revoked = await post("/account/revoke", cookie, { client_id: "public-app", csrf_token: csrf })
    expect([revoked.status, revoked.headers.get("location")]).toEqual([303, "/account"])
    expect(await server.as.listConsents("alice")).toEqual([])
    // One grant: the tokens above and the remembered consent's code are one user's authorizations of one client at one
    // resource.
    expect(events.filter((e) => e.event === "consent_revoked")).toEqual([
      { event: "consent_revoked", subject: "alice", client_id: "public-app", revoked_grants: [expect.any(String)] },
    ])
    const after = await (await fetch(`${server.issuer}/account`, { headers: { cookie } })).text()
    expect(after).toContain("<p data-no-apps>No application has access to your account.</p>")
    const refreshed = await tokenRequest(server, {
      grant_type: "refresh_token",
      refresh_token: issued.refresh_token,
      client_id: "public-app",
    })
    expect([refreshed.status, await refreshed.json()]).toEqual([
      400,
      { error: "invalid_grant", error_description: "the refresh token has been revoked" },
    ])
  })

  it("signs in on its own form: wrong password 401, CSRF checked, then back to the list", async () => {
    events.length = 0
    const first = await fetch(`${server.issuer}/account`)
    const cookie = cookieOf(first) ?? ""
    const csrf = csrfOf(await first.text())
    expect((await post("/account/login", cookie, { username: "alice", password: PASSWORD })).status).toBe(403)
    const wrong = await post("/account/login", cookie, { csrf_token: csrf, username: "alice", password: "nope" })
    expect(wrong.status).toBe(401)
    expect(await wrong.text()).toContain("Wrong username or password.")
    const ok = await post("/account/login", cookie, { csrf_token: csrf, username: "alice", password: PASSWORD })
    expect([ok.status, ok.headers.get("location")]).toEqual([303, "/account"])
    const signedIn = cookieOf(ok) ?? ""
    const list = await (await fetch(`${server.issuer}/account`, { headers: { cookie: signedIn } })).text()
    expect(list).toContain("Signed in as Alice Example.")
    // Signed out (no session), a revoke is refused.
    expect((await post("/account/revoke", cookie, { client_id: "public-app", csrf_token: csrf })).status).toBe(403)
    // The sign-ins are reported without a client: they are the account page's.
    expect(events).toEqual([
      { event: "login_failed", reason: "csrf" },
      { event: "login_failed", reason: "wrong_credentials", username: "alice" },
      { event: "login_succeeded", username: "alice", subject: "alice" },
    ])
  })
})
