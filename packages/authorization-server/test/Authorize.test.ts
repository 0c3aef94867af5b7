import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { layerMemory } from "../src/storage/Storage.js"
import { startEffectServer } from "./support/effectServer.js"
import {
  type AuthorizeParams,
  authorizeUrl,
  loginAndConsent,
  MCP,
  startServer,
  type TestServer,
} from "./support/server.js"

let server: TestServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(async () => {
  await server.close()
})

/** The request must end on an error page: status 400, the code shown, and no redirect. */
const expectErrorPage = async (params: AuthorizeParams, error: string, description: RegExp) => {
  const { url } = await authorizeUrl(server, params)
  const response = await fetch(url, { redirect: "manual" })
  expect(response.status).toBe(400)
  expect(response.headers.get("location")).toBeNull()
  expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
  const html = await response.text()
  expect(html).toContain(`data-error="${error}"`)
  expect(/<p data-error-description>([^<]*)<\/p>/.exec(html)?.[1]).toMatch(description)
}

/** The request must be answered with a redirect to the (trusted) redirect URI carrying error, state and iss. */
const expectRedirectError = async (params: AuthorizeParams, error: string, description: RegExp) => {
  const { url } = await authorizeUrl(server, params)
  const response = await fetch(url, { redirect: "manual" })
  expect(response.status).toBe(302)
  const location = new URL(response.headers.get("location")!)
  expect(`${location.origin}${location.pathname}`).toBe(params.redirect_uri ?? "https://app.example.com/callback")
  expect(location.searchParams.get("error")).toBe(error)
  expect(location.searchParams.get("error_description")).toMatch(description)
  expect(location.searchParams.get("state")).toBe(params.state ?? "st-123")
  expect(location.searchParams.get("iss")).toBe(server.issuer)
  expect(location.searchParams.has("code")).toBe(false)
}

describe("authorization endpoint: errors shown on a page (redirect URI not trusted)", () => {
  it("unknown client", () => expectErrorPage({ client_id: "nobody" }, "invalid_client", /not known/))
  it("missing client_id", () => expectErrorPage({ client_id: undefined }, "invalid_request", /client_id is missing/))
  it("missing redirect_uri when several are registered", () =>
    expectErrorPage({ redirect_uri: undefined }, "invalid_request", /redirect_uri is missing/))

  const lookAlikes: ReadonlyArray<[string, string]> = [
    ["other port on a non-loopback host", "https://app.example.com:8443/callback"],
    ["extra path", "https://app.example.com/callback/extra"],
    ["extra query", "https://app.example.com/callback?x=1"],
    ["different case in path", "https://app.example.com/Callback"],
    ["http instead of https", "http://app.example.com/callback"],
    ["trailing slash", "https://app.example.com/callback/"],
    ["other host", "https://evil.example.com/callback"],
    ["suffix host", "https://app.example.com.evil.example/callback"],
    ["userinfo trick", "https://app.example.com@evil.example/callback"],
    ["fragment", "https://app.example.com/callback#x"],
    ["localhost instead of 127.0.0.1", "http://localhost:5000/callback"],
    ["loopback with another path", "http://127.0.0.1:5000/other"],
    ["https on loopback (only http was registered)", "https://127.0.0.1:5000/callback"],
  ]
  for (const [name, redirect] of lookAlikes) {
    it(`redirect mismatch: ${name}`, () =>
      expectErrorPage({ redirect_uri: redirect }, "invalid_request", /does not match/))
  }

  it("repeated client_id", async () => {
    const { url } = await authorizeUrl(server)
    const response = await fetch(`${url}&client_id=public-app`, { redirect: "manual" })
    expect(response.status).toBe(400)
    expect(await response.text()).toContain('data-error="invalid_request"')
  })
})

describe("authorization endpoint: errors redirected with error, state and iss", () => {
  it("missing response_type", () =>
    expectRedirectError({ response_type: undefined }, "invalid_request", /response_type/))
  it("response_type token", () =>
    expectRedirectError({ response_type: "token" }, "unsupported_response_type", /only response_type=code/))
  it("missing code_challenge", () =>
    expectRedirectError({ code_challenge: undefined }, "invalid_request", /code_challenge is required/))
  it("plain method", () =>
    expectRedirectError({ code_challenge_method: "plain" }, "invalid_request", /plain is not supported; use S256/))
  it("missing method (defaults to plain)", () =>
    expectRedirectError({ code_challenge_method: undefined }, "invalid_request", /must be S256/))
  it("malformed challenge", () =>
    expectRedirectError({ code_challenge: "short" }, "invalid_request", /base64url SHA-256/))
  it("missing resource with no default configured", () =>
    expectRedirectError({ resource: undefined }, "invalid_target", /resource is required/))
  it("unknown resource", () =>
    expectRedirectError({ resource: "https://unknown.example.com/mcp" }, "invalid_target", /does not issue tokens/))
  it("resource that is not a URI", () =>
    expectRedirectError({ resource: "not a uri" }, "invalid_target", /valid absolute URI/))
  it("resource with a fragment", () =>
    expectRedirectError({ resource: `${MCP}#frag` }, "invalid_target", /valid absolute URI/))
  it("two resources", async () => {
    const { url } = await authorizeUrl(server)
    const response = await fetch(`${url}&resource=${encodeURIComponent("https://other.example.com")}`, {
      redirect: "manual",
    })
    const location = new URL(response.headers.get("location")!)
    expect(location.searchParams.get("error")).toBe("invalid_target")
    expect(location.searchParams.get("iss")).toBe(server.issuer)
  })
  it("scope outside the resource", () =>
    expectRedirectError({ scope: "tools:read files" }, "invalid_scope", /files is not defined for this resource/))
  it("scope outside what the client may request", () =>
    expectRedirectError(
      { client_id: "narrow-app", redirect_uri: "https://narrow.example.com/cb", scope: "tools:call" },
      "invalid_scope",
      /may not request tools:call/,
    ))
  it("malformed scope", () => expectRedirectError({ scope: 'tools:read "x"' }, "invalid_scope", /malformed/))
  it("state is echoed untouched, including characters that need encoding", () =>
    expectRedirectError({ state: "a b&c=d/é", resource: undefined }, "invalid_target", /resource is required/))
})

