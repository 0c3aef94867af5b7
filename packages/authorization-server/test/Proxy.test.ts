import { Pkce } from "@keyway/core"
import { launchChromium } from "@keyway/testing"
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from "jose"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { type AuthorizationServerInstance, createAuthorizationServer } from "../src/AuthorizationServer.js"
import { ConfigError, resolve } from "../src/Config.js"
import { listen, type RunningServer } from "../src/NodeServer.js"
import type { SecurityEvent } from "../src/Operations.js"
import type { UpstreamOptions } from "../src/proxy/UpstreamProvider.js"
import { alicePasswordHash, csrfOf, MCP, PASSWORD, SECRET } from "./support/server.js"

/** The API the upstream authorization server protects; its access tokens name it as audience. */
const UPSTREAM_API = "https://api.upstream.example"
const UPSTREAM_SUBJECT = "upstream-user-0042"
const CLIENT_REDIRECT = "https://mcp-client.example.com/cb"
const OTHER_REDIRECT = "https://other-client.example.com/cb"

/** A browser's cookies for one origin. */
class Jar {
  private readonly cookies = new Map<string, string>()
  take(response: Response): Response {
    for (const header of response.headers.getSetCookie()) {
      const [pair = "", ...attributes] = header.split(";")
      const i = pair.indexOf("=")
      const name = pair.slice(0, i).trim()
      if (attributes.some((a) => a.trim().toLowerCase() === "max-age=0")) this.cookies.delete(name)
      else this.cookies.set(name, pair.slice(i + 1).trim())
    }
    return response
  }
  header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; ")
  }
  names(): ReadonlyArray<string> {
    return [...this.cookies.keys()]
  }
}

interface Running {
  readonly as: AuthorizationServerInstance
  readonly server: RunningServer
  readonly seen: Array<string>
}

let upstream: Running
let proxy: Running
/** The proxy's security events. */
let proxyEvents: Array<SecurityEvent> = []
const started: Array<Running> = []

/** Two real servers on loopback: the upstream (identity provider) and the proxy fronting it. */
const startPair = async (upstreamName = "127.0.0.1", overrides: Partial<UpstreamOptions> = {}) => {
  const handlers: Record<"up" | "proxy", (request: Request) => Promise<Response>> = {
    up: async () => new Response(null, { status: 503 }),
    proxy: async () => new Response(null, { status: 503 }),
  }
  const upSeen: Array<string> = []
  const proxySeen: Array<string> = []
  const upServer = await listen((request) => {
    upSeen.push(new URL(request.url).pathname)
    return handlers.up(request)
  })
  const proxyServer = await listen((request) => {
    proxySeen.push(new URL(request.url).pathname)
    return handlers.proxy(request)
  })
  const upIssuer = upServer.url.replace("127.0.0.1", upstreamName)
  const upAs = createAuthorizationServer({
    issuer: upIssuer,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => undefined,
    resources: [{ uri: UPSTREAM_API, name: "Upstream API", scopes: { profile: "Read your profile" } }],
    users: [
      { username: "alice", passwordHash: await alicePasswordHash(), subject: UPSTREAM_SUBJECT, displayName: "Alice" },
    ],
    clients: [
      {
        clientId: "keyway-proxy",
        clientName: "Keyway Proxy",
        redirectUris: [`${proxyServer.url}/upstream/callback`],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_basic",
      },
    ],
  })
  proxyEvents = []
  const proxyAs = createAuthorizationServer({
    issuer: proxyServer.url,
    development: { allowHttpLoopbackIssuer: true, allowHttpLoopbackUpstream: true },
    warn: () => undefined,
    onSecurityEvent: (event) => proxyEvents.push(event),
    registration: true,
    resources: [
      { uri: MCP, name: "Example MCP", scopes: { "tools:read": "List the tools", "tools:call": "Call tools for you" } },
    ],
    upstream: {
      issuer: upIssuer,
      clientId: "keyway-proxy",
      clientSecret: SECRET,
      scope: "profile",
      resource: UPSTREAM_API,
      name: "Upstream Identity",
      ...overrides,
    },
  })
  handlers.up = upAs.handler
  handlers.proxy = proxyAs.handler
  upstream = { as: upAs, server: upServer, seen: upSeen }
  proxy = { as: proxyAs, server: proxyServer, seen: proxySeen }
  started.push(upstream, proxy)
}

