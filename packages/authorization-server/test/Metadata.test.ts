import { Jwk, WellKnown } from "@keyway/core"
import { afterEach, describe, expect, it } from "vitest"
import { startServer, type TestServer } from "./support/server.js"

let server: TestServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

const expectMetadata = (body: Record<string, unknown>, issuer: string, registration: boolean) => {
  expect(body.issuer).toBe(issuer)
  expect(body.authorization_endpoint).toBe(`${issuer}/authorize`)
  expect(body.token_endpoint).toBe(`${issuer}/token`)
  expect(body.jwks_uri).toBe(`${issuer}/jwks`)
  if (registration) expect(body.registration_endpoint).toBe(`${issuer}/register`)
  else expect(body).not.toHaveProperty("registration_endpoint")
  expect(body.response_types_supported).toEqual(["code"])
  expect(body.grant_types_supported).toEqual(["authorization_code", "refresh_token"])
  expect(body.token_endpoint_auth_methods_supported).toEqual([
    "none",
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
  ])
  expect(body.code_challenge_methods_supported).toEqual(["S256"])
  expect(body.authorization_response_iss_parameter_supported).toBe(true)
  expect(body.scopes_supported).toEqual(["tools:read", "tools:call", "files"])
  expect(body.revocation_endpoint).toBe(`${issuer}/revoke`)
  expect(body.revocation_endpoint_auth_methods_supported).toEqual(body.token_endpoint_auth_methods_supported)
  expect(body.introspection_endpoint).toBe(`${issuer}/introspect`)
  expect(body.introspection_endpoint_auth_methods_supported).toEqual([
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
  ])
  expect(body.client_id_metadata_document_supported).toBe(true)
}

describe("authorization server metadata", () => {
  it("answers at both root locations for an issuer without a path, in the order clients try them", async () => {
    server = await startServer({ registration: true })
    const locations = WellKnown.authorizationServerMetadataUrls(server.issuer)
    expect(locations.map((l) => new URL(l.url).pathname)).toEqual([
      "/.well-known/oauth-authorization-server",
      "/.well-known/openid-configuration",
    ])
    for (const { url } of locations) {
      const response = await fetch(url)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("application/json")
      expect(response.headers.get("access-control-allow-origin")).toBe("*")
      expectMetadata((await response.json()) as Record<string, unknown>, server.issuer, true)
    }
  })

  it("answers at the path-inserted RFC 8414, path-inserted OIDC and appended OIDC locations for an issuer with a path", async () => {
    server = await startServer({ issuerPath: "/tenant/one" })
    expect(server.issuer).toBe(`${server.url}/tenant/one`)
    const locations = WellKnown.authorizationServerMetadataUrls(server.issuer)
    expect(locations.map((l) => new URL(l.url).pathname)).toEqual([
      "/.well-known/oauth-authorization-server/tenant/one",
      "/.well-known/openid-configuration/tenant/one",
      "/tenant/one/.well-known/openid-configuration",
    ])
    for (const { url } of locations) {
      const response = await fetch(url)
      expect(response.status).toBe(200)
      expectMetadata((await response.json()) as Record<string, unknown>, server.issuer, false)
    }
    // The root locations belong to another issuer (the one without a path): not this one.
    expect((await fetch(`${server.url}/.well-known/oauth-authorization-server`)).status).toBe(404)
  })

  it("answers CORS preflights on metadata, token and registration", async () => {
    server = await startServer({ registration: true })
    for (const [path, methods] of [
      ["/.well-known/oauth-authorization-server", "GET, OPTIONS"],
      ["/token", "POST, OPTIONS"],
      ["/register", "POST, OPTIONS"],
      ["/jwks", "GET, OPTIONS"],
    ] as const) {
      const response = await fetch(`${server.issuer}${path}`, {
        method: "OPTIONS",
        headers: { origin: "https://browser.example", "access-control-request-method": "POST" },
      })
      expect(response.status).toBe(204)
      expect(response.headers.get("access-control-allow-origin")).toBe("*")
      expect(response.headers.get("access-control-allow-methods")).toBe(methods)
      expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type")
    }
  })

  it("has no registration endpoint when registration is off", async () => {
    server = await startServer()
    const response = await fetch(`${server.issuer}/register`, { method: "POST", body: "{}" })
    expect(response.status).toBe(404)
  })

  it("publishes the public half of an ES256 key generated on first start", async () => {
    server = await startServer()
    const response = await fetch(`${server.issuer}/jwks`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/jwk-set+json")
    const jwks = (await response.json()) as { keys: Array<Record<string, unknown>> }
    expect(jwks.keys).toHaveLength(1)
    const key = jwks.keys[0]!
    expect(key).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" })
    expect(typeof key.kid).toBe("string")
    expect(Jwk.findPrivateKeyMaterial(jwks)).toBeUndefined()
    // The same key is served on the next request (it is stored, not regenerated).
    const again = (await (await fetch(`${server.issuer}/jwks`)).json()) as { keys: Array<Record<string, unknown>> }
    expect(again.keys.map((k) => k.kid)).toEqual([key.kid])
  })
})
