import { type AuthorizationServerPeer, json, listen, rpc } from "@keyway/testing/peers"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { AuthClient } from "../src/AuthClient.js"
import { ClientConfig } from "../src/ClientConfig.js"
import { DiscoveryCache } from "../src/DiscoveryCache.js"
import { TokenStore } from "../src/TokenStore.js"
import { UserAgent } from "../src/UserAgent.js"
import { rejection, track, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })

interface Revocation {
  readonly params: Record<string, string>
  readonly authorization: string | undefined
}

/**
 * A revocation endpoint (RFC 7009) beside the authorization server peer: it records each request and revokes the
 * peer's access token it names; `reply` answers instead when given.
 */
const revocationEndpoint = async (reply?: () => ReturnType<typeof json>) => {
  const requests: Array<Revocation> = []
  let peer: AuthorizationServerPeer | undefined
  const server = await listen((request, _url, body) => {
    const params = Object.fromEntries(new URLSearchParams(body))
    requests.push({ params, authorization: request.headers.authorization })
    if (reply !== undefined) return reply()
    const issued = peer?.tokens.get(params.token ?? "")
    if (issued !== undefined) issued.revoked = true
    return { status: 200, headers: { "cache-control": "no-store" } }
  })
  track(server.close)
  return {
    url: `${server.origin}/revoke`,
    requests,
    attach: (as: AuthorizationServerPeer) => {
      peer = as
    },
  }
}