afterEach(async () => {
  for (const r of started.splice(0)) {
    // One test closes the upstream early to make it unreachable.
    await r.server.close().catch(() => undefined)
    await r.as.close()
  }
})

const formBody = (values: Record<string, string>) => new URLSearchParams(values).toString()
const postForm = (url: string, jar: Jar, values: Record<string, string>) =>
  fetch(url, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: jar.header() },
    body: formBody(values),
  }).then((r) => jar.take(r))
const get = (url: string, jar: Jar) =>
  fetch(url, { redirect: "manual", headers: { cookie: jar.header() } }).then((r) => jar.take(r))

/** Dynamic registration of a public MCP client at the proxy. */
const register = async (name: string, redirect = CLIENT_REDIRECT) => {
  const response = await fetch(`${proxy.as.issuer}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: name,
      redirect_uris: [redirect],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    }),
  })
  expect(response.status).toBe(201)
  return ((await response.json()) as { client_id: string }).client_id
}

/** The MCP client's authorization request at the proxy. */
const mcpRequest = async (clientId: string, redirect = CLIENT_REDIRECT, state = "mcp-state-1") => {
  const pkce = await Pkce.generate()
  const url = new URL(`${proxy.as.issuer}/authorize`)
  const params = {
    response_type: "code",
    client_id: clientId,
    redirect_uri: redirect,
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource: MCP,
    scope: "tools:read",
    state,
  }
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
  return { url: url.href, query: url.search.slice(1), verifier: pkce.verifier }
}

/** Approves on the proxy consent page; returns the response (303 upstream on success). */
const approveAtProxy = async (jar: Jar, query: string, page: string, decision = "approve") =>
  postForm(`${proxy.as.issuer}/authorize/consent`, jar, { csrf_token: csrfOf(page), request: query, decision })

/** The upstream sign-in: login form (first time) and consent form, as a browser would; returns the callback URL. */
const signInUpstream = async (authorizeUrl: string, jar: Jar, decision = "approve"): Promise<URL> => {
  let response = await get(authorizeUrl, jar)
  if (response.status === 200) {
    const html = await response.text()
    const query = new URL(authorizeUrl).search.slice(1)
    if (html.includes('name="password"')) {
      const login = await postForm(`${upstream.as.issuer}/authorize/login`, jar, {
        csrf_token: csrfOf(html),
        request: query,
        username: "alice",
        password: PASSWORD,
      })
      expect(login.status).toBe(303)
      response = await get(login.headers.get("location")!, jar)
    }
    if (response.status === 200) {
      response = await postForm(`${upstream.as.issuer}/authorize/consent`, jar, {
        csrf_token: csrfOf(await response.text()),
        request: query,
        decision,
      })
    }
  }
  expect([302, 303]).toContain(response.status)
  return new URL(response.headers.get("location")!)
}

/** The whole front channel for a client whose consent page is expected; returns the MCP client's redirect. */
const fullFlow = async (clientId: string, browser: Jar, upstreamBrowser: Jar) => {
  const request = await mcpRequest(clientId)
  const page = await get(request.url, browser)
  expect(page.status).toBe(200)
  const approved = await approveAtProxy(browser, request.query, await page.text())
  expect(approved.status).toBe(303)
  const callback = await signInUpstream(approved.headers.get("location")!, upstreamBrowser)
  const final = await get(callback.href, browser)
  expect(final.status).toBe(302)
  return { location: new URL(final.headers.get("location")!), verifier: request.verifier }
}

const redeem = (clientId: string, code: string, verifier: string) =>
  fetch(`${proxy.as.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: formBody({
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: CLIENT_REDIRECT,
      client_id: clientId,
      resource: MCP,
    }),
  })

const jwksOf = async (issuer: string) =>
  createLocalJWKSet((await (await fetch(`${issuer}/jwks`)).json()) as JSONWebKeySet)

const expectErrorPage = async (response: Response, description: string) => {
  expect(response.status).toBe(400)
  expect(response.headers.get("location")).toBeNull()
  const text = await response.text()
  expect(text).toContain('data-error="invalid_request"')
  expect(text).toContain(`<p data-error-description>${description}</p>`)
}

describe("proxy mode: per-client consent before the upstream sign-in", () => {
  beforeEach(() => startPair())

  it("shows Keyway's consent page first and sends nothing upstream before approval", async () => {
    const clientId = await register("Cool MCP Client")
    const request = await mcpRequest(clientId)
    const page = await get(request.url, new Jar())
    expect(page.status).toBe(200)
    expect(page.headers.get("location")).toBeNull()
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    expect(page.headers.get("content-security-policy")).not.toContain("form-action")
    const html = await page.text()
    expect(html).toContain("<span data-client-name>Cool MCP Client</span>")
    expect(html).toContain('<p class="host" data-redirect-host>mcp-client.example.com</p>')
    expect(html).toContain(`<code data-redirect-uri>${CLIENT_REDIRECT}</code>`)
    expect(html).toContain('data-scope="tools:read"')
    expect(html).toContain("<strong>Upstream Identity</strong>")
    expect(upstream.seen.filter((p) => p === "/authorize")).toEqual([])
  })

  it("approve -> upstream sign-in with the static client and PKCE -> Keyway's own code and token for the MCP resource", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    const page = await get(request.url, browser)
    const approved = await approveAtProxy(browser, request.query, await page.text())
    expect(approved.status).toBe(303)
    const upstreamAuthorize = new URL(approved.headers.get("location")!)
    expect(`${upstreamAuthorize.origin}${upstreamAuthorize.pathname}`).toBe(`${upstream.as.issuer}/authorize`)
    const sent = Object.fromEntries(upstreamAuthorize.searchParams)
    expect(sent).toMatchObject({
      response_type: "code",
      client_id: "keyway-proxy",
      redirect_uri: `${proxy.as.issuer}/upstream/callback`,
      code_challenge_method: "S256",
      scope: "profile",
      resource: UPSTREAM_API,
    })
    expect(sent.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(sent.state).toMatch(/^[A-Za-z0-9_-]{43}$/)
    // Nothing of the MCP client's request leaks upstream.
    expect(upstreamAuthorize.href).not.toContain(encodeURIComponent(CLIENT_REDIRECT))
    expect(sent.code_challenge).not.toBe(new URL(request.url).searchParams.get("code_challenge"))

    const callback = await signInUpstream(upstreamAuthorize.href, new Jar())
    expect(`${callback.origin}${callback.pathname}`).toBe(`${proxy.as.issuer}/upstream/callback`)
    expect(callback.searchParams.get("iss")).toBe(upstream.as.issuer)
    const final = await get(callback.href, browser)
    expect(final.status).toBe(302)
    const location = new URL(final.headers.get("location")!)
    expect(`${location.origin}${location.pathname}`).toBe(CLIENT_REDIRECT)
    expect(location.searchParams.get("iss")).toBe(proxy.as.issuer)
    expect(location.searchParams.get("state")).toBe("mcp-state-1")
    const code = location.searchParams.get("code")!
    expect(code).not.toBe(callback.searchParams.get("code"))

    const response = await redeem(clientId, code, request.verifier)
    expect(response.status).toBe(200)
    const tokens = (await response.json()) as { access_token: string; refresh_token: string }
    const { payload, protectedHeader } = await jwtVerify(tokens.access_token, await jwksOf(proxy.as.issuer), {
      issuer: proxy.as.issuer,
      audience: MCP,
    })
    expect(protectedHeader.typ).toBe("at+jwt")
    expect(payload).toMatchObject({ sub: UPSTREAM_SUBJECT, client_id: clientId, scope: "tools:read" })
    await expect(jwtVerify(tokens.access_token, await jwksOf(upstream.as.issuer))).rejects.toThrow()
    // The user's consent is recorded under the upstream subject too, where it can be listed and withdrawn.
    expect((await proxy.as.listConsents(UPSTREAM_SUBJECT)).map((c) => c.client_id)).toEqual([clientId])
  })

  it("remembers consent per browser and per client: the same client goes straight upstream, a new client is asked", async () => {
    const first = await register("First Client")
    const browser = new Jar()
    const upstreamBrowser = new Jar()
    const { location } = await fullFlow(first, browser, upstreamBrowser)
    expect(location.searchParams.get("code")).not.toBeNull()

    const again = await mcpRequest(first, CLIENT_REDIRECT, "mcp-state-2")
    const skipped = await get(again.url, browser)
    expect(skipped.status).toBe(302)
    const upstreamAuthorize = new URL(skipped.headers.get("location")!)
    expect(`${upstreamAuthorize.origin}${upstreamAuthorize.pathname}`).toBe(`${upstream.as.issuer}/authorize`)
    expect(upstreamAuthorize.searchParams.get("client_id")).toBe("keyway-proxy")
    const callback = await signInUpstream(upstreamAuthorize.href, upstreamBrowser)
    const final = await get(callback.href, browser)
    const secondLocation = new URL(final.headers.get("location")!)
    expect(secondLocation.searchParams.get("state")).toBe("mcp-state-2")
    expect((await redeem(first, secondLocation.searchParams.get("code")!, again.verifier)).status).toBe(200)

    // The attacker's case: a freshly registered client, same browser (which has the upstream's consent cookie too).
    const second = await register("Second Client", OTHER_REDIRECT)
    const other = await mcpRequest(second, OTHER_REDIRECT)
    const page = await get(other.url, browser)
    expect(page.status).toBe(200)
    expect(page.headers.get("location")).toBeNull()
    expect(await page.text()).toContain("<span data-client-name>Second Client</span>")

    // Another browser is asked again even for the first client.
    const elsewhere = await get((await mcpRequest(first)).url, new Jar())
    expect(elsewhere.status).toBe(200)
  })

  it("asks again when the remembered browser consent no longer matches the user's consent", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const upstreamBrowser = new Jar()
    await fullFlow(clientId, browser, upstreamBrowser)
    expect(await proxy.as.revokeConsent(UPSTREAM_SUBJECT, clientId)).toBe(1)
    const again = await mcpRequest(clientId)
    const skipped = await get(again.url, browser)
    expect(skipped.status).toBe(302)
    const callback = await signInUpstream(skipped.headers.get("location")!, upstreamBrowser)
    const back = await get(callback.href, browser)
    expect(back.status).toBe(302)
    expect(back.headers.get("location")).toBe(again.url)
    const page = await get(again.url, browser)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain("data-client-name")
  })

  it("refuses a consent POST without the CSRF token, and sends nothing upstream", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    await get(request.url, browser)
    for (const values of [
      { request: request.query, decision: "approve" },
      { request: request.query, decision: "approve", csrf_token: "forged" },
    ]) {
      const response = await postForm(`${proxy.as.issuer}/authorize/consent`, browser, values)
      expect(response.status).toBe(403)
      expect(response.headers.get("location")).toBeNull()
      expect(await response.text()).toContain('data-error="csrf"')
    }
    // A page of another origin cannot post it either, even with the right token.
    const page = await get(request.url, browser)
    const crossSite = await fetch(`${proxy.as.issuer}/authorize/consent`, {
      method: "POST",
      redirect: "manual",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        cookie: browser.header(),
        origin: "https://attacker.example",
      },
      body: formBody({ csrf_token: csrfOf(await page.text()), request: request.query, decision: "approve" }),
    })
    expect(crossSite.status).toBe(403)
    expect(upstream.seen.filter((p) => p === "/authorize")).toEqual([])
  })

  it("a callback with a forged, missing or replayed state gets a clear error page and no redirect", async () => {
    await expectErrorPage(
      await get(`${proxy.as.issuer}/upstream/callback?code=abc&state=forged`, new Jar()),
      "the sign-in response does not belong to a sign-in started in this browser (unknown or mismatched state); start again from your application",
    )
    await expectErrorPage(
      await get(`${proxy.as.issuer}/upstream/callback?code=abc`, new Jar()),
      "the sign-in response has no state; start again from your application",
    )
    // The right state in another browser (no pending cookie) is refused too.
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    const page = await get(request.url, browser)
    const approved = await approveAtProxy(browser, request.query, await page.text())
    const callback = await signInUpstream(approved.headers.get("location")!, new Jar())
    await expectErrorPage(
      await get(callback.href, new Jar()),
      "the sign-in response does not belong to a sign-in started in this browser (unknown or mismatched state); start again from your application",
    )
    // Replaying the same response with the same cookies: the first is accepted, the second refused.
    const cookies = browser.header()
    const once = await fetch(callback.href, { redirect: "manual", headers: { cookie: cookies } })
    expect(once.status).toBe(302)
    await expectErrorPage(
      await fetch(callback.href, { redirect: "manual", headers: { cookie: cookies } }),
      "this sign-in response was already used; start again from your application",
    )
  })

  it("an upstream access_denied becomes access_denied at the MCP client, with iss and state", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    const page = await get(request.url, browser)
    const approved = await approveAtProxy(browser, request.query, await page.text())
    const callback = await signInUpstream(approved.headers.get("location")!, new Jar(), "deny")
    expect(callback.searchParams.get("error")).toBe("access_denied")
    const final = await get(callback.href, browser)
    expect(final.status).toBe(302)
    const location = new URL(final.headers.get("location")!)
    expect(`${location.origin}${location.pathname}`).toBe(CLIENT_REDIRECT)
    expect(Object.fromEntries(location.searchParams)).toEqual({
      error: "access_denied",
      error_description: "the upstream authorization server answered access_denied",
      state: "mcp-state-1",
      iss: proxy.as.issuer,
    })
  })

  it("a response whose iss is not the upstream's is refused without redeeming the code (RFC 9207)", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    const page = await get(request.url, browser)
    const approved = await approveAtProxy(browser, request.query, await page.text())
    const state = new URL(approved.headers.get("location")!).searchParams.get("state")!
    const forged = new URL(`${proxy.as.issuer}/upstream/callback`)
    forged.searchParams.set("code", "stolen")
    forged.searchParams.set("state", state)
    forged.searchParams.set("iss", "https://evil.example")
    const tokenCalls = upstream.seen.filter((p) => p === "/token").length
    const final = await get(forged.href, browser)
    expect(final.status).toBe(302)
    const location = new URL(final.headers.get("location")!)
    expect(location.searchParams.get("error")).toBe("server_error")
    expect(location.searchParams.get("error_description")).toBe(
      "the sign-in response did not come from the configured upstream (iss mismatch, RFC 9207)",
    )
    expect(upstream.seen.filter((p) => p === "/token").length).toBe(tokenCalls)
  })

  it("a response that repeats a parameter is refused without redeeming a code (RFC 6749 §3.1)", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    const page = await get(request.url, browser)
    const approved = await approveAtProxy(browser, request.query, await page.text())
    const state = new URL(approved.headers.get("location")!).searchParams.get("state")!
    const repeated = new URL(`${proxy.as.issuer}/upstream/callback`)
    repeated.searchParams.set("state", state)
    repeated.searchParams.set("iss", upstream.as.issuer)
    repeated.searchParams.append("code", "first")
    repeated.searchParams.append("code", "second")
    const tokenCalls = upstream.seen.filter((p) => p === "/token").length
    const final = await get(repeated.href, browser)
    expect(final.status).toBe(302)
    const location = new URL(final.headers.get("location")!)
    expect(location.searchParams.get("error")).toBe("server_error")
    expect(location.searchParams.get("error_description")).toBe(
      `the upstream sign-in response cannot be used: the authorization response at ${proxy.as.issuer}/upstream/callback carries code 2 times; a parameter may appear only once (RFC 6749 §3.1)`,
    )
    expect(upstream.seen.filter((p) => p === "/token").length).toBe(tokenCalls)
    // A repeated state cannot name one sign-in.
    await expectErrorPage(
      await get(`${proxy.as.issuer}/upstream/callback?code=abc&state=${state}&state=${state}`, browser),
      "the sign-in response has no state; start again from your application",
    )
  })

  it("Deny at the proxy sends access_denied with iss and state to the client, and nothing upstream", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    const page = await get(request.url, browser)
    const denied = await approveAtProxy(browser, request.query, await page.text(), "deny")
    expect(denied.status).toBe(303)
    const location = new URL(denied.headers.get("location")!)
    expect(`${location.origin}${location.pathname}`).toBe(CLIENT_REDIRECT)
    expect(Object.fromEntries(location.searchParams)).toEqual({
      error: "access_denied",
      error_description: "the user denied the request",
      state: "mcp-state-1",
      iss: proxy.as.issuer,
    })
    expect(upstream.seen.filter((p) => p === "/authorize")).toEqual([])
    expect(browser.names().some((n) => n.startsWith("keyway_upstream_"))).toBe(false)
  })

  it("reports the consent with the user who signed in upstream, the codes, a denial and a forged sign-in", async () => {
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const upstreamBrowser = new Jar()
    await fullFlow(clientId, browser, upstreamBrowser)
    // Approved before in this browser: straight upstream, and the code says the consent was remembered.
    const again = await get((await mcpRequest(clientId)).url, browser)
    const callback = await signInUpstream(again.headers.get("location")!, upstreamBrowser)
    expect((await get(callback.href, browser)).status).toBe(302)
    // Denied at the proxy: nobody signed in yet, so no user is named.
    const denying = new Jar()
    const request = await mcpRequest(clientId)
    await approveAtProxy(denying, request.query, await (await get(request.url, denying)).text(), "deny")
    // A sign-in response that did not come from the upstream: the refusal the MCP client gets.
    const forging = new Jar()
    const forged = await mcpRequest(clientId)
    const approved = await approveAtProxy(forging, forged.query, await (await get(forged.url, forging)).text())
    const callbackUrl = new URL(`${proxy.as.issuer}/upstream/callback`)
    callbackUrl.searchParams.set("code", "stolen")
    callbackUrl.searchParams.set("state", new URL(approved.headers.get("location")!).searchParams.get("state")!)
    callbackUrl.searchParams.set("iss", "https://evil.example")
    expect((await get(callbackUrl.href, forging)).status).toBe(302)

    const asked = { client_id: clientId, resource: MCP, scope: "tools:read" }
    expect(proxyEvents.filter((e) => e.event !== "client_registered")).toEqual([
      { event: "consent_given", subject: UPSTREAM_SUBJECT, ...asked },
      { event: "code_issued", subject: UPSTREAM_SUBJECT, ...asked, consent: "given" },
      { event: "code_issued", subject: UPSTREAM_SUBJECT, ...asked, consent: "remembered" },
      { event: "consent_denied", ...asked },
      {
        event: "authorization_rejected",
        error: "server_error",
        description: "the sign-in response did not come from the configured upstream (iss mismatch, RFC 9207)",
        client_id: clientId,
        redirect_uri: CLIENT_REDIRECT,
        answered: "redirect",
      },
    ])
  })

  it("validates the MCP client's request as without a proxy (no consent page for a bad redirect_uri)", async () => {
    const clientId = await register("Cool MCP Client")
    const request = await mcpRequest(clientId, "https://attacker.example/cb")
    const response = await get(request.url, new Jar())
    await expectErrorPage(response, "redirect_uri does not match any URI registered for this client")
  })
})

