/**
 * Token lifecycle as real clients meet it: redirect_uri at the token endpoint (OAuth 2.1 §4.1.3), consent for clients
 * that cannot be verified (RFC 8252 §8.6), and the hygiene of dynamic registrations (RFC 7591 §3.2.1).
 */

import { expectOAuthError } from "@keyway/testing/oauth"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { layerMemory } from "../src/storage/Storage.js"
import { startEffectServer } from "./support/effectServer.js"
import {
  authorizeUrl,
  basic,
  cookieOf,
  csrfOf,
  loginAndConsent,
  MCP,
  obtainCode,
  SECRET,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

describe("redirect_uri at the token endpoint (OAuth 2.1 §4.1.3)", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer({
      clients: [
        {
          clientId: "public-app",
          clientName: "Public App",
          redirectUris: ["https://app.example.com/callback", "http://127.0.0.1/callback"],
        },
        { clientId: "single", clientName: "Single", redirectUris: ["https://single.example.com/cb"] },
      ],
    })
  })
  afterAll(() => server.close())

  const redeem = (code: string, verifier: string, extra: Record<string, string>) =>
    tokenRequest(server, { grant_type: "authorization_code", code, code_verifier: verifier, resource: MCP, ...extra })

  it("is required when the authorization request carried it, and the refused code is spent", async () => {
    const { code, verifier } = await obtainCode(server)
    await expectOAuthError(
      await redeem(code, verifier, { client_id: "public-app" }),
      400,
      "invalid_grant",
      "redirect_uri is required: the authorization request carried one",
    )
    await expectOAuthError(
      await redeem(code, verifier, { client_id: "public-app", redirect_uri: "https://app.example.com/callback" }),
      400,
      "invalid_grant",
      "the authorization code was already used; tokens issued from it are revoked",
    )
  })

  it("must be identical to the one in the authorization request", async () => {
    const { code, verifier } = await obtainCode(server)
    await expectOAuthError(
      await redeem(code, verifier, { client_id: "public-app", redirect_uri: "https://app.example.com/callback/" }),
      400,
      "invalid_grant",
      "redirect_uri does not match the authorization request",
    )
  })

  it("may be left out when the authorization request left it out; when sent, it must be the one used", async () => {
    const omitted = await obtainCode(server, { client_id: "single", redirect_uri: undefined })
    expect(omitted.location.origin + omitted.location.pathname).toBe("https://single.example.com/cb")
    expect((await redeem(omitted.code, omitted.verifier, { client_id: "single" })).status).toBe(200)

    const repeated = await obtainCode(server, { client_id: "single", redirect_uri: undefined })
    expect(
      (
        await redeem(repeated.code, repeated.verifier, {
          client_id: "single",
          redirect_uri: "https://single.example.com/cb",
        })
      ).status,
    ).toBe(200)

    const wrong = await obtainCode(server, { client_id: "single", redirect_uri: undefined })
    await expectOAuthError(
      await redeem(wrong.code, wrong.verifier, {
        client_id: "single",
        redirect_uri: "https://single.example.com/other",
      }),
      400,
      "invalid_grant",
      "redirect_uri does not match the authorization request",
    )
  })
})