describe("revoking the tokens held for a server (RFC 7009)", () => {
  it("revokes the refresh token, then the access token, as the registered client, and keeps them held", async () => {
    const endpoint = await revocationEndpoint()
    const { as, rs, client } = await world({
      as: { metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }) },
    })
    endpoint.attach(as)
    await client.fetch(rs.url, post(rpc("initialize")))
    const tokens = await client.tokens(rs.url)
    const clientId = tokens?.client_id
    expect(clientId).toMatch(/^dcr-/u)

    expect(await client.revoke(rs.url)).toEqual(["refresh_token", "access_token"])
    expect(endpoint.requests).toEqual([
      {
        params: { token: tokens?.refresh_token, token_type_hint: "refresh_token", client_id: clientId },
        authorization: undefined,
      },
      {
        params: { token: tokens?.access_token, token_type_hint: "access_token", client_id: clientId },
        authorization: undefined,
      },
    ])
    expect(as.tokens.get(tokens?.access_token ?? "")?.revoked).toBe(true)
    // Revoking is not forgetting: logout does that.
    expect(await client.tokens(rs.url)).toEqual(tokens)
    await client.logout(rs.url)
    expect(await client.tokens(rs.url)).toBeUndefined()
  })

  it("authenticates a confidential client as at the token endpoint (client_secret_basic)", async () => {
    const endpoint = await revocationEndpoint()
    const { rs, client } = await world({
      as: {
        metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }),
        clients: [
          {
            client_id: "-confidential",
            client_secret: "s3cret:with/odd+chars",
            token_endpoint_auth_method: "client_secret_basic",
            redirect_uris: ["http://127.0.0.1/callback"],
          },
        ],
      },
      client: (as) => ({
        clients: [
          {
            issuer: as.issuer,
            client_id: "-confidential",
            client_secret: "s3cret:with/odd+chars",
            token_endpoint_auth_method: "client_secret_basic",
          },
        ],
      }),
    })
    await client.fetch(rs.url, post(rpc("initialize")))
    await client.revoke(rs.url)
    expect(endpoint.requests.map((request) => request.authorization)).toEqual([
      `Basic ${btoa("-confidential:s3cret%3Awith%2Fodd%2Bchars")}`,
      `Basic ${btoa("-confidential:s3cret%3Awith%2Fodd%2Bchars")}`,
    ])
    expect(endpoint.requests.map((request) => request.params.client_id)).toEqual([undefined, undefined])
  })

  it("revokes the access token alone when no refresh token is held", async () => {
    const endpoint = await revocationEndpoint()
    const { rs, client } = await world({
      as: { refreshTokens: false, metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }) },
    })
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(await client.revoke(rs.url)).toEqual(["access_token"])
    expect(endpoint.requests.map((request) => request.params.token_type_hint)).toEqual(["access_token"])
  })

  it("revokes nothing, and asks nothing, when no tokens are held", async () => {
    const { as, rs, client } = await world()
    expect(await client.revoke(rs.url)).toEqual([])
    expect(as.paths).toEqual([])
  })

  it("fails with missing-endpoint when the authorization server publishes no revocation endpoint", async () => {
    const { as, rs, client } = await world()
    await client.fetch(rs.url, post(rpc("initialize")))
    const error = await rejection(client.revoke(rs.url))
    expect(error).toMatchObject({
      _tag: "AuthError",
      step: "revocation",
      reason: "missing-endpoint",
      url: `${as.issuer}/.well-known/oauth-authorization-server`,
      message: `the authorization server ${as.issuer} publishes no revocation_endpoint in its metadata, so its tokens cannot be revoked there (RFC 7009); they stay valid until they expire`,
    })
    expect(await client.tokens(rs.url)).toBeDefined()
  })

  it("fails with the OAuth error when the server refuses, stops at the refresh token, and forgets a refused registration", async () => {
    const endpoint = await revocationEndpoint(() =>
      json(401, { error: "invalid_client", error_description: "client authentication failed" }),
    )
    const { as, rs, client } = await world({
      as: { metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }) },
    })
    await client.fetch(rs.url, post(rpc("initialize")))
    const error = await rejection(client.revoke(rs.url))
    expect(error).toMatchObject({
      step: "revocation",
      reason: "oauth-error",
      url: endpoint.url,
      status: 401,
      error: "invalid_client",
      message: `the revocation endpoint ${endpoint.url} answered HTTP 401 invalid_client: client authentication failed when revoking the refresh token`,
    })
    expect(endpoint.requests).toHaveLength(1)
    // invalid_client: the server no longer knows the registration, so the next authorization registers anew.
    await client.logout(rs.url)
    await client.authorize(rs.url)
    expect(as.registrations).toHaveLength(2)
  })

  it("reports a refusal whose body is not JSON by its status", async () => {
    const endpoint = await revocationEndpoint(() => ({
      status: 503,
      headers: { "content-type": "text/plain" },
      body: "busy",
    }))
    const { rs, client } = await world({ as: { metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }) } })
    await client.fetch(rs.url, post(rpc("initialize")))
    const error = await rejection(client.revoke(rs.url))
    expect(error).toMatchObject({
      step: "revocation",
      reason: "oauth-error",
      status: 503,
      message: `the revocation endpoint ${endpoint.url} answered HTTP 503 without an OAuth error code when revoking the refresh token`,
    })
  })

  it("refuses to send the token to a plain-http revocation endpoint on a public host", async () => {
    const { rs, client } = await world({
      as: { metadata: (m) => ({ ...m, revocation_endpoint: "http://as.example.com/revoke" }) },
    })
    await client.fetch(rs.url, post(rpc("initialize")))
    const error = await rejection(client.revoke(rs.url))
    expect(error).toMatchObject({
      step: "revocation",
      reason: "insecure-endpoint",
      url: "http://as.example.com/revoke",
      message:
        "refusing to send client credentials to the revocation endpoint http://as.example.com/revoke: authorization server endpoints must use https (plain http is only allowed on loopback addresses)",
    })
  })

  it("the Effect face revokes the same way", async () => {
    const endpoint = await revocationEndpoint()
    const { rs } = await world({ as: { metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }) } })
    const revoked = await Effect.runPromise(
      Effect.gen(function* () {
        const auth = yield* AuthClient
        yield* auth.fetch(rs.url, post(rpc("initialize")))
        return yield* auth.revoke(rs.url)
      }).pipe(
        Effect.provide(
          AuthClient.layer.pipe(
            Layer.provide(
              Layer.mergeAll(
                ClientConfig.layer(),
                TokenStore.layerMemory,
                DiscoveryCache.layerMemory,
                UserAgent.layerHeadless(),
              ),
            ),
          ),
        ),
      ),
    )
    expect(revoked).toEqual(["refresh_token", "access_token"])
    expect(endpoint.requests.map((request) => request.params.token_type_hint)).toEqual([
      "refresh_token",
      "access_token",
    ])
  })
})