describe("authorization endpoint: success", () => {
  it("shows the login page, then consent, then redirects with code, state and iss", async () => {
    const { url } = await authorizeUrl(server, { state: "xyz" })
    const { location } = await loginAndConsent(server, url)
    expect(`${location.origin}${location.pathname}`).toBe("https://app.example.com/callback")
    expect(location.searchParams.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(location.searchParams.get("state")).toBe("xyz")
    expect(location.searchParams.get("iss")).toBe(server.issuer)
  })

  it("accepts a loopback redirect on any port (RFC 8252 §7.3), for 127.0.0.1 and [::1]", async () => {
    for (const redirect of [
      "http://127.0.0.1:49152/callback",
      "http://[::1]:61000/callback",
      "http://127.0.0.1/callback",
    ]) {
      const { url } = await authorizeUrl(server, { redirect_uri: redirect })
      const { location } = await loginAndConsent(server, url)
      expect(location.href.startsWith(`${redirect}?`)).toBe(true)
      expect(location.searchParams.get("code")).not.toBeNull()
    }
  })

  it("uses the configured default resource when resource is absent", async () => {
    const withDefault = await startServer({ defaultResource: MCP })
    try {
      const { url } = await authorizeUrl(withDefault, { resource: undefined })
      const page = await fetch(url, { redirect: "manual" })
      expect(page.status).toBe(200)
      const { location } = await loginAndConsent(withDefault, url)
      expect(location.searchParams.get("code")).not.toBeNull()
    } finally {
      await withDefault.close()
    }
  })

  it("remembers consent per user, client, resource and scopes, and forgets it when revoked", async () => {
    const server = await startServer()
    try {
      const { url } = await authorizeUrl(server, { scope: "tools:read" })
      const { cookie } = await loginAndConsent(server, url)
      const again = await authorizeUrl(server, { scope: "tools:read" })
      const remembered = await fetch(again.url, { redirect: "manual", headers: { cookie } })
      expect(remembered.status).toBe(302)
      expect(new URL(remembered.headers.get("location")!).searchParams.get("code")).not.toBeNull()

      // A wider scope is not covered: the consent page is shown again.
      const wider = await authorizeUrl(server, { scope: "tools:read tools:call" })
      const widerResponse = await fetch(wider.url, { redirect: "manual", headers: { cookie } })
      expect(widerResponse.status).toBe(200)
      expect(await widerResponse.text()).toContain('data-scope="tools:call"')
      expect((await server.as.listConsents("alice")).map((c) => [c.client_id, c.resource, c.scopes])).toEqual([
        ["public-app", MCP, ["tools:read"]],
      ])

      expect(await server.as.revokeConsent("alice", "public-app")).toBeGreaterThan(0)
      expect(await server.as.listConsents("alice")).toEqual([])
      const afterRevoke = await fetch(again.url, { redirect: "manual", headers: { cookie } })
      expect(afterRevoke.status).toBe(200)
      expect(await afterRevoke.text()).toContain("Approve")
    } finally {
      await server.close()
    }
  })
})

describe("login session lifetime", () => {
  it("a session lasts lifetimes.session on the server's clock; after it the login page is shown again", async () => {
    const clocked = await startEffectServer(layerMemory, { lifetimes: { session: 3600 } })
    try {
      const { cookie } = await loginAndConsent(clocked, (await authorizeUrl(clocked)).url)
      // Consent is remembered: while the session lives, a new request goes straight back to the client with a code.
      await clocked.adjust(3599)
      const alive = await fetch((await authorizeUrl(clocked)).url, { redirect: "manual", headers: { cookie } })
      expect(alive.status).toBe(302)
      expect(new URL(alive.headers.get("location") ?? "").searchParams.get("code")).not.toBeNull()
      await clocked.adjust(1)
      const expired = await fetch((await authorizeUrl(clocked)).url, { redirect: "manual", headers: { cookie } })
      expect(expired.status).toBe(200)
      expect(await expired.text()).toContain('name="password"')
    } finally {
      await clocked.close()
    }
  })
})
