import { SecureUrl } from "@keyway/core"
import {
  type AuthorizationServerPeer,
  json,
  listen,
  rpc,
  startAuthorizationServer,
  startResourceServer,
} from "@keyway/testing/peers"
import { exportJWK, generateKeyPair } from "jose"
import { describe, expect, it } from "vitest"
import { createAuthClient } from "../src/AuthClient.js"
import type { AuthError } from "../src/AuthError.js"
import { buildClientMetadataDocument, clientMetadataDocumentHandler } from "../src/Registration.js"
import { memory } from "../src/TokenStore.js"
import { headless } from "../src/UserAgent.js"
import { rejection, track, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })
const initialize = post(rpc("initialize"))
const CALLBACK = "http://127.0.0.1/callback"
const CLIENT_ID_URL = "https://client.example/oauth/client.json"
const noDcr = ({ registration_endpoint: _, ...m }: Record<string, unknown>) => m

describe("registration order", () => {
  it("uses pre-registered client information for that authorization server first", async () => {
    const { as, rs, client } = await world({
      as: {
        clients: [{ client_id: "static", token_endpoint_auth_method: "none", redirect_uris: [CALLBACK] }],
        metadata: (m) => ({ ...m, client_id_metadata_document_supported: true }),
        clientIdDocuments: { [CLIENT_ID_URL]: { redirect_uris: [CALLBACK] } },
      },
      client: (peer) => ({
        clientMetadataUrl: CLIENT_ID_URL,
        clients: [
          { issuer: "https://another-as.example", client_id: "not-this-one" },
          { issuer: peer.issuer, client_id: "static", token_endpoint_auth_method: "none" },
        ],
      }),
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.authorizations[0]?.get("client_id")).toBe("static")
    expect(as.registrations).toHaveLength(0)
  })

  it("uses the client ID metadata document URL when the server supports it", async () => {
    const { as, rs, client } = await world({
      as: {
        metadata: (m) => ({ ...m, client_id_metadata_document_supported: true }),
        clientIdDocuments: { [CLIENT_ID_URL]: { redirect_uris: [CALLBACK] } },
      },
      client: { clientMetadataUrl: CLIENT_ID_URL },
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.authorizations[0]?.get("client_id")).toBe(CLIENT_ID_URL)
    expect(as.tokenRequests[0]?.params.get("client_id")).toBe(CLIENT_ID_URL)
    expect(as.registrations).toHaveLength(0)
  })

  it("authenticates a metadata-document client with private_key_jwt when a key is configured", async () => {
    const { publicKey, privateKey } = await generateKeyPair("ES256")
    const jwk = { ...(await exportJWK(publicKey)), kid: "cimd", alg: "ES256" }
    const { as, rs, client } = await world({
      as: {
        metadata: (m) => ({ ...m, client_id_metadata_document_supported: true }),
        clientIdDocuments: { [CLIENT_ID_URL]: { redirect_uris: [CALLBACK], jwks: { keys: [jwk] } } },
      },
      client: { clientMetadataUrl: CLIENT_ID_URL, privateKeyJwt: { key: privateKey, alg: "ES256", kid: "cimd" } },
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.tokenRequests[0]?.params.get("client_assertion_type")).toBe(
      "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    )
    expect(as.registrations).toHaveLength(0)
  })

  it("falls back to dynamic registration when the server does not advertise metadata documents", async () => {
    const { as, rs, client } = await world({ client: { clientMetadataUrl: CLIENT_ID_URL } })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.registrations).toHaveLength(1)
  })

  it("does not use a metadata document URL that is not https with a path", async () => {
    const { as, rs, client } = await world({
      as: { metadata: (m) => ({ ...m, client_id_metadata_document_supported: true }) },
      client: { clientMetadataUrl: "https://client.example/" },
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.registrations).toHaveLength(1)
  })

  it("asks the user when no other method applies, and stores the answer for that server", async () => {
    const asked: Array<string> = []
    const { as, rs, client } = await world({
      as: {
        metadata: noDcr,
        clients: [{ client_id: "typed-in", token_endpoint_auth_method: "none", redirect_uris: [CALLBACK] }],
      },
      client: {
        askClientInformation: async ({ issuer, redirectUri }) => {
          asked.push(`${issuer} ${redirectUri}`)
          return { issuer, client_id: "typed-in" }
        },
      },
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(asked).toEqual([`${as.issuer} ${CALLBACK}`])
    await client.logout(rs.url)
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(asked).toHaveLength(1)
  })

  it("fails with no-client when nothing applies", async () => {
    const { as, rs, client } = await world({ as: { metadata: noDcr } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "registration",
      reason: "no-client",
      url: `${as.issuer}/.well-known/oauth-authorization-server`,
    })
    expect((error as AuthError).message).toBe(
      `no way to obtain a client ID for ${as.issuer}: it supports neither client ID metadata documents (or no https clientMetadataUrl is configured) nor dynamic registration; pre-register a client and pass it in the clients option`,
    )
  })

  it("surfaces a refused dynamic registration with the OAuth error", async () => {
    const { as, rs, client } = await world({
      as: {
        registerReply: () => json(400, { error: "invalid_redirect_uri", error_description: "loopback not allowed" }),
      },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "registration",
      reason: "registration-failed",
      url: `${as.issuer}/register`,
      status: 400,
      error: "invalid_redirect_uri",
    })
    expect((error as AuthError).message).toBe(
      `dynamic client registration at ${as.issuer}/register failed with HTTP 400 invalid_redirect_uri: loopback not allowed; check the redirect URI and application_type, or pre-register the client`,
    )
  })

  it("accepts a client_secret issued without client_secret_expires_at as one that never expires", async () => {
    let server: AuthorizationServerPeer | undefined
    const store = memory()
    const { as, rs, client } = await world({
      as: {
        // RFC 7591 §3.2.1 requires client_secret_expires_at with a secret; deployed servers omit it.
        registerReply: (requested) => {
          const redirect_uris = requested.redirect_uris as Array<string>
          server?.clients.set("dcr-secret", {
            client_id: "dcr-secret",
            client_secret: "s3cret",
            token_endpoint_auth_method: "client_secret_basic",
            redirect_uris,
          })
          return json(201, {
            client_id: "dcr-secret",
            client_secret: "s3cret",
            token_endpoint_auth_method: "client_secret_basic",
            redirect_uris,
          })
        },
      },
      client: { store },
    })
    server = as
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.tokenRequests[0]?.authorization).toBe(`Basic ${Buffer.from("dcr-secret:s3cret").toString("base64")}`)
    expect(await store.get(`client:${as.issuer}`)).toStrictEqual({
      issuer: as.issuer,
      client_id: "dcr-secret",
      token_endpoint_auth_method: "client_secret_basic",
      redirect_uris: [CALLBACK],
      client_secret: "s3cret",
      client_secret_expires_at: 0,
    })
    // Still usable later: the stored registration is reused, not replaced.
    await client.logout(rs.url)
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.registrations).toHaveLength(1)
  })

  it("sends application_type web when configured", async () => {
    const { as, rs, client } = await world({ client: { applicationType: "web", clientName: "Web app" } })
    await client.fetch(rs.url, initialize)
    expect(as.registrations[0]).toMatchObject({ application_type: "web", client_name: "Web app" })
  })
})

describe("registrations are bound to their authorization server", () => {
  it("registers separately with each authorization server", async () => {
    const one = await world()
    const otherAs = await startAuthorizationServer()
    track(otherAs.close)
    const otherRs = await startResourceServer({ authorizationServers: () => [otherAs.issuer], lookup: otherAs.lookup })
    track(otherRs.close)
    await one.client.fetch(one.rs.url, initialize)
    await one.client.fetch(otherRs.url, initialize)
    expect(one.as.registrations).toHaveLength(1)
    expect(otherAs.registrations).toHaveLength(1)
    expect(otherAs.authorizations[0]?.get("client_id")).not.toBe(one.as.authorizations[0]?.get("client_id"))
  })

  it("registers anew when the server's authorization server changes, and drops the old token", async () => {
    const first = await startAuthorizationServer()
    track(first.close)
    const second = await startAuthorizationServer()
    track(second.close)
    let current: AuthorizationServerPeer = first
    const rs = await startResourceServer({
      authorizationServers: () => [current.issuer],
      lookup: (token) => current.lookup(token),
    })
    track(rs.close)
    const client = createAuthClient({ userAgent: headless(), discoveryTtlSeconds: 0 })
    track(client.dispose)
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    current = second
    expect((await client.fetch(rs.url, post(rpc("tools/list")))).status).toBe(200)
    expect(first.registrations).toHaveLength(1)
    expect(second.registrations).toHaveLength(1)
    expect(second.authorizations[0]?.get("client_id")).not.toBe(first.authorizations[0]?.get("client_id"))
    expect((await client.tokens(rs.url))?.issuer).toBe(second.issuer)
  })
})

describe("a registration kept from earlier", () => {
  /** The error page Keyway's authorization server shows for an unknown client (it never redirects to it). */
  const unknownClientPage = (as: () => AuthorizationServerPeer) => (url: URL) =>
    as().clients.has(url.searchParams.get("client_id") ?? "")
      ? undefined
      : {
          status: 400,
          headers: { "content-type": "text/html; charset=utf-8" },
          body: `<!doctype html><html><head><title>Authorization error</title></head><body><main><h1>This request cannot be completed</h1><div class="error" role="alert"><p><strong>Error:</strong> <code data-error="invalid_client">invalid_client</code></p><p data-error-description>the client_id is not known to this server</p></div></main></body></html>`,
        }

  it("is reused by another client instance on the same store (a restart): one registration for two authorizations", async () => {
    const { as, rs } = await world()
    const backend = memory()
    const first = createAuthClient({ userAgent: headless(), store: backend })
    track(first.dispose)
    expect((await first.fetch(rs.url, initialize)).status).toBe(200)
    await first.logout(rs.url)
    const second = createAuthClient({ userAgent: headless(), store: backend })
    track(second.dispose)
    expect((await second.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.authorizations).toHaveLength(2)
    expect(as.registrations).toHaveLength(1)
    expect(as.authorizations[1]?.get("client_id")).toBe(as.authorizations[0]?.get("client_id"))
  })

  it("is replaced when the authorization endpoint no longer knows it (invalid_client): registers once more and authorizes", async () => {
    let peer: AuthorizationServerPeer | undefined
    const { as, rs, client } = await world({ as: { authorizeReply: unknownClientPage(() => peer!) } })
    peer = as
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    const forgotten = (await client.tokens(rs.url))?.client_id ?? ""
    as.clients.delete(forgotten)
    await client.logout(rs.url)
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.registrations).toHaveLength(2)
    expect(as.authorizations.map((params) => params.get("client_id") === forgotten)).toEqual([true, true, false])
    expect((await client.tokens(rs.url))?.client_id).toBe(as.authorizations[2]?.get("client_id"))
  })

  it("is replaced when the token endpoint refuses it (invalid_client), at the cost of one more authorization", async () => {
    let peer: AuthorizationServerPeer | undefined
    let lost: string | undefined
    const { as, rs, client } = await world({
      client: {
        // The authorization server loses the registration between the authorization and the code exchange, once.
        fetch: async (input, init) => {
          const body = typeof init?.body === "string" ? new URLSearchParams(init.body) : undefined
          if (lost === undefined && body?.get("grant_type") === "authorization_code") {
            lost = body.get("client_id") ?? ""
            peer?.clients.delete(lost)
          }
          return fetch(input, init)
        },
      },
    })
    peer = as
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.registrations).toHaveLength(2)
    expect(as.tokenRequests.map((request) => request.params.get("client_id") === lost)).toEqual([true, false])
    expect(as.authorizations).toHaveLength(2)
  })

  it("is replaced when a refresh finds the registration gone (invalid_client), and the request goes through", async () => {
    let peer: AuthorizationServerPeer | undefined
    const { as, rs, client } = await world({ as: { authorizeReply: unknownClientPage(() => peer!) } })
    peer = as
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    const held = await client.tokens(rs.url)
    // The authorization server lost its state: the registration and the token it issued.
    as.clients.delete(held?.client_id ?? "")
    as.tokens.get(held?.access_token ?? "")!.revoked = true
    expect((await client.fetch(rs.url, post(rpc("tools/list")))).status).toBe(200)
    // The token is refused (401 invalid_token), the refresh too (invalid_client): a new registration, a new grant.
    expect(as.tokenRequests.map((request) => request.grant)).toEqual([
      "authorization_code",
      "refresh_token",
      "authorization_code",
    ])
    expect(rs.requests.map((request) => request.status)).toEqual([401, 200, 401, 200])
    expect(as.registrations).toHaveLength(2)
    expect((await client.tokens(rs.url))?.client_id).not.toBe(held?.client_id)
  })

  it("a configured client the server does not know is not replaced: the refusal is the caller's to fix", async () => {
    let peer: AuthorizationServerPeer | undefined
    const { as, rs, client } = await world({
      as: { authorizeReply: unknownClientPage(() => peer!) },
      client: (server) => ({ clients: [{ issuer: server.issuer, client_id: "-not-registered" }] }),
    })
    peer = as
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "authorization",
      reason: "authorization-error",
      error: "invalid_client",
      status: 400,
      url: `${as.issuer}/authorize`,
      message: `${as.issuer}/authorize answered HTTP 400 invalid_client: the client_id is not known to this server; the authorization server does not know the client`,
    })
    expect(as.registrations).toHaveLength(0)
    expect(as.authorizations).toHaveLength(1)
  })
})

describe("client ID metadata documents", () => {
  it("builds a valid document whose client_id is its URL", () => {
    const document = buildClientMetadataDocument({
      url: CLIENT_ID_URL,
      clientName: "Example",
      redirectUris: [CALLBACK],
      clientUri: "https://client.example",
    })
    expect(document).toEqual({
      client_id: CLIENT_ID_URL,
      client_name: "Example",
      redirect_uris: [CALLBACK],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      client_uri: "https://client.example",
    })
  })

  it("refuses a URL without https or without a path", () => {
    expect(() =>
      buildClientMetadataDocument({ url: "http://client.example/c.json", clientName: "x", redirectUris: [CALLBACK] }),
    ).toThrow("the client ID metadata document for http://client.example/c.json is invalid")
    expect(() =>
      buildClientMetadataDocument({ url: "https://client.example", clientName: "x", redirectUris: [CALLBACK] }),
    ).toThrow("must contain a path component")
  })

  it("refuses private_key_jwt without keys", () => {
    expect(() =>
      buildClientMetadataDocument({
        url: CLIENT_ID_URL,
        clientName: "x",
        redirectUris: [CALLBACK],
        tokenEndpointAuthMethod: "private_key_jwt",
      }),
    ).toThrow("a client ID metadata document using private_key_jwt needs jwks or jwksUri")
  })

  it("serves the document at its path over real HTTP", async () => {
    const document = buildClientMetadataDocument({
      url: CLIENT_ID_URL,
      clientName: "Example",
      redirectUris: [CALLBACK],
    })
    const handler = clientMetadataDocumentHandler(document, { maxAgeSeconds: 60 })
    // Behind a real loopback HTTP server, as an app would mount it.
    const server = await listen(async (request, url) => {
      const response = await handler(
        new Request(new URL(url.pathname, CLIENT_ID_URL), { method: request.method ?? "GET" }),
      )
      return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() }
    })
    track(server.close)
    const ok = await fetch(`${server.origin}/oauth/client.json`)
    expect(ok.status).toBe(200)
    expect(ok.headers.get("content-type")).toBe("application/json")
    expect(ok.headers.get("cache-control")).toBe("public, max-age=60")
    expect(await ok.json()).toEqual(document)
    expect((await fetch(`${server.origin}/other`)).status).toBe(404)
    expect((await fetch(`${server.origin}/oauth/client.json`, { method: "POST" })).status).toBe(405)
  })
})

describe("redirect URI matching (core's rule for reusing a stored registration)", () => {
  const redirectUriCovered = (registered: ReadonlyArray<string>, redirectUri: string) =>
    SecureUrl.matchRedirectUri(redirectUri, registered) !== undefined
  it("accepts another port for a loopback IP redirect URI only", () => {
    expect(redirectUriCovered(["http://127.0.0.1/callback"], "http://127.0.0.1:5555/callback")).toBe(true)
    expect(redirectUriCovered(["http://127.0.0.1/callback"], "http://127.0.0.1:5555/other")).toBe(false)
    expect(redirectUriCovered(["http://localhost/callback"], "http://localhost:5555/callback")).toBe(false)
    expect(redirectUriCovered(["https://app.example/cb"], "https://app.example/cb")).toBe(true)
  })
})
