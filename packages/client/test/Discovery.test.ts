import { Metadata, Wire } from "@keyway/core"
import { json, rpc, startAuthorizationServer, startCombined } from "@keyway/testing/peers"
import * as Result from "effect/Result"
import { describe, expect, it } from "vitest"
import { type CreateOptions, createAuthClient } from "../src/AuthClient.js"
import { AuthError } from "../src/AuthError.js"
import { memory } from "../src/TokenStore.js"
import { headless, twoPhase } from "../src/UserAgent.js"
import { rejection, track, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })
const initialize = post(rpc("initialize"))

describe("protected resource metadata", () => {
  it("probes the path-specific URL, then the root one, when the challenge has no resource_metadata", async () => {
    const { rs, client } = await world({ rs: { advertiseMetadata: false, metadataAt: ["root"] } })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(rs.metadataRequests).toEqual(["/.well-known/oauth-protected-resource"])
  })

  it("refuses metadata whose resource is another server, before any authorization request", async () => {
    const { as, rs, client } = await world({
      rs: { metadata: (m) => ({ ...m, resource: "https://other.example/mcp" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${new URL(rs.url).origin}/.well-known/oauth-protected-resource/mcp`
    expect(error).toBeInstanceOf(AuthError)
    expect(error).toMatchObject({ step: "protected-resource-metadata", reason: "resource-mismatch", url })
    expect((error as AuthError).message).toBe(
      `the protected resource metadata at ${url} is for resource "https://other.example/mcp", not for ${rs.url}; refusing to authorize for another server`,
    )
    expect(as.paths).toEqual([])
  })

  it("refuses metadata that lists no authorization servers", async () => {
    const { rs, client } = await world({ rs: { authorizationServers: () => [] } })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${new URL(rs.url).origin}/.well-known/oauth-protected-resource/mcp`
    expect(error).toMatchObject({ step: "protected-resource-metadata", reason: "no-authorization-servers", url })
    expect((error as AuthError).message).toBe(
      `the protected resource metadata at ${url} lists no authorization_servers; the MCP server must name at least one`,
    )
  })

  it("refuses a metadata body that is not JSON", async () => {
    const { rs, client } = await world({
      rs: { metadataReply: { status: 200, headers: { "content-type": "text/html" }, body: "<html>hi</html>" } },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${new URL(rs.url).origin}/.well-known/oauth-protected-resource/mcp`
    expect(error).toMatchObject({ step: "protected-resource-metadata", reason: "invalid-json", url, status: 200 })
    expect((error as AuthError).message).toBe(
      `${url} answered HTTP 200 with a body that is not JSON (content-type text/html); the endpoint must return a JSON document`,
    )
  })

  it("stops on a 5xx during discovery instead of trying further locations", async () => {
    const { rs, client } = await world({
      rs: { advertiseMetadata: false, metadataReply: { status: 503, body: "down" } },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${new URL(rs.url).origin}/.well-known/oauth-protected-resource/mcp`
    expect(error).toMatchObject({ step: "protected-resource-metadata", reason: "http-error", url, status: 503 })
    expect((error as AuthError).message).toBe(
      `${url} answered HTTP 503 during discovery; the server is failing, try again later or check its logs`,
    )
    expect(rs.metadataRequests).toEqual(["/.well-known/oauth-protected-resource/mcp"])
  })

  it("refuses an invalid document with the field named", async () => {
    const { rs, client } = await world({ rs: { metadata: (m) => ({ ...m, authorization_servers: "nope" }) } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "protected-resource-metadata", reason: "invalid-document" })
    expect((error as AuthError).message).toContain("authorization_servers")
  })

  it("fails with not-found naming the URLs tried when no metadata exists and the fallback is off", async () => {
    const { rs, client } = await world({
      rs: { advertiseMetadata: false, metadataAt: [] },
      client: { legacyFallback: false },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const origin = new URL(rs.url).origin
    expect(error).toMatchObject({
      step: "protected-resource-metadata",
      reason: "not-found",
      url: `${origin}/.well-known/oauth-protected-resource/mcp`,
    })
    expect((error as AuthError).message).toBe(
      `no protected resource metadata for ${rs.url} (tried ${origin}/.well-known/oauth-protected-resource/mcp, ${origin}/.well-known/oauth-protected-resource); the MCP server must publish it, or configure protectedResourceMetadata for this server`,
    )
  })

  it("uses pre-configured metadata when the server publishes none", async () => {
    const { as, rs } = await world({ rs: { advertiseMetadata: false, metadataAt: [] } })
    const configured = createAuthClient({
      userAgent: headless(),
      legacyFallback: false,
      protectedResourceMetadata: { [rs.url]: { resource: rs.url, authorization_servers: [as.issuer] } },
    })
    track(configured.dispose)
    expect((await configured.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.authorizations[0]?.get("resource")).toBe(rs.url)
    expect(rs.metadataRequests).toEqual([])
  })

  it("asks the chooser which authorization server to use", async () => {
    const other = await startAuthorizationServer()
    track(other.close)
    const seen: Array<ReadonlyArray<string>> = []
    const { as, rs, client } = await world({
      rs: { authorizationServers: () => ["https://first.example", other.issuer] },
      client: {
        chooseAuthorizationServer: (servers) => {
          seen.push(servers)
          return servers[1]!
        },
      },
    })
    await rejection(client.fetch(rs.url, initialize))
    expect(seen).toEqual([["https://first.example", other.issuer]])
    expect(other.authorizations).toHaveLength(1)
    expect(as.authorizations).toHaveLength(0)
  })

  it("matches resources by canonical form or by path prefix on the same origin", () => {
    expect(Metadata.resourceMatches("https://mcp.example.com/mcp", "https://MCP.example.com/mcp")).toBe(true)
    expect(Metadata.resourceMatches("https://mcp.example.com", "https://mcp.example.com/mcp")).toBe(true)
    expect(Metadata.resourceMatches("https://mcp.example.com/mc", "https://mcp.example.com/mcp")).toBe(false)
    expect(Metadata.resourceMatches("https://evil.example/mcp", "https://mcp.example.com/mcp")).toBe(false)
    expect(Metadata.resourceMatches("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp")).toBe(false)
  })
})

describe("authorization server metadata", () => {
  it("tries the seed's locations in order for an issuer with a path", async () => {
    const { as, rs, client } = await world({ as: { issuerPath: "/tenant1", metadataAt: ["openid-appended"] } })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.paths.slice(0, 3)).toEqual([
      "/.well-known/oauth-authorization-server/tenant1",
      "/.well-known/openid-configuration/tenant1",
      "/tenant1/.well-known/openid-configuration",
    ])
  })

  it("falls back to OpenID Connect Discovery for an issuer without a path", async () => {
    const { as, rs, client } = await world({ as: { metadataAt: ["openid"] } })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.paths.slice(0, 2)).toEqual([
      "/.well-known/oauth-authorization-server",
      "/.well-known/openid-configuration",
    ])
  })

  it("refuses metadata whose issuer differs by a trailing slash", async () => {
    const { as, rs, client } = await world({ as: { metadata: (m) => ({ ...m, issuer: `${m.issuer}/` }) } })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${as.issuer}/.well-known/oauth-authorization-server`
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "issuer-mismatch", url })
    expect((error as AuthError).message).toBe(
      `the authorization server metadata at ${url} has issuer "${as.issuer}/" but "${as.issuer}" was expected (compared exactly, without normalisation); refusing to use it`,
    )
    expect(as.authorizations).toHaveLength(0)
  })

  it("keeps exact equality on the protected resource metadata path, even for an issuer at the same origin", async () => {
    const { as, rs, client } = await world({ as: { metadata: (m) => ({ ...m, issuer: `${String(m.issuer)}/oauth` }) } })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${as.issuer}/.well-known/oauth-authorization-server`
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "issuer-mismatch", url })
    expect((error as AuthError).message).toBe(
      `the authorization server metadata at ${url} has issuer "${as.issuer}/oauth" but "${as.issuer}" was expected (compared exactly, without normalisation); refusing to use it`,
    )
    expect(as.registrations).toHaveLength(0)
  })

  it("refuses metadata naming another issuer", async () => {
    const { as, rs, client } = await world({ as: { metadata: (m) => ({ ...m, issuer: "https://honest.example" }) } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "issuer-mismatch" })
    expect(as.registrations).toHaveLength(0)
  })

  it("refuses to proceed when code_challenge_methods_supported is absent", async () => {
    const { as, rs, client } = await world({
      as: {
        metadata: ({ code_challenge_methods_supported: _, ...m }) => m,
      },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${as.issuer}/.well-known/oauth-authorization-server`
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "pkce-unsupported", url })
    expect((error as AuthError).message).toBe(
      `the authorization server metadata at ${url} has no code_challenge_methods_supported, so PKCE support cannot be verified; the authorization server must list S256`,
    )
    expect(as.authorizations).toHaveLength(0)
  })

  it("refuses to proceed when S256 is not among the PKCE methods", async () => {
    const { as, rs, client } = await world({
      as: { metadata: (m) => ({ ...m, code_challenge_methods_supported: ["plain"] }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${as.issuer}/.well-known/oauth-authorization-server`
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "pkce-unsupported", url })
    expect((error as AuthError).message).toBe(
      `the authorization server metadata at ${url} lists code_challenge_methods_supported [plain] without S256; the authorization server must support PKCE S256`,
    )
  })

  it("refuses a metadata body that is not JSON", async () => {
    const { as, rs, client } = await world({ as: { metadataReply: { status: 200, body: "not json" } } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "authorization-server-metadata",
      reason: "invalid-json",
      url: `${as.issuer}/.well-known/oauth-authorization-server`,
    })
  })

  it("stops on a 5xx", async () => {
    const { as, rs, client } = await world({ as: { metadataReply: json(500, { error: "server_error" }) } })
    const error = await rejection(client.fetch(rs.url, initialize))
    const url = `${as.issuer}/.well-known/oauth-authorization-server`
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "http-error", url, status: 500 })
    expect((error as AuthError).message).toBe(
      `${url} answered HTTP 500 during discovery; the server is failing, try again later or check its logs`,
    )
  })

  it("fails with not-found when no location answers", async () => {
    const { as, rs, client } = await world({ as: { metadataAt: [] } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "authorization-server-metadata",
      reason: "not-found",
      url: `${as.issuer}/.well-known/oauth-authorization-server`,
    })
  })

  it("caches discovery documents while they are fresh", async () => {
    const { as, rs, client } = await world()
    await client.authorize(rs.url)
    await client.authorize(rs.url)
    expect(as.metadataRequests).toEqual(["/.well-known/oauth-authorization-server"])
    expect(rs.metadataRequests).toEqual(["/.well-known/oauth-protected-resource/mcp"])
  })
})

describe("2025-03-26 fallbacks", () => {
  const legacy = async (asOptions: Parameters<typeof startCombined>[0], clientOptions: CreateOptions = {}) => {
    const { as, rs } = await startCombined(asOptions, { advertiseMetadata: false, metadataAt: [] })
    track(as.close)
    const client = createAuthClient({ userAgent: headless(), ...clientOptions })
    track(client.dispose)
    return { as, rs, client }
  }
  /** An authorization server at `{origin}/oauth` whose metadata is served at the origin's RFC 8414 location. */
  const oauthAtOrigin = { issuerPath: "/oauth", metadataAt: ["oauth-root"] } as const

  it("accepts an issuer at the MCP server's origin other than the origin itself, and binds tokens to it", async () => {
    const { as, rs, client } = await legacy(oauthAtOrigin)
    expect(as.issuer).toBe(`${new URL(rs.url).origin}/oauth`)
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.metadataRequests).toEqual(["/.well-known/oauth-authorization-server"])
    expect(as.paths).toEqual([
      "/.well-known/oauth-authorization-server",
      "/oauth/register",
      "/oauth/authorize",
      "/oauth/token",
    ])
    expect(as.authorizations[0]?.get("resource")).toBe(rs.url)
    expect(await client.tokens(rs.url)).toMatchObject({ issuer: as.issuer, resource: rs.url, legacy: true })
  })

  it("checks iss against that issuer, not against the origin", async () => {
    const { as, rs, client } = await legacy({
      ...oauthAtOrigin,
      tamperRedirect: (params) => params.set("iss", new URL(params.get("iss") ?? "").origin),
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const origin = new URL(rs.url).origin
    expect(error).toMatchObject({ step: "callback", reason: "iss-mismatch", url: "http://127.0.0.1/callback" })
    expect((error as AuthError).message).toBe(
      `the authorization response at http://127.0.0.1/callback has iss "${origin}" but the request went to "${as.issuer}"; rejected as a possible mix-up attack (RFC 9207)`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("refuses an issuer at another origin with issuer-mismatch, before registering", async () => {
    const { as, rs, client } = await legacy({
      ...oauthAtOrigin,
      metadata: (m) => ({ ...m, issuer: "https://elsewhere.example/oauth" }),
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    const origin = new URL(rs.url).origin
    const url = `${origin}/.well-known/oauth-authorization-server`
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "issuer-mismatch", url })
    expect((error as AuthError).message).toBe(
      `the authorization server metadata at ${url} has issuer "https://elsewhere.example/oauth", which is not an https (or loopback http) URL at the MCP server's origin ${origin} (2025-03-26 fallback, no protected resource metadata); refusing to use it`,
    )
    expect(as.paths).toEqual(["/.well-known/oauth-authorization-server"])
  })

  it("refuses an issuer on another port of the same host", async () => {
    const { as, rs, client } = await legacy({
      ...oauthAtOrigin,
      metadata: (m) => {
        const issuer = new URL(String(m.issuer))
        issuer.port = String(Number(issuer.port) === 65535 ? 65534 : Number(issuer.port) + 1)
        return { ...m, issuer: issuer.href }
      },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "issuer-mismatch" })
    expect(as.registrations).toHaveLength(0)
  })

  it("refreshes through the issuer found at the origin", async () => {
    const { as, rs, client } = await legacy({ ...oauthAtOrigin, expiresIn: 30 })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    const before = as.refreshes
    // 30 s is inside the default 60 s refresh skew, so the next request refreshes first.
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.refreshes).toBe(before + 1)
    expect(as.tokenRequests.map((request) => request.grant)).toEqual([
      "authorization_code",
      ...Array.from({ length: before + 1 }, () => "refresh_token"),
    ])
    expect(as.paths.filter((path) => path.endsWith("/token"))).toEqual(as.tokenRequests.map(() => "/oauth/token"))
    expect(await client.tokens(rs.url)).toMatchObject({ issuer: as.issuer, legacy: true })
  })

  it("completes a two-phase authorization by finding that issuer again at the origin", async () => {
    const REDIRECT = "https://app.example/oauth/callback"
    const store = memory()
    const { as, rs } = await legacy(oauthAtOrigin)
    const first = createAuthClient({ userAgent: twoPhase({ redirectUri: REDIRECT }), store })
    track(first.dispose)
    const begun = await first.begin(rs.url)
    expect(begun.url.startsWith(`${as.issuer}/authorize?`)).toBe(true)
    const callback = (await fetch(begun.url, { redirect: "manual" })).headers.get("location") ?? ""
    // A second client (a restart) has no discovery cache: it finds the authorization server again.
    const second = createAuthClient({ userAgent: twoPhase({ redirectUri: REDIRECT }), store })
    track(second.dispose)
    expect(await second.complete(callback)).toMatchObject({ issuer: as.issuer, resource: rs.url, legacy: true })
  })

  it("refuses to complete when the origin's metadata names another issuer than the one the request went to", async () => {
    const REDIRECT = "https://app.example/oauth/callback"
    const store = memory()
    let moved = false
    const { as, rs } = await legacy({
      ...oauthAtOrigin,
      metadata: (m) => (moved ? { ...m, issuer: `${String(m.issuer)}/v2` } : m),
    })
    const first = createAuthClient({ userAgent: twoPhase({ redirectUri: REDIRECT }), store })
    track(first.dispose)
    const begun = await first.begin(rs.url)
    const callback = (await fetch(begun.url, { redirect: "manual" })).headers.get("location") ?? ""
    moved = true
    const second = createAuthClient({ userAgent: twoPhase({ redirectUri: REDIRECT }), store })
    track(second.dispose)
    const error = await rejection(second.complete(callback))
    const url = `${new URL(rs.url).origin}/.well-known/oauth-authorization-server`
    expect(error).toMatchObject({ step: "authorization-server-metadata", reason: "issuer-mismatch", url })
    expect((error as AuthError).message).toBe(
      `the authorization server metadata at ${url} now has issuer "${as.issuer}/v2" but this authorization is bound to "${as.issuer}" (2025-03-26 fallback); authorize again`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("uses authorization server metadata at the MCP server's origin when no protected resource metadata exists", async () => {
    const { as, rs, client } = await legacy({})
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.metadataRequests).toEqual(["/.well-known/oauth-authorization-server"])
    expect(as.authorizations[0]?.get("resource")).toBe(rs.url)
  })

  it("uses the default /authorize, /token and /register endpoints when the origin has no metadata either", async () => {
    const { as, rs, client } = await legacy({ metadataAt: [], iss: "no" })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.paths).toEqual([
      "/.well-known/oauth-authorization-server",
      "/.well-known/openid-configuration",
      "/register",
      "/authorize",
      "/token",
    ])
  })
})

describe("Metadata.legacyIssuerAccepted, as the client's 2025-03-26 fallback uses it", () => {
  it.each([
    ["https://mcp.example.com/oauth", "https://mcp.example.com", true],
    ["https://mcp.example.com", "https://mcp.example.com", true],
    ["https://MCP.example.com:443/oauth", "https://mcp.example.com", true],
    ["http://127.0.0.1:8080/oauth", "http://127.0.0.1:8080", true],
    ["http://localhost:8080/oauth", "http://localhost:8080", true],
    ["http://mcp.example.com/oauth", "http://mcp.example.com", false],
    ["https://mcp.example.com:8443/oauth", "https://mcp.example.com", false],
    ["https://other.example.com/oauth", "https://mcp.example.com", false],
    ["https://mcp.example.com.evil.example/oauth", "https://mcp.example.com", false],
    ["https://mcp.example.com/oauth?tenant=1", "https://mcp.example.com", false],
    ["https://mcp.example.com/oauth#x", "https://mcp.example.com", false],
    ["https://user@mcp.example.com/oauth", "https://mcp.example.com", false],
    ["/oauth", "https://mcp.example.com", false],
  ])("%s at origin %s: %s", (issuer, origin, accepted) => {
    expect(Metadata.legacyIssuerAccepted(issuer, origin)).toBe(accepted)
  })
})

describe("Wire.validate, as discovery checks every metadata document through it", () => {
  it("gives the same answers before and after zod compiles the schema (after its first hundred parses)", () => {
    // A schema of its own, so that its parses are counted from zero whatever ran before.
    const fresh = Wire.AuthorizationServerMetadata.extend({})
    const good = {
      issuer: "https://as.example.com",
      authorization_endpoint: "https://as.example.com/authorize",
      token_endpoint: "https://as.example.com/token",
      code_challenge_methods_supported: ["S256"],
    }
    const bad = { ...good, token_endpoint: "not a URL" }
    const first = [Wire.validate(fresh, good, "x"), Wire.validate(fresh, bad, "x")]
    for (let i = 0; i < 150; i++) {
      expect([Wire.validate(fresh, good, "x"), Wire.validate(fresh, bad, "x")]).toStrictEqual(first)
    }
    expect(Result.isSuccess(first[0]!) && first[0].success).toStrictEqual(good)
    expect(Result.isFailure(first[1]!) && first[1].failure.message).toBe('x: "token_endpoint" must be a URL')
  })
})

describe("errors", () => {
  it("are AuthErrors with a tag", () => {
    const error = new AuthError({ step: "token", reason: "oauth-error", url: "https://as/token", message: "m" })
    expect(error._tag).toBe("AuthError")
    expect(error).toBeInstanceOf(Error)
  })
})