describe("consent for clients that cannot be verified (RFC 8252 §8.6)", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer({
      clients: [
        {
          clientId: "public-app",
          clientName: "Public App",
          redirectUris: ["https://app.example.com/callback", "http://127.0.0.1/callback", "http://[::1]/callback"],
        },
        { clientId: "native", clientName: "Native App", redirectUris: ["com.example.native:/cb"] },
        { clientId: "vouched", clientName: "Vouched App", redirectUris: ["http://127.0.0.1/callback"] },
        {
          clientId: "web-app",
          clientName: "Web App",
          redirectUris: ["http://127.0.0.1/cb"],
          clientSecret: SECRET,
          tokenEndpointAuthMethod: "client_secret_basic",
        },
        {
          clientId: "web-two",
          clientName: "Web Two",
          redirectUris: ["http://127.0.0.1/cb"],
          clientSecret: SECRET,
          tokenEndpointAuthMethod: "client_secret_basic",
        },
      ],
      rememberConsentFor: ["vouched"],
    })
  })
  afterAll(() => server.close())

  /** Approves once, then sends a second request with the same login session. */
  const secondVisit = async (params: Record<string, string>) => {
    const { cookie } = await loginAndConsent(server, (await authorizeUrl(server, params)).url)
    return fetch((await authorizeUrl(server, params)).url, { redirect: "manual", headers: { cookie } })
  }

  it.each([
    ["a loopback IPv4 redirect", { client_id: "public-app", redirect_uri: "http://127.0.0.1:53124/callback" }],
    ["a loopback IPv6 redirect", { client_id: "public-app", redirect_uri: "http://[::1]:40001/callback" }],
    ["a private-use scheme", { client_id: "native", redirect_uri: "com.example.native:/cb" }],
  ])(
    "shows a public client with %s the consent page again, saying why, while the login session stays",
    async (_, params) => {
      const again = await secondVisit(params)
      expect(again.status).toBe(200)
      expect(again.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
      const html = await again.text()
      expect(html).toContain("data-unverifiable-client")
      expect(html).toContain("That is why you are asked each time, even if you approved it before.")
      // Signed in still: this is the consent page, not the login page.
      expect(html).not.toContain('name="password"')
      expect(html).toContain('value="approve"')
    },
  )

  it("keeps remembered consent for a public client's https redirect, a confidential client and a vouched client", async () => {
    for (const params of [
      { client_id: "public-app", redirect_uri: "https://app.example.com/callback" },
      { client_id: "web-app", redirect_uri: "http://127.0.0.1/cb" },
      { client_id: "vouched", redirect_uri: "http://127.0.0.1:6000/callback" },
    ]) {
      const again = await secondVisit(params)
      expect(again.status).toBe(302)
      const location = new URL(again.headers.get("location")!)
      expect(location.searchParams.get("code")).not.toBeNull()
      expect(location.searchParams.get("iss")).toBe(server.issuer)
    }
  })

  it("does not mark the first consent page of a verifiable client", async () => {
    const first = await fetch(
      (await authorizeUrl(server, { client_id: "web-two", redirect_uri: "http://127.0.0.1/cb" })).url,
    )
    const cookie = cookieOf(first) ?? ""
    const request = new URL(
      (await authorizeUrl(server, { client_id: "web-two", redirect_uri: "http://127.0.0.1/cb" })).url,
    )
    const login = await fetch(`${server.issuer}/authorize/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: new URLSearchParams({
        csrf_token: csrfOf(await first.text()),
        request: request.search.slice(1),
        username: "alice",
        password: "correct horse battery staple",
      }),
    })
    const page = await fetch(login.headers.get("location")!, {
      redirect: "manual",
      headers: { cookie: cookieOf(login) ?? cookie },
    })
    expect(page.status).toBe(200)
    expect(await page.text()).not.toContain("data-unverifiable-client")
  })
})

describe("dynamic registrations: unused ones expire, secrets honour client_secret_expires_at", () => {
  const registerAt = (server: TestServer, body: Record<string, unknown>) =>
    fetch(`${server.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    })

  it("removes a registration that completed no authorization after lifetimes.unusedRegistration, keeps a used one (TestClock)", async () => {
    const server = await startEffectServer(layerMemory, {
      registration: true,
      lifetimes: { unusedRegistration: 3600 },
      maintenance: { purgeEvery: 60 },
    })
    try {
      const body = { redirect_uris: ["https://app.example.org/cb"], token_endpoint_auth_method: "none" }
      const unused = (await (await registerAt(server, body)).json()) as { client_id: string }
      const used = (await (await registerAt(server, body)).json()) as { client_id: string }
      const { code, verifier } = await obtainCode(server, {
        client_id: used.client_id,
        redirect_uri: "https://app.example.org/cb",
      })
      const redeemed = await tokenRequest(server, {
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        client_id: used.client_id,
        redirect_uri: "https://app.example.org/cb",
      })
      expect(redeemed.status).toBe(200)
      await server.adjust(3600)
      // The unused registration is gone: its client_id is unknown to the authorization endpoint.
      const gone = await fetch(
        (await authorizeUrl(server, { client_id: unused.client_id, redirect_uri: "https://app.example.org/cb" })).url,
        { redirect: "manual" },
      )
      expect(gone.status).toBe(400)
      expect(await gone.text()).toContain("the client_id is not known to this server")
      const kept = await fetch(
        (await authorizeUrl(server, { client_id: used.client_id, redirect_uri: "https://app.example.org/cb" })).url,
        { redirect: "manual" },
      )
      expect(kept.status).toBe(200)
    } finally {
      await server.close()
    }
  })

  it("issues secrets that expire after lifetimes.registeredClientSecret, and refuses them after (TestClock)", async () => {
    const server = await startEffectServer(layerMemory, {
      registration: true,
      lifetimes: { registeredClientSecret: 600 },
    })
    try {
      const issuedAt = server.now()
      const response = await registerAt(server, { redirect_uris: ["https://web.example.org/cb"] })
      expect(response.status).toBe(201)
      const registered = (await response.json()) as {
        client_id: string
        client_secret: string
        client_secret_expires_at: number
      }
      expect(registered.client_secret_expires_at).toBe(issuedAt + 600)
      const introspect = (secret: string) =>
        fetch(`${server.issuer}/introspect`, {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            authorization: basic(registered.client_id, secret),
          },
          body: new URLSearchParams({ token: "not-a-token" }),
        })
      expect((await introspect(registered.client_secret)).status).toBe(200)
      await server.adjust(600)
      const expired = await introspect(registered.client_secret)
      expect(expired.status).toBe(401)
      expect(expired.headers.get("www-authenticate")).toBe('Basic realm="introspection"')
      expect(await expired.json()).toEqual({
        error: "invalid_client",
        error_description: "the client secret has expired (client_secret_expires_at); register again",
      })
      // Without the secret, nothing says it expired.
      const wrong = await introspect(`${registered.client_secret}x`)
      expect(wrong.status).toBe(401)
      expect(await wrong.json()).toEqual({ error: "invalid_client", error_description: "client authentication failed" })
    } finally {
      await server.close()
    }
  })

  it("issues secrets that never expire by default (client_secret_expires_at 0)", async () => {
    const server = await startServer({ registration: true })
    try {
      const registered = (await (
        await registerAt(server, { redirect_uris: ["https://web.example.org/cb"] })
      ).json()) as {
        client_secret_expires_at: number
      }
      expect(registered.client_secret_expires_at).toBe(0)
    } finally {
      await server.close()
    }
  })
})