describe("proxy mode: identity function and unreachable upstream", () => {
  it("takes the subject from the configured function, which sees the upstream token response", async () => {
    const seen: Array<string> = []
    await startPair("127.0.0.1", {
      subjectFrom: async (tokens) => {
        seen.push(tokens.token_type)
        const { payload } = await jwtVerify(tokens.access_token, await jwksOf(upstream.as.issuer), {
          audience: UPSTREAM_API,
        })
        return { subject: `idp|${payload.sub}` }
      },
    })
    const clientId = await register("Cool MCP Client")
    const { location, verifier } = await fullFlow(clientId, new Jar(), new Jar())
    const response = await redeem(clientId, location.searchParams.get("code")!, verifier)
    const { access_token } = (await response.json()) as { access_token: string }
    const { payload } = await jwtVerify(access_token, await jwksOf(proxy.as.issuer), { audience: MCP })
    expect(payload.sub).toBe(`idp|${UPSTREAM_SUBJECT}`)
    expect(seen).toEqual(["Bearer"])
  })

  it("an identity function that refuses: server_error at the MCP client", async () => {
    await startPair("127.0.0.1", { subjectFrom: async () => undefined })
    const clientId = await register("Cool MCP Client")
    const { location } = await fullFlow(clientId, new Jar(), new Jar())
    expect(Object.fromEntries(location.searchParams)).toEqual({
      error: "server_error",
      error_description: "the identity function refused the upstream sign-in",
      state: "mcp-state-1",
      iss: proxy.as.issuer,
    })
  })

  it("an unreachable upstream: temporarily_unavailable at the MCP client after Approve", async () => {
    await startPair()
    await upstream.server.close()
    const clientId = await register("Cool MCP Client")
    const browser = new Jar()
    const request = await mcpRequest(clientId)
    const page = await get(request.url, browser)
    const approved = await approveAtProxy(browser, request.query, await page.text())
    expect(approved.status).toBe(303)
    const location = new URL(approved.headers.get("location")!)
    expect(`${location.origin}${location.pathname}`).toBe(CLIENT_REDIRECT)
    expect(Object.fromEntries(location.searchParams)).toEqual({
      error: "temporarily_unavailable",
      error_description: "the upstream authorization server cannot be reached",
      state: "mcp-state-1",
      iss: proxy.as.issuer,
    })
  })
})

