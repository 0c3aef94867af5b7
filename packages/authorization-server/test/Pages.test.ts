import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAuthorizationServer } from "../src/AuthorizationServer.js"
import { listen } from "../src/NodeServer.js"
import { authorizeUrl, cookieOf, csrfOf, MCP, PASSWORD, startServer, type TestServer } from "./support/server.js"

let server: TestServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(async () => {
  await server.close()
})

const post = (path: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${server.issuer}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(body).toString(),
  })

const expectPageHeaders = (response: Response) => {
  const csp = response.headers.get("content-security-policy") ?? ""
  expect(csp).toContain("frame-ancestors 'none'")
  expect(csp).toContain("default-src 'none'")
  expect(csp).toMatch(/style-src 'nonce-[A-Za-z0-9_-]+'/)
  expect(response.headers.get("x-frame-options")).toBe("DENY")
  expect(response.headers.get("cache-control")).toBe("no-store")
  expect(response.headers.get("x-content-type-options")).toBe("nosniff")
  expect(response.headers.get("referrer-policy")).toBe("same-origin")
}

/** Opens the login page and signs alice in; returns the consent page, its cookie and the request string. */
const signIn = async (params = {}) => {
  const { url } = await authorizeUrl(server, params)
  const request = new URL(url).search.slice(1)
  const loginPage = await fetch(url, { redirect: "manual" })
  const anonymous = cookieOf(loginPage)!
  const login = await post(
    "/authorize/login",
    { csrf_token: csrfOf(await loginPage.text()), request, username: "alice", password: PASSWORD },
    { cookie: anonymous },
  )
  const cookie = cookieOf(login)!
  const consent = await fetch(login.headers.get("location")!, { redirect: "manual", headers: { cookie } })
  return { consent, html: await consent.text(), cookie, anonymous, request }
}

describe("login page", () => {
  it("is served with CSP frame-ancestors 'none', DENY framing, no-store, and an HttpOnly SameSite=Lax session cookie", async () => {
    const { url } = await authorizeUrl(server)
    const response = await fetch(url, { redirect: "manual" })
    expect(response.status).toBe(200)
    expectPageHeaders(response)
    const setCookie = response.headers.getSetCookie()[0] ?? ""
    expect(setCookie).toMatch(/^keyway_session=/)
    expect(setCookie).toContain("HttpOnly")
    expect(setCookie).toContain("SameSite=Lax")
    expect(setCookie).toContain("Path=/")
    // http issuer in development: no Secure flag (browsers would drop the cookie); https issuers set it.
    expect(setCookie).not.toContain("Secure")
    const html = await response.text()
    expect(html).toContain('<html lang="en">')
    expect(html).toContain('<label for="username">Username</label>')
    expect(html).toContain('autocomplete="current-password"')
    expect(html).toContain("Public App")
  })

  it("uses a Secure, __Host- prefixed cookie when the issuer is https", async () => {
    const as = createAuthorizationServer({
      issuer: "https://as.example.com",
      resources: [{ uri: MCP, scopes: { "tools:read": "Read" } }],
      clients: [{ clientId: "c", redirectUris: ["https://c.example.com/cb"] }],
    })
    // Requests reach the handler as https://as.example.com/... (what a TLS-terminating proxy in front would forward).
    const running = await listen(as.handler, { publicUrl: "https://as.example.com" })
    try {
      const { url } = await authorizeUrl({ issuer: running.url } as TestServer, {
        client_id: "c",
        redirect_uri: "https://c.example.com/cb",
        scope: "tools:read",
      })
      const response = await fetch(url, { redirect: "manual" })
      expect(response.status).toBe(200)
      const setCookie = response.headers.getSetCookie()[0] ?? ""
      expect(setCookie).toMatch(/^__Host-keyway_session=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=28800; Secure$/)
    } finally {
      await running.close()
      await as.close()
    }
  })

  it("refuses a wrong password with 401 and the form again", async () => {
    const { url } = await authorizeUrl(server)
    const request = new URL(url).search.slice(1)
    const page = await fetch(url, { redirect: "manual" })
    const response = await post(
      "/authorize/login",
      { csrf_token: csrfOf(await page.text()), request, username: "alice", password: "wrong" },
      { cookie: cookieOf(page)! },
    )
    expect(response.status).toBe(401)
    const html = await response.text()
    expect(html).toContain('role="alert" id="login-error">Wrong username or password.')
    expect(html).toContain('value="alice"')
  })

  it("refuses a login POST without the CSRF token (403)", async () => {
    const { url } = await authorizeUrl(server)
    const page = await fetch(url, { redirect: "manual" })
    const response = await post(
      "/authorize/login",
      { request: new URL(url).search.slice(1), username: "alice", password: PASSWORD },
      { cookie: cookieOf(page)! },
    )
    expect(response.status).toBe(403)
    expect(await response.text()).toContain('data-error="csrf"')
  })

  it("refuses a login POST whose CSRF token belongs to another session (403)", async () => {
    const { url } = await authorizeUrl(server)
    const mine = await fetch(url, { redirect: "manual" })
    const theirs = await fetch(url, { redirect: "manual" })
    const response = await post(
      "/authorize/login",
      {
        csrf_token: csrfOf(await theirs.text()),
        request: new URL(url).search.slice(1),
        username: "alice",
        password: PASSWORD,
      },
      { cookie: cookieOf(mine)! },
    )
    expect(response.status).toBe(403)
  })

  it("refuses a login POST from another origin (403)", async () => {
    const { url } = await authorizeUrl(server)
    const page = await fetch(url, { redirect: "manual" })
    const response = await post(
      "/authorize/login",
      {
        csrf_token: csrfOf(await page.text()),
        request: new URL(url).search.slice(1),
        username: "alice",
        password: PASSWORD,
      },
      { cookie: cookieOf(page)!, origin: "https://evil.example" },
    )
    expect(response.status).toBe(403)
  })

  it("issues a new session id at login", async () => {
    const { cookie, anonymous } = await signIn()
    expect(cookie).not.toBe(anonymous)
  })
})

