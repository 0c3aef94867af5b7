import { describe, expect, it } from "vitest"
import { createAuthClient } from "../src/AuthClient.js"
import { AuthError } from "../src/AuthError.js"
import { resourceMatches } from "../src/Discovery.js"
import { headless } from "../src/UserAgent.js"
import { json, rpc, startAuthorizationServer, startCombined } from "./support/peers.js"
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
    expect(resourceMatches("https://mcp.example.com/mcp", "https://MCP.example.com/mcp")).toBe(true)
    expect(resourceMatches("https://mcp.example.com", "https://mcp.example.com/mcp")).toBe(true)
    expect(resourceMatches("https://mcp.example.com/mc", "https://mcp.example.com/mcp")).toBe(false)
    expect(resourceMatches("https://evil.example/mcp", "https://mcp.example.com/mcp")).toBe(false)
    expect(resourceMatches("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp")).toBe(false)
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
  const legacy = async (asOptions: Parameters<typeof startCombined>[0]) => {
    const { as, rs } = await startCombined(asOptions, { advertiseMetadata: false, metadataAt: [] })
    track(as.close)
    const client = createAuthClient({ userAgent: headless() })
    track(client.dispose)
    return { as, rs, client }
  }

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

describe("errors", () => {
  it("are AuthErrors with a tag", () => {
    const error = new AuthError({ step: "token", reason: "oauth-error", url: "https://as/token", message: "m" })
    expect(error._tag).toBe("AuthError")
    expect(error).toBeInstanceOf(Error)
  })
})