describe("proxy mode configuration", () => {
  const base = {
    issuer: "https://as.example.com",
    resources: [{ uri: MCP, scopes: { "tools:read": "List the tools" } }],
    warn: () => undefined,
  }
  it("refuses an http upstream without the development option, and an unverifiable subject source", () => {
    expect(() =>
      resolve({ ...base, upstream: { issuer: "http://127.0.0.1:9", clientId: "p", resource: MCP } }),
    ).toThrow(
      new ConfigError({
        message:
          "upstream.issuer must use https (http only on a loopback host with development.allowHttpLoopbackUpstream)",
      }),
    )
    expect(() => resolve({ ...base, upstream: { issuer: "https://idp.example", clientId: "p" } })).toThrow(
      new ConfigError({
        message:
          'upstream.subjectFrom "access_token" needs upstream.resource (the audience of the upstream access token); or set "openid" in upstream.scope, or give a function',
      }),
    )
    const resolved = resolve({
      ...base,
      upstream: { issuer: "https://idp.example", clientId: "p", scope: "openid email" },
    })
    expect(resolved.upstream?.subjectFrom).toBe("id_token")
    expect(resolved.endpoints.upstreamCallback).toBe("https://as.example.com/upstream/callback")
  })
})

describe("proxy mode in Chromium", () => {
  it("clicks through Keyway's consent, the upstream login and consent, and lands at the client with a code", async () => {
    // The upstream as localhost, the proxy as 127.0.0.1: cookies are per host, not per port, so they stay apart.
    await startPair("localhost")
    const landing = await listen(
      async () =>
        new Response("<!doctype html><title>Done</title><p>Done.</p>", {
          headers: { "content-type": "text/html" },
        }),
    )
    const { browser, close } = await launchChromium()
    try {
      const redirect = `${landing.url}/callback`
      const clientId = await register("Browser Client", redirect)
      const context = await browser.newContext()
      const page = await context.newPage()
      const first = await mcpRequest(clientId, redirect, "browser-state-1")
      await page.goto(first.url)
      expect(await page.locator("h1").textContent()).toBe("Authorize Browser Client?")
      expect(await page.locator("[data-upstream]").isVisible()).toBe(true)
      expect(upstream.seen.filter((p) => p === "/authorize")).toEqual([])
      await page.getByRole("button", { name: "Approve" }).click()
      await page.getByRole("heading", { name: "Sign in" }).waitFor()
      expect(new URL(page.url()).origin).toBe(upstream.as.issuer)
      await page.getByLabel("Username").fill("alice")
      await page.getByLabel("Password").fill(PASSWORD)
      await page.getByRole("button", { name: "Sign in" }).click()
      await page.getByRole("heading", { name: "Authorize Keyway Proxy?" }).waitFor()
      await Promise.all([page.waitForURL(`${redirect}?**`), page.getByRole("button", { name: "Approve" }).click()])
      const landed = new URL(page.url())
      expect(landed.searchParams.get("state")).toBe("browser-state-1")
      expect(landed.searchParams.get("iss")).toBe(proxy.as.issuer)
      const token = await fetch(`${proxy.as.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: formBody({
          grant_type: "authorization_code",
          code: landed.searchParams.get("code")!,
          code_verifier: first.verifier,
          redirect_uri: redirect,
          client_id: clientId,
          resource: MCP,
        }),
      })
      expect(token.status).toBe(200)

      // Same browser, same client: no page at all this time (both consents remembered, upstream session live).
      const second = await mcpRequest(clientId, redirect, "browser-state-2")
      await Promise.all([page.waitForURL(`${redirect}?**`), page.goto(second.url)])
      expect(new URL(page.url()).searchParams.get("state")).toBe("browser-state-2")
      await context.close()
    } finally {
      await close()
      await landing.close()
    }
  })
})