describe("consent page", () => {
  it("shows the client name, the redirect host, the resource and the scopes with descriptions", async () => {
    const { consent, html } = await signIn()
    expect(consent.status).toBe(200)
    expectPageHeaders(consent)
    // No form-action: Chromium would apply it to every redirect after Approve (see pages.ts).
    expect(consent.headers.get("content-security-policy")).not.toContain("form-action")
    expect(html).toContain("<span data-client-name>Public App</span>")
    expect(html).toContain('<p class="host" data-redirect-host>app.example.com</p>')
    expect(html).not.toContain("data-localhost-warning")
    expect(html).toContain("<strong data-resource>Example MCP</strong>")
    expect(html).toContain('<li data-scope="tools:read"><code>tools:read</code>: List the tools</li>')
    expect(html).toContain('<li data-scope="tools:call"><code>tools:call</code>: Call tools for you</li>')
    expect(html).toContain('name="decision" value="approve"')
    expect(html).toContain('name="decision" value="deny"')
  })

  it("warns when the redirect goes to localhost only", async () => {
    const { html } = await signIn({ redirect_uri: "http://127.0.0.1:7777/callback" })
    expect(html).toContain('<p class="host" data-redirect-host>127.0.0.1:7777</p>')
    expect(html).toContain("data-localhost-warning")
  })

  it("Deny redirects with access_denied, state and iss", async () => {
    const { html, cookie, request } = await signIn()
    const response = await post(
      "/authorize/consent",
      { csrf_token: csrfOf(html), request, decision: "deny" },
      { cookie },
    )
    expect(response.status).toBe(303)
    const location = new URL(response.headers.get("location")!)
    expect(location.searchParams.get("error")).toBe("access_denied")
    expect(location.searchParams.get("state")).toBe("st-123")
    expect(location.searchParams.get("iss")).toBe(server.issuer)
    expect(location.searchParams.has("code")).toBe(false)
  })

  it("refuses a consent POST without the CSRF token (403) and issues nothing", async () => {
    const { cookie, request } = await signIn()
    const response = await post("/authorize/consent", { request, decision: "approve" }, { cookie })
    expect(response.status).toBe(403)
    expect(response.headers.get("location")).toBeNull()
  })

  it("refuses a consent POST without a signed-in session (403)", async () => {
    const { html, anonymous, request } = await signIn()
    const response = await post(
      "/authorize/consent",
      { csrf_token: csrfOf(html), request, decision: "approve" },
      { cookie: anonymous },
    )
    expect(response.status).toBe(403)
  })

  it("refuses a tampered session cookie (403)", async () => {
    const { html, cookie, request } = await signIn()
    const tampered = cookie.replace(/.$/, (c) => (c === "A" ? "B" : "A"))
    const response = await post(
      "/authorize/consent",
      { csrf_token: csrfOf(html), request, decision: "approve" },
      { cookie: tampered },
    )
    expect(response.status).toBe(403)
  })

  it("re-validates the request on POST: a tampered redirect_uri gets the error page, not a redirect", async () => {
    const { html, cookie, request } = await signIn()
    const tampered = request.replace(
      encodeURIComponent("https://app.example.com/callback"),
      encodeURIComponent("https://evil.example/cb"),
    )
    const response = await post(
      "/authorize/consent",
      { csrf_token: csrfOf(html), request: tampered, decision: "approve" },
      { cookie },
    )
    expect(response.status).toBe(400)
    expect(response.headers.get("location")).toBeNull()
    expect(await response.text()).toContain('data-error="invalid_request"')
  })

  it("escapes client-controlled text", async () => {
    const evil = await startServer({
      clients: [
        { clientId: "evil", clientName: '<script>alert(1)</script> & "Co"', redirectUris: ["https://e.example/cb"] },
      ],
    })
    try {
      const { url } = await authorizeUrl(evil, { client_id: "evil", redirect_uri: "https://e.example/cb" })
      const html = await (await fetch(url)).text()
      expect(html).not.toContain("<script>")
      expect(html).toContain("<strong>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Co&quot;</strong>")
    } finally {
      await evil.close()
    }
  })
})
