import { postForm } from "@keyway/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { AuthorizationServerExtension } from "../src/Extension.js"
import type { SecurityEvent } from "../src/Operations.js"
import {
  authorizeUrl,
  basic,
  cookieOf,
  csrfOf,
  MCP,
  obtainCode,
  PASSWORD,
  SECRET,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

/** A grant of an extension that needs no client (as workload identity federation), issuing through `issue`. */
const testGrant: AuthorizationServerExtension = {
  id: "example.com/test-grant",
  grants: [
    {
      grantType: "urn:example:grant",
      clientAuthentication: "optional",
      handle: (context) =>
        context.issue({ subject: "workload-7", clientId: "workload-7", resource: MCP, scope: "tools:read" }),
    },
  ],
}

let server: TestServer
let events: Array<SecurityEvent> = []
beforeAll(async () => {
  server = await startServer({
    onSecurityEvent: (event) => events.push(event),
    registration: true,
    extensions: [testGrant],
    lifetimes: { accessToken: 600 },
  })
})
afterAll(() => server?.close())
beforeEach(() => {
  events = []
})

const asked = { client_id: "public-app", resource: MCP, scope: "tools:read tools:call" }

describe("sign-in and consent", () => {
  it("report the username and request the endpoint parsed, from chunked and Content-Length bodies alike", async () => {
    const request = await authorizeUrl(server)
    const query = new URL(request.url).search.slice(1)
    const page = await fetch(request.url, { redirect: "manual" })
    const cookie = cookieOf(page) ?? ""
    const csrf = csrfOf(await page.text())
    const login = (framing: "chunked" | "length", values: Record<string, string>) =>
      postForm(`${server.issuer}/authorize/login`, framing, { request: query, ...values }, { cookie })

    expect((await login("chunked", { csrf_token: csrf, username: "alice", password: "wrong" })).status).toBe(401)
    expect((await login("length", { csrf_token: csrf, username: "-alice", password: "wrong" })).status).toBe(401)
    expect((await login("chunked", { username: "alice", password: PASSWORD })).status).toBe(403)
    const signedIn = await login("chunked", { csrf_token: csrf, username: "alice", password: PASSWORD })
    expect(signedIn.status).toBe(303)
    const session = signedIn.cookie ?? ""
    const consent = (framing: "chunked" | "length", values: Record<string, string>) =>
      postForm(`${server.issuer}/authorize/consent`, framing, { request: query, ...values }, { cookie: session })
    const consentCsrf = csrfOf(await (await fetch(request.url, { headers: { cookie: session } })).text())

    expect((await consent("chunked", { decision: "approve" })).status).toBe(403)
    expect((await consent("chunked", { csrf_token: consentCsrf, decision: "deny" })).status).toBe(303)
    const approved = await consent("length", { csrf_token: consentCsrf, decision: "approve" })
    expect(new URL(approved.location ?? "").searchParams.has("code")).toBe(true)
    // Asked again: the consent is remembered.
    const again = await fetch(request.url, { redirect: "manual", headers: { cookie: session } })
    expect(new URL(again.headers.get("location") ?? "").searchParams.has("code")).toBe(true)

    expect(JSON.stringify(events)).not.toContain(PASSWORD)
    expect(events).toEqual([
      { event: "login_failed", reason: "wrong_credentials", username: "alice", client_id: "public-app" },
      { event: "login_failed", reason: "wrong_credentials", username: "-alice", client_id: "public-app" },
      { event: "login_failed", reason: "csrf" },
      { event: "login_succeeded", username: "alice", subject: "alice", ...asked },
      { event: "consent_refused", reason: "csrf" },
      { event: "consent_denied", subject: "alice", ...asked },
      { event: "consent_given", subject: "alice", ...asked },
      { event: "code_issued", subject: "alice", ...asked, consent: "given" },
      { event: "code_issued", subject: "alice", ...asked, consent: "remembered" },
    ])
  })

  it("report a locked sign-in with when to retry", async () => {
    const locking = await startServer({
      onSecurityEvent: (event) => events.push(event),
      rateLimits: { login: { account: { freeAttempts: 1, delay: 60 }, address: false } },
    })
    try {
      const request = await authorizeUrl(locking, { client_id: "web-app", redirect_uri: "https://web.example.com/cb" })
      const page = await fetch(request.url, { redirect: "manual" })
      const locked = await postForm(
        `${locking.issuer}/authorize/login`,
        "chunked",
        {
          csrf_token: csrfOf(await page.text()),
          request: new URL(request.url).search.slice(1),
          username: "alice",
          password: "wrong",
        },
        { cookie: cookieOf(page) ?? "" },
      )
      expect([locked.status, locked.location]).toEqual([429, undefined])
      expect(events).toEqual([
        { event: "login_failed", reason: "rate_limited", username: "alice", client_id: "web-app", retry_after: 60 },
      ])
    } finally {
      await locking.close()
    }
  })
})

describe("a rejected authorization request", () => {
  const APP = "https://app.example.com/callback"
  it.each([
    [
      "an unknown client",
      { client_id: "nobody" },
      400,
      { error: "invalid_client", description: "the client_id is not known to this server", client_id: "nobody" },
      "page",
    ],
    [
      "a client ID beginning with -",
      { client_id: "-public-app" },
      400,
      { error: "invalid_client", description: "the client_id is not known to this server", client_id: "-public-app" },
      "page",
    ],
    [
      "no client ID",
      { client_id: undefined },
      400,
      { error: "invalid_request", description: "client_id is missing" },
      "page",
    ],
    [
      "a redirect URI not registered",
      { redirect_uri: "https://evil.example/cb" },
      400,
      {
        error: "invalid_request",
        description: "redirect_uri does not match any URI registered for this client",
        client_id: "public-app",
        redirect_uri: "https://evil.example/cb",
      },
      "page",
    ],
    [
      "no PKCE challenge",
      { code_challenge: undefined },
      302,
      { error: "invalid_request", description: "code_challenge is required (PKCE)", client_id: "public-app" },
      "redirect",
    ],
    [
      "the plain PKCE method",
      { code_challenge_method: "plain" },
      302,
      {
        error: "invalid_request",
        description: "code_challenge_method plain is not supported; use S256",
        client_id: "public-app",
      },
      "redirect",
    ],
    [
      "a resource this server does not serve",
      { resource: "https://unknown.example/mcp" },
      302,
      {
        error: "invalid_target",
        description: "this server does not issue tokens for that resource",
        client_id: "public-app",
      },
      "redirect",
    ],
    [
      "a scope the resource does not define",
      { scope: "admin" },
      302,
      { error: "invalid_scope", description: "scope admin is not defined for this resource", client_id: "public-app" },
      "redirect",
    ],
  ] as const)("reports %s with the client ID and redirect URI sent", async (_, params, status, expected, answered) => {
    const request = await authorizeUrl(server, params)
    const response = await fetch(request.url, { redirect: "manual" })
    expect(response.status).toBe(status)
    const sent = new URL(request.url).searchParams.get("redirect_uri") ?? APP
    expect(events).toEqual([
      {
        event: "authorization_rejected",
        redirect_uri: sent,
        ...expected,
        answered,
      },
    ])
  })

  it("reports the redirect URI as absent when the request carried none, and a repeated client ID as absent", async () => {
    const none = await fetch((await authorizeUrl(server, { redirect_uri: undefined })).url, { redirect: "manual" })
    expect(none.status).toBe(400)
    const repeated = new URL((await authorizeUrl(server)).url)
    repeated.searchParams.append("client_id", "web-app")
    expect((await fetch(repeated, { redirect: "manual" })).status).toBe(400)
    expect(events).toEqual([
      {
        event: "authorization_rejected",
        error: "invalid_request",
        description: "redirect_uri is missing and the client has several registered",
        client_id: "public-app",
        answered: "page",
      },
      {
        event: "authorization_rejected",
        error: "invalid_request",
        description: "client_id is repeated",
        redirect_uri: "https://app.example.com/callback",
        answered: "page",
      },
    ])
  })
})

describe("the token endpoint", () => {
  const issued = {
    client_id: "public-app",
    subject: "alice",
    resource: MCP,
    scope: "tools:read tools:call",
    expires_in: 600,
    refresh_token_issued: true,
  }

  it("reports every token it issues with its grant and user, from chunked and Content-Length bodies alike", async () => {
    const { code, verifier } = await obtainCode(server)
    events = []
    const redeemed = await postForm(`${server.issuer}/token`, "chunked", {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: "https://app.example.com/callback",
      client_id: "public-app",
      resource: MCP,
    })
    expect(redeemed.status).toBe(200)
    const first = JSON.parse(redeemed.body) as { refresh_token: string }
    const byLength = await postForm(`${server.issuer}/token`, "length", {
      grant_type: "refresh_token",
      refresh_token: first.refresh_token,
      client_id: "public-app",
    })
    const second = JSON.parse(byLength.body) as { refresh_token: string }
    const chunked = await postForm(`${server.issuer}/token`, "chunked", {
      grant_type: "refresh_token",
      refresh_token: second.refresh_token,
      client_id: "public-app",
      scope: "tools:read",
    })
    expect([byLength.status, chunked.status]).toEqual([200, 200])
    const extension = await postForm(`${server.issuer}/token`, "chunked", { grant_type: "urn:example:grant" })
    expect(extension.status).toBe(200)
    for (const secret of [code, verifier, first.refresh_token, second.refresh_token, redeemed.body, chunked.body]) {
      expect(JSON.stringify(events)).not.toContain(secret)
    }
    expect(events).toEqual([
      { event: "token_issued", grant_type: "authorization_code", ...issued },
      { event: "token_issued", grant_type: "refresh_token", ...issued },
      { event: "token_issued", grant_type: "refresh_token", ...issued, scope: "tools:read" },
      {
        event: "token_issued",
        grant_type: "urn:example:grant",
        client_id: "workload-7",
        subject: "workload-7",
        resource: MCP,
        scope: "tools:read",
        expires_in: 600,
        refresh_token_issued: false,
      },
    ])
  })

  it("reports refusals with the grant type and client the request named, and refresh-token reuse", async () => {
    const { code, verifier } = await obtainCode(server)
    const tokens = (await (
      await tokenRequest(server, {
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: "https://app.example.com/callback",
        client_id: "public-app",
      })
    ).json()) as { refresh_token: string }
    const refresh = (token: string) =>
      postForm(`${server.issuer}/token`, "chunked", {
        grant_type: "refresh_token",
        refresh_token: token,
        client_id: "public-app",
      })
    const second = JSON.parse((await refresh(tokens.refresh_token)).body) as { refresh_token: string }
    expect((await refresh(second.refresh_token)).status).toBe(200)
    events = []
    // Two rotations back: reuse.
    expect((await refresh(tokens.refresh_token)).status).toBe(400)
    const wrongSecret = await postForm(
      `${server.issuer}/token`,
      "chunked",
      { grant_type: "authorization_code", code: "x", code_verifier: verifier },
      { authorization: basic("-web-app", "not-the-secret") },
    )
    expect(wrongSecret.status).toBe(401)
    const unknownGrant = await postForm(`${server.issuer}/token`, "length", {
      grant_type: "urn:example:unknown",
      client_id: "public-app",
    })
    expect(unknownGrant.status).toBe(400)
    const notAForm = await fetch(`${server.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ grant_type: "authorization_code", client_id: "public-app" }),
    })
    expect(notAForm.status).toBe(400)
    expect(events).toEqual([
      { event: "refresh_token_reuse_detected", client_id: "public-app", subject: "alice" },
      {
        event: "token_refused",
        error: "invalid_grant",
        description: "the refresh token was already used; its whole family is now revoked",
        grant_type: "refresh_token",
        client_id: "public-app",
      },
      {
        event: "token_refused",
        error: "invalid_client",
        description: "client authentication failed",
        grant_type: "authorization_code",
        client_id: "-web-app",
      },
      {
        event: "token_refused",
        error: "unsupported_grant_type",
        description: "grant_type urn:example:unknown is not supported",
        grant_type: "urn:example:unknown",
        client_id: "public-app",
      },
      {
        event: "token_refused",
        error: "invalid_request",
        description: "the body must be application/x-www-form-urlencoded",
      },
    ])
  })
})

describe("registration and revocation", () => {
  it("report the client registered or the refusal, and the client that asked for a revocation", async () => {
    const register = (body: object) =>
      fetch(`${server.issuer}/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      })
    const registered = await register({
      client_name: "Notes CLI",
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
    })
    expect(registered.status).toBe(201)
    const { client_id } = (await registered.json()) as { client_id: string }
    const refused = await register({
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "magic",
    })
    expect(refused.status).toBe(400)
    const revoked = await postForm(
      `${server.issuer}/revoke`,
      "chunked",
      { token: "not-a-token", token_type_hint: "access_token" },
      { authorization: basic("web-app", SECRET) },
    )
    expect(revoked.status).toBe(200)
    expect(events).toEqual([
      {
        event: "client_registered",
        client_id,
        client_name: "Notes CLI",
        token_endpoint_auth_method: "none",
        redirect_uris: ["http://127.0.0.1/callback"],
      },
      {
        event: "registration_refused",
        error: "invalid_client_metadata",
        description: "token_endpoint_auth_method magic is not supported",
      },
      { event: "token_revoked", client_id: "web-app", token_type_hint: "access_token" },
    ])
  })
})

describe("a receiver that throws", () => {
  it("loses its event and changes no answer: the code flow, a refresh and a registration succeed", async () => {
    let calls = 0
    const throwing = await startServer({
      onSecurityEvent: () => {
        calls += 1
        throw new Error("the log pipeline is down")
      },
      registration: true,
    })
    try {
      const { code, verifier } = await obtainCode(throwing)
      const redeemed = await tokenRequest(throwing, {
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: "https://app.example.com/callback",
        client_id: "public-app",
        resource: MCP,
      })
      expect(redeemed.status).toBe(200)
      const { refresh_token } = (await redeemed.json()) as { refresh_token: string }
      const refreshed = await tokenRequest(throwing, {
        grant_type: "refresh_token",
        refresh_token,
        client_id: "public-app",
      })
      expect(refreshed.status).toBe(200)
      const registered = await fetch(`${throwing.issuer}/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ redirect_uris: ["http://127.0.0.1/callback"], token_endpoint_auth_method: "none" }),
      })
      expect(registered.status).toBe(201)
      // The code issued, a token issued twice, the client registered, ...: every event reached the receiver (and threw).
      expect(calls).toBe(6)
    } finally {
      await throwing.close()
    }
  })
})
