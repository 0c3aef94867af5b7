import type { Operations } from "@keyway/authorization-server"
import { Grant } from "@keyway/core"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { deviceAuthorization } from "../src/authorization-server.js"
import {
  authorizeDevice,
  cookieOf,
  csrfOf,
  type DeviceServer,
  decide,
  enterCode,
  MCP,
  PASSWORD,
  poll,
  post,
  SECRET,
  signIn,
  startDeviceServer,
} from "./support/asServer.js"

const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`

let server: DeviceServer
beforeEach(async () => {
  server = await startDeviceServer({ device: { entryLimit: { max: 3, window: 600 } } })
})
afterEach(() => server.close())

describe("device authorization endpoint (RFC 8628 §3.1-3.2)", () => {
  it("is in the metadata with the grant type", async () => {
    const metadata = await (await fetch(`${server.url}/.well-known/oauth-authorization-server`)).json()
    expect(metadata.device_authorization_endpoint).toBe(`${server.issuer}/device_authorization`)
    expect(metadata.grant_types_supported).toContain(Grant.DEVICE_CODE)
  })

  it("answers both codes, the verification URIs, the lifetime and the interval, never cached", async () => {
    const response = await post(server.url, "/device_authorization", {
      client_id: "-tv",
      resource: MCP,
      scope: "tools:read",
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("cache-control")).toBe("no-store")
    const body = await response.json()
    expect(Object.keys(body).sort()).toEqual([
      "device_code",
      "expires_in",
      "interval",
      "user_code",
      "verification_uri",
      "verification_uri_complete",
    ])
    expect(body.user_code).toMatch(USER_CODE)
    // 256 bits, base64url.
    expect(body.device_code).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(body.verification_uri).toBe(`${server.issuer}/device`)
    expect(body.verification_uri_complete).toBe(`${server.issuer}/device?user_code=${body.user_code}`)
    expect(body.expires_in).toBe(600)
    expect(body.interval).toBe(5)
    const other = await authorizeDevice(server.url)
    expect(other.user_code).not.toBe(body.user_code)
    expect(other.device_code).not.toBe(body.device_code)
  })

  it("authenticates confidential clients and refuses unknown ones: 401 invalid_client", async () => {
    const unknown = await post(server.url, "/device_authorization", { client_id: "-nobody", resource: MCP })
    expect(unknown.status).toBe(401)
    expect(unknown.headers.get("www-authenticate")).toBe('Basic realm="token"')
    expect((await unknown.json()).error).toBe("invalid_client")
    const wrong = await post(
      server.url,
      "/device_authorization",
      { resource: MCP },
      { authorization: basic("box", "x") },
    )
    expect(wrong.status).toBe(401)
    expect((await wrong.json()).error).toBe("invalid_client")
    const right = await post(
      server.url,
      "/device_authorization",
      { resource: MCP },
      { authorization: basic("box", SECRET) },
    )
    expect(right.status).toBe(200)
  })

  it("refuses a client without the grant type, bad resources and scopes, and malformed requests", async () => {
    const web = await post(server.url, "/device_authorization", { client_id: "web", resource: MCP })
    expect(web.status).toBe(400)
    expect(await web.json()).toEqual({
      error: "unauthorized_client",
      error_description: `this client may not use the ${Grant.DEVICE_CODE} grant`,
    })
    const target = await post(server.url, "/device_authorization", { client_id: "-tv", resource: "https://x.example" })
    expect(await target.json()).toEqual({
      error: "invalid_target",
      error_description: "this server does not issue tokens for that resource",
    })
    const missing = await post(server.url, "/device_authorization", { client_id: "-tv" })
    expect(await missing.json()).toEqual({ error: "invalid_target", error_description: "resource is required" })
    const scope = await post(server.url, "/device_authorization", { client_id: "-tv", resource: MCP, scope: "admin" })
    expect(scope.status).toBe(400)
    expect(await scope.json()).toEqual({
      error: "invalid_scope",
      error_description: "scope admin is not defined for this resource",
    })
    const narrow = await post(server.url, "/device_authorization", {
      client_id: "narrow",
      resource: MCP,
      scope: "tools:call",
    })
    expect(await narrow.json()).toEqual({
      error: "invalid_scope",
      error_description: "this client may not request tools:call",
    })
    const repeated = await fetch(`${server.url}/device_authorization`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `client_id=-tv&resource=${encodeURIComponent(MCP)}&scope=a&scope=b`,
    })
    expect(await repeated.json()).toEqual({
      error: "invalid_request",
      error_description: "parameter scope is repeated",
    })
    const get = await fetch(`${server.url}/device_authorization`)
    expect(get.status).toBe(405)
    expect(get.headers.get("allow")).toBe("POST, OPTIONS")
  })
})

describe("device code grant (RFC 8628 §3.4-3.5)", () => {
  it("is pending, slows a client that polls too fast by 5 s each time, then issues once after approval", async () => {
    const device = await authorizeDevice(server.url, { scope: "tools:read tools:call" })
    const pending = await poll(server.url, device.device_code)
    expect(pending.status).toBe(400)
    expect(pending.headers.get("cache-control")).toBe("no-store")
    expect(await pending.json()).toEqual({
      error: "authorization_pending",
      error_description: "the user has not yet approved the request",
    })
    await server.adjust(4)
    expect(await (await poll(server.url, device.device_code)).json()).toEqual({
      error: "slow_down",
      error_description: "polling too fast: wait 10 seconds between requests",
    })
    // The interval is now 10 s for this device code: 9 s is too soon again.
    await server.adjust(9)
    expect(await (await poll(server.url, device.device_code)).json()).toEqual({
      error: "slow_down",
      error_description: "polling too fast: wait 15 seconds between requests",
    })
    await server.adjust(15)
    expect((await (await poll(server.url, device.device_code)).json()).error).toBe("authorization_pending")
    // Another device code keeps the interval it was given.
    const other = await authorizeDevice(server.url)
    expect((await (await poll(server.url, other.device_code)).json()).error).toBe("authorization_pending")
    await server.adjust(5)
    expect((await (await poll(server.url, other.device_code)).json()).error).toBe("authorization_pending")

    const decided = await decide(server.url, device.user_code, "approve")
    expect(decided.status).toBe(200)
    expect(decided.html).toContain('<h1 data-finished="approved">Device connected</h1>')
    await server.adjust(15)
    const issued = await poll(server.url, device.device_code)
    expect(issued.status).toBe(200)
    const tokens = await issued.json()
    expect(tokens).toMatchObject({ token_type: "Bearer", expires_in: 300, scope: "tools:read tools:call" })
    const claims = JSON.parse(Buffer.from(tokens.access_token.split(".")[1], "base64url").toString())
    expect(claims).toMatchObject({ iss: server.issuer, sub: "alice", aud: MCP, client_id: "-tv" })
    expect(claims.auth_time).toBe(server.now() - 15)
    // Single use.
    expect(await (await poll(server.url, device.device_code)).json()).toEqual({
      error: "invalid_grant",
      error_description: "the device code is invalid",
    })
    // A public client's refresh token rotates.
    const refreshed = await post(server.url, "/token", {
      grant_type: "refresh_token",
      client_id: "-tv",
      refresh_token: tokens.refresh_token,
    })
    expect(refreshed.status).toBe(200)
    expect((await refreshed.json()).refresh_token).not.toBe(tokens.refresh_token)
  })

  it("answers access_denied after the user denies, then forgets the code", async () => {
    const device = await authorizeDevice(server.url)
    const decided = await decide(server.url, device.user_code, "deny")
    expect(decided.html).toContain('<h1 data-finished="denied">Request denied</h1>')
    const denied = await poll(server.url, device.device_code)
    expect(denied.status).toBe(400)
    expect(await denied.json()).toEqual({ error: "access_denied", error_description: "the user denied the request" })
    expect((await (await poll(server.url, device.device_code)).json()).error).toBe("invalid_grant")
  })

  it("answers expired_token from expires_in on, also after approval", async () => {
    const device = await authorizeDevice(server.url)
    await server.adjust(599)
    expect((await (await poll(server.url, device.device_code)).json()).error).toBe("authorization_pending")
    await server.adjust(1)
    expect(await (await poll(server.url, device.device_code)).json()).toEqual({
      error: "expired_token",
      error_description: "the device code has expired",
    })
    const cookie = await signIn(server.url)
    const entry = await enterCode(server.url, cookie, device.user_code)
    expect(entry.status).toBe(400)
    expect(await entry.text()).toContain("This code is not valid or has expired.")
  })

  it("refuses a missing, unknown or another client's device code, and a client without the grant", async () => {
    const device = await authorizeDevice(server.url)
    expect(await (await poll(server.url, "")).json()).toEqual({
      error: "invalid_request",
      error_description: "device_code is missing",
    })
    expect(await (await poll(server.url, "-unknown")).json()).toEqual({
      error: "invalid_grant",
      error_description: "the device code is invalid",
    })
    const other = await poll(server.url, device.device_code, { client_id: "narrow" })
    expect(await other.json()).toEqual({
      error: "invalid_grant",
      error_description: "the device code was issued to another client",
    })
    const web = await poll(server.url, device.device_code, { client_id: "web" })
    expect(await web.json()).toEqual({
      error: "unauthorized_client",
      error_description: `this client may not use the ${Grant.DEVICE_CODE} grant`,
    })
  })

  it("issues to a confidential client that authenticates, and the grant shows on the account page", async () => {
    const response = await post(
      server.url,
      "/device_authorization",
      { resource: MCP },
      { authorization: basic("box", SECRET) },
    )
    const device = await response.json()
    const cookie = await signIn(server.url)
    await decide(server.url, device.user_code, "approve", cookie)
    const issued = await poll(
      server.url,
      device.device_code,
      { client_id: undefined },
      { authorization: basic("box", SECRET) },
    )
    expect(issued.status).toBe(200)
    const tokens = await issued.json()
    expect(tokens.scope).toBe("tools:read tools:call")
    // No refresh_token grant for this client.
    expect(tokens.refresh_token).toBeUndefined()
    const account = await fetch(`${server.url}/account`, { headers: { cookie } })
    expect(await account.text()).toContain("Build Box")
  })
})

describe("the grant a device authorization opens", () => {
  it("is revoked on the account page like a code flow's: the refresh token and the access token die with it", async () => {
    const device = await authorizeDevice(server.url, { scope: "tools:read" })
    const cookie = await signIn(server.url)
    await decide(server.url, device.user_code, "approve", cookie)
    const issued = await poll(server.url, device.device_code)
    expect(issued.status).toBe(200)
    const tokens = (await issued.json()) as { access_token: string; refresh_token: string }
    const introspect = async () =>
      (
        await post(server.url, "/introspect", { token: tokens.access_token }, { authorization: basic("box", SECRET) })
      ).json()
    expect(await introspect()).toMatchObject({ active: true, client_id: "-tv", sub: "alice", scope: "tools:read" })

    const account = await fetch(`${server.url}/account`, { headers: { cookie } })
    const page = await account.text()
    expect(page).toContain("Living Room TV")
    const revoked = await post(
      server.url,
      "/account/revoke",
      { client_id: "-tv", csrf_token: csrfOf(page) },
      { cookie },
    )
    expect([revoked.status, revoked.headers.get("location")]).toEqual([303, "/account"])

    const refreshed = await post(server.url, "/token", {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: "-tv",
    })
    expect(refreshed.status).toBe(400)
    expect(await refreshed.json()).toEqual({
      error: "invalid_grant",
      error_description: "the refresh token has been revoked",
    })
    expect(await introspect()).toEqual({ active: false })
  })
})

describe("security events", () => {
  it("reports the sign-in, the consent and the token issued under the device code grant", async () => {
    const events: Array<Operations.SecurityEvent> = []
    const reporting = await startDeviceServer({ onSecurityEvent: (event) => events.push(event) })
    try {
      const device = await authorizeDevice(reporting.url, { scope: "tools:read" })
      await decide(reporting.url, device.user_code, "approve")
      expect((await poll(reporting.url, device.device_code)).status).toBe(200)
      const denied = await authorizeDevice(reporting.url, { scope: "tools:call" })
      await decide(reporting.url, denied.user_code, "deny")
      expect(events).toEqual([
        { event: "login_succeeded", username: "alice", subject: "alice" },
        { event: "consent_given", subject: "alice", client_id: "-tv", resource: MCP, scope: "tools:read" },
        {
          event: "token_issued",
          grant_type: Grant.DEVICE_CODE,
          client_id: "-tv",
          subject: "alice",
          resource: MCP,
          scope: "tools:read",
          expires_in: 300,
          refresh_token_issued: true,
        },
        { event: "login_succeeded", username: "alice", subject: "alice" },
        { event: "consent_denied", subject: "alice", client_id: "-tv", resource: MCP, scope: "tools:call" },
      ])
    } finally {
      await reporting.close()
    }
  })
})

describe("verification page (RFC 8628 §3.3)", () => {
  it("asks to sign in, prefills the complete URI's code but asks to confirm it, and names what is asked", async () => {
    const device = await authorizeDevice(server.url, { scope: "tools:read" })
    const login = await fetch(device.verification_uri_complete)
    expect(login.status).toBe(200)
    for (const [name, value] of [
      ["x-frame-options", "DENY"],
      ["cache-control", "no-store"],
    ]) {
      expect(login.headers.get(name ?? "")).toBe(value)
    }
    expect(login.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    const loginHtml = await login.text()
    expect(loginHtml).toContain("<h1>Sign in</h1>")
    const signedIn = await post(
      server.url,
      "/device",
      { csrf_token: csrfOf(loginHtml), request: device.user_code, username: "alice", password: PASSWORD },
      { cookie: cookieOf(login) ?? "" },
    )
    expect(signedIn.status).toBe(303)
    expect(signedIn.headers.get("location")).toBe(`${server.issuer}/device?user_code=${device.user_code}`)
    const cookie = cookieOf(signedIn) ?? ""
    const entry = await fetch(signedIn.headers.get("location")!, { headers: { cookie } })
    const entryHtml = await entry.text()
    expect(entryHtml).toContain(`value="${device.user_code}"`)
    expect(entryHtml).toContain("Check that it is exactly the code your device shows")
    // Entry ignores case and dashes.
    const loose = device.user_code.replace("-", "").toLowerCase()
    const consent = await post(server.url, "/device", { csrf_token: csrfOf(entryHtml), user_code: loose }, { cookie })
    expect(consent.status).toBe(200)
    const consentHtml = await consent.text()
    expect(consentHtml).toContain("<span data-client-name>Living Room TV</span>")
    expect(consentHtml).toContain("<strong data-resource>Example MCP</strong>")
    expect(consentHtml).toContain(`<code>${MCP}</code>`)
    expect(consentHtml).toContain('<li data-scope="tools:read"><code>tools:read</code>: List the tools</li>')
    expect(consentHtml).not.toContain('data-scope="tools:call"')
    expect(consentHtml).toContain("This request started on another device.")
    expect(consentHtml).toContain(`<code data-user-code>${device.user_code}</code>`)
  })

  it("refuses a form without the session's CSRF token and one from another origin", async () => {
    const device = await authorizeDevice(server.url)
    const cookie = await signIn(server.url)
    const forged = await post(server.url, "/device", { user_code: device.user_code, decision: "approve" }, { cookie })
    expect(forged.status).toBe(403)
    expect(await forged.text()).toContain('data-error="csrf"')
    const page = await fetch(`${server.url}/device`, { headers: { cookie } })
    const crossSite = await post(
      server.url,
      "/device",
      { csrf_token: csrfOf(await page.text()), user_code: device.user_code, decision: "approve" },
      { cookie, origin: "https://evil.example" },
    )
    expect(crossSite.status).toBe(403)
    expect((await (await poll(server.url, device.device_code)).json()).error).toBe("authorization_pending")
  })

  it("locks code entry after too many wrong codes per session, with a clear page, until the window ends", async () => {
    const device = await authorizeDevice(server.url)
    const cookie = await signIn(server.url)
    for (const wrong of ["BBBB-BBBB", "bcdf-ghj", "AEIO-UAEI"]) {
      const answer = await enterCode(server.url, cookie, wrong)
      expect(answer.status).toBe(400)
    }
    const locked = await enterCode(server.url, cookie, "CCCC-CCCC")
    expect(locked.status).toBe(429)
    expect(locked.headers.get("retry-after")).toBe("600")
    expect(await locked.text()).toContain(
      "Too many wrong codes were entered. For your security, code entry is paused. Try again in 10 minutes.",
    )
    // Even the right code is refused while locked.
    const right = await enterCode(server.url, cookie, device.user_code)
    expect(right.status).toBe(429)
    await server.adjust(600)
    const later = await authorizeDevice(server.url)
    const open = await enterCode(server.url, cookie, later.user_code)
    expect(open.status).toBe(200)
  })

  it("says a used code was already used", async () => {
    const device = await authorizeDevice(server.url)
    const cookie = await signIn(server.url)
    await decide(server.url, device.user_code, "approve", cookie)
    const again = await enterCode(server.url, cookie, device.user_code)
    expect(again.status).toBe(400)
    expect(await again.text()).toContain("This code was already used.")
  })
})

describe("options", () => {
  it("refuses invalid options", () => {
    expect(() => deviceAuthorization({ interval: 0 })).toThrow("deviceAuthorization: interval: must be at least 1")
    expect(() => deviceAuthorization({ pagePath: "device" })).toThrow(
      "deviceAuthorization: pagePath: must be a path like /device",
    )
  })

  it("takes the lifetime, the interval and the page path", async () => {
    const custom = await startDeviceServer({ device: { lifetime: 120, interval: 2, pagePath: "/activate" } })
    try {
      const device = await authorizeDevice(custom.url)
      expect(device).toMatchObject({ expires_in: 120, interval: 2, verification_uri: `${custom.issuer}/activate` })
      expect((await fetch(`${custom.url}/activate`)).status).toBe(200)
      expect((await fetch(`${custom.url}/device`)).status).toBe(404)
    } finally {
      await custom.close()
    }
  })
})
