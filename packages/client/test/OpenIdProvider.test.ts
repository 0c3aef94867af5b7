/**
 * Against panva's oidc-provider, a certified OpenID provider, run in-process with its defaults: it follows OpenID
 * Connect Core §11 and drops `offline_access` (so issues no refresh token) unless `prompt` contains `consent`.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { json, listen } from "@keyway/testing/peers"
import Provider from "oidc-provider"
import { describe, expect, it } from "vitest"
import { createAuthClient } from "../src/AuthClient.js"
import { testUser } from "../src/UserAgent.js"
import { track } from "./support/world.js"

const CLIENT_ID = "keyway-test"
const REDIRECT = "http://127.0.0.1/callback"

/** oidc-provider on a loopback port with one public native client; access tokens live 30 s. */
const startProvider = async () => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        application_type: "native",
        token_endpoint_auth_method: "none",
        redirect_uris: [REDIRECT],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      },
    ],
    cookies: { keys: ["a test key that is long enough to sign the cookies"] },
    // RFC 8707 is on by default; the provider must be told about the MCP server the client names in `resource`.
    features: {
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx, resource) => ({ scope: "", audience: resource, accessTokenFormat: "opaque" }),
      },
    },
    ttl: { AccessToken: 30 },
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  })
  server.on("request", provider.callback())
  track(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return issuer
}

/** A protected resource that only publishes its metadata, naming the provider. */
const startResource = async (issuer: string) => {
  const server = await listen((_request, url) =>
    url.pathname === "/.well-known/oauth-protected-resource/mcp"
      ? json(200, { resource: `${server.origin}/mcp`, authorization_servers: [issuer], scopes_supported: ["openid"] })
      : { status: 404 },
  )
  track(server.close)
  return `${server.origin}/mcp`
}

describe("an OpenID provider (oidc-provider) as the authorization server", () => {
  it("asks for offline_access with prompt=consent, gets a refresh token, and refreshes with it", async () => {
    const issuer = await startProvider()
    const serverUrl = await startResource(issuer)
    const authorizations: Array<URL> = []
    const grants: Array<string> = []
    const client = createAuthClient({
      clients: [{ issuer, client_id: CLIENT_ID }],
      userAgent: testUser({
        username: "alice",
        password: "any password: the provider's development pages accept every login",
        fetch: (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input))
          if (url.pathname === "/auth") authorizations.push(url)
          return globalThis.fetch(input, init)
        },
      }),
      fetch: async (input, init) => {
        if (init?.body !== undefined && String(init.body).includes("grant_type=")) {
          grants.push(new URLSearchParams(String(init.body)).get("grant_type") ?? "")
        }
        return globalThis.fetch(input, init)
      },
    })
    track(client.dispose)

    const tokens = await client.authorize(serverUrl)
    expect(authorizations[0]?.searchParams.get("scope")).toBe("openid offline_access")
    expect(authorizations[0]?.searchParams.get("prompt")).toBe("consent")
    expect(tokens.refresh_token).toEqual(expect.any(String))
    expect(tokens.token_endpoint).toBe(`${issuer}/token`)

    // 30 s is inside the 60 s refresh margin: the next use refreshes.
    const refreshed = await client.accessToken(serverUrl)
    expect(refreshed).not.toBe(tokens.access_token)
    expect(grants).toEqual(["authorization_code", "refresh_token"])
  })

  it("revokes the refresh token and the access token at the provider's revocation endpoint (RFC 7009)", async () => {
    const issuer = await startProvider()
    const serverUrl = await startResource(issuer)
    const client = createAuthClient({
      clients: [{ issuer, client_id: CLIENT_ID }],
      userAgent: testUser({ username: "alice", password: "any password" }),
    })
    track(client.dispose)
    const tokens = await client.authorize(serverUrl)
    expect(tokens.refresh_token).toEqual(expect.any(String))
    expect(await client.revoke(serverUrl)).toEqual(["refresh_token", "access_token"])
    // 30 s is inside the 60 s refresh margin: the refresh is refused (invalid_grant), so no token is left to send.
    expect(await client.accessToken(serverUrl)).toBeUndefined()
    expect(await client.tokens(serverUrl)).toBeUndefined()
  })
})
