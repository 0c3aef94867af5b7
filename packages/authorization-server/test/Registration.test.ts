import { expectOAuthError } from "@keyway/testing/oauth"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AuthorizationServerExtension, GrantContext } from "../src/Extension.js"
import { exampleExtension } from "./support/exampleExtension.js"
import { basic, MCP, obtainCode, startServer, type TestServer, tokenRequest } from "./support/server.js"

let server: TestServer
beforeAll(async () => {
  server = await startServer({
    registration: true,
    // Every test here registers from 127.0.0.1; the limit itself is tested in RateLimits.test.ts.
    rateLimits: { registration: { max: 1000 } },
    registrationPolicy: async (metadata) =>
      metadata.client_name === "Blocked App"
        ? { allow: false, description: "this client name is not allowed here" }
        : { allow: true },
  })
})
afterAll(async () => {
  await server.close()
})

const register = (body: unknown, contentType = "application/json") =>
  fetch(`${server.issuer}/register`, {
    method: "POST",
    headers: { "content-type": contentType },
    body: typeof body === "string" ? body : JSON.stringify(body),
  })

describe("dynamic client registration (RFC 7591)", () => {
  it("registers a public client that can then complete the flow", async () => {
    const response = await register({
      client_name: "CLI Tool",
      redirect_uris: ["http://127.0.0.1/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      token_endpoint_auth_method: "none",
    })
    expect(response.status).toBe(201)
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(response.headers.get("access-control-allow-origin")).toBe("*")
    const body = (await response.json()) as Record<string, unknown>
    expect(body.client_id).toMatch(/^[A-Za-z0-9_-]{22}$/)
    expect(body).not.toHaveProperty("client_secret")
    expect(body.client_name).toBe("CLI Tool")
    expect(body.redirect_uris).toEqual(["http://127.0.0.1/callback"])
    expect(body.token_endpoint_auth_method).toBe("none")
    expect(typeof body.client_id_issued_at).toBe("number")

    const clientId = body.client_id as string
    const { code, verifier } = await obtainCode(server, {
      client_id: clientId,
      redirect_uri: "http://127.0.0.1:5050/callback",
    })
    const token = await tokenRequest(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: "http://127.0.0.1:5050/callback",
    })
    expect(token.status).toBe(200)
  })

  it("a scope chosen at registration does not stop a later step-up to more scopes of the resource", async () => {
    const response = await register({
      client_name: "Step-up Tool",
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
      scope: "tools:read",
    })
    expect(response.status).toBe(201)
    const clientId = ((await response.json()) as { client_id: string }).client_id
    const { code, verifier } = await obtainCode(server, {
      client_id: clientId,
      redirect_uri: "http://127.0.0.1:5051/callback",
      scope: "tools:read tools:call",
    })
    const token = await tokenRequest(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: "http://127.0.0.1:5051/callback",
    })
    expect(token.status).toBe(200)
    expect(((await token.json()) as { scope: string }).scope).toBe("tools:read tools:call")
  })

  it("gives a confidential client its secret once; the secret authenticates it", async () => {
    const response = await register({ client_name: "Web", redirect_uris: ["https://web.example.org/cb"] })
    expect(response.status).toBe(201)
    const body = (await response.json()) as Record<string, unknown>
    expect(body.token_endpoint_auth_method).toBe("client_secret_basic")
    expect(body.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(body.client_secret_expires_at).toBe(0)
    const clientId = body.client_id as string
    const secret = body.client_secret as string
    const { code, verifier } = await obtainCode(server, {
      client_id: clientId,
      redirect_uri: "https://web.example.org/cb",
    })
    const ok = await tokenRequest(
      server,
      { grant_type: "authorization_code", code, code_verifier: verifier, redirect_uri: "https://web.example.org/cb" },
      { authorization: basic(clientId, secret) },
    )
    expect(ok.status).toBe(200)
    const wrong = await tokenRequest(
      server,
      { grant_type: "authorization_code", code, code_verifier: verifier },
      { authorization: basic(clientId, `${secret}x`) },
    )
    expect(wrong.status).toBe(401)
  })

  it("accepts a private-use scheme for a native application", async () => {
    const response = await register({
      application_type: "native",
      redirect_uris: ["com.example.app:/oauth/callback"],
      token_endpoint_auth_method: "none",
    })
    expect(response.status).toBe(201)
    const { client_id } = (await response.json()) as { client_id: string }
    const { location } = await obtainCode(server, { client_id, redirect_uri: "com.example.app:/oauth/callback" })
    expect(location.protocol).toBe("com.example.app:")
    expect(location.pathname).toBe("/oauth/callback")
    expect(location.searchParams.get("iss")).toBe(server.issuer)
  })

  it("does not echo dpop_bound_access_tokens when no extension gives it meaning (the server does not do DPoP)", async () => {
    const response = await register({
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
      dpop_bound_access_tokens: true,
    })
    expect(response.status).toBe(201)
    const body = (await response.json()) as Record<string, unknown>
    expect(body.client_id).toEqual(expect.any(String))
    expect("dpop_bound_access_tokens" in body).toBe(false)
  })

  const redirectCases: ReadonlyArray<[string, unknown, RegExp]> = [
    ["no redirect_uris", {}, /redirect_uris is required/],
    ["empty redirect_uris", { redirect_uris: [] }, /redirect_uris is required/],
    ["http on a public host", { redirect_uris: ["http://app.example.com/cb"] }, /not loopback/],
    ["a fragment", { redirect_uris: ["https://app.example.com/cb#x"] }, /fragment/],
    ["javascript: scheme", { redirect_uris: ["javascript:alert(1)"] }, /forbidden scheme/],
    ["a relative URI", { redirect_uris: ["/cb"] }, /not an absolute URI/],
    ["a private-use scheme for a web application", { redirect_uris: ["com.example.app:/cb"] }, /native applications/],
    [
      "a private-use scheme that is not reverse-DNS",
      { application_type: "native", redirect_uris: ["myapp:/cb"] },
      /reverse domain name/,
    ],
  ]
  for (const [name, body, description] of redirectCases) {
    it(`refuses ${name}: invalid_redirect_uri`, async () => {
      await expectOAuthError(
        await register({ token_endpoint_auth_method: "none", ...(body as object) }),
        400,
        "invalid_redirect_uri",
        description,
      )
    })
  }

  const metadataCases: ReadonlyArray<[string, Record<string, unknown>, RegExp]> = [
    [
      "an unsupported grant type",
      { grant_types: ["client_credentials"] },
      /grant_type client_credentials is not supported/,
    ],
    ["an unsupported response type", { response_types: ["token"] }, /response_type token is not supported/],
    ["an unknown auth method", { token_endpoint_auth_method: "tls_client_auth" }, /tls_client_auth is not supported/],
    ["an unknown application type", { application_type: "desktop" }, /web or native/],
    ["private_key_jwt without keys", { token_endpoint_auth_method: "private_key_jwt" }, /needs jwks/],
    [
      "jwks_uri",
      { token_endpoint_auth_method: "private_key_jwt", jwks_uri: "https://k.example.com/jwks" },
      /jwks_uri is not supported/,
    ],
    [
      "private keys in jwks",
      { token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [{ kty: "EC", d: "x" }] } },
      /public keys only/,
    ],
    ["a scope this server does not offer", { scope: "admin" }, /scope admin is not offered/],
    ["a non-string client_name", { client_name: 42 }, /client_name must be a string/],
    ["an http client_uri", { client_uri: "http://app.example.com" }, /client_uri must be an https URL/],
    [
      "redirect_uris that is not an array",
      { redirect_uris: "https://app.example.com/cb" },
      /redirect_uris must be an array/,
    ],
    ["a policy refusal", { client_name: "Blocked App" }, /not allowed here/],
    ["contacts with a number", { contacts: ["ops@example.com", 1] }, /^contacts must be an array of strings$/],
    [
      "redirect_uris with a number",
      { redirect_uris: ["https://app.example.com/cb", 42] },
      /^redirect_uris must be an array of strings$/,
    ],
    ["a client_uri that is not a URL", { client_uri: "not a url" }, /^client_uri must be an absolute URL$/],
    ["a jwks_uri that is not a string", { jwks_uri: 42 }, /^jwks_uri is not supported/],
    [
      "jwks and jwks_uri together",
      { jwks: { keys: [] }, jwks_uri: "https://k.example.com/jwks" },
      /^jwks_uri is not supported/,
    ],
    ["a jwks key that is not an object", { jwks: { keys: ["x"] } }, /^jwks must be a JWK Set$/],
    ["a jwks key without kty", { jwks: { keys: [{ use: "sig" }] } }, /^every key in jwks needs kty$/],
  ]
  for (const [name, body, description] of metadataCases) {
    it(`refuses ${name}: invalid_client_metadata`, async () => {
      await expectOAuthError(
        await register({ redirect_uris: ["https://app.example.com/cb"], ...body }),
        400,
        "invalid_client_metadata",
        description,
      )
    })
  }

  it.each<[string, Record<string, unknown>, string]>([
    ["a symmetric oct key", { kty: "oct", k: "GawgguFyGrWKav7AX4VKUg" }, "jwks.keys.0.k is symmetric key material"],
    [
      "an RSA key with its prime factors",
      { kty: "RSA", n: "n", e: "AQAB", p: "p", q: "q" },
      "jwks.keys.0.p is private key material",
    ],
    [
      "an RSA key with its CRT coefficient",
      { kty: "RSA", n: "n", e: "AQAB", qi: "qi" },
      "jwks.keys.0.qi is private key material",
    ],
    ["an EC private key", { kty: "EC", crv: "P-256", x: "x", y: "y", d: "d" }, "jwks.keys.0.d is private key material"],
  ])("refuses %s in jwks: 400 invalid_client_metadata naming the member", async (_, key, problem) => {
    const response = await register({
      redirect_uris: ["https://app.example.com/cb"],
      token_endpoint_auth_method: "private_key_jwt",
      jwks: { keys: [key] },
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "invalid_client_metadata",
      error_description: `jwks must hold public keys only: ${problem}`,
    })
  })

  it("registers a private_key_jwt client whose jwks holds public keys only", async () => {
    const response = await register({
      redirect_uris: ["https://app.example.com/cb"],
      token_endpoint_auth_method: "private_key_jwt",
      jwks: { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y", use: "sig" }] },
    })
    expect(response.status).toBe(201)
    expect(((await response.json()) as { jwks: unknown }).jwks).toEqual({
      keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y", use: "sig" }],
    })
  })

  it("refuses a software statement: invalid_software_statement", async () => {
    await expectOAuthError(
      await register({ redirect_uris: ["https://app.example.com/cb"], software_statement: "eyJ.x.y" }),
      400,
      "invalid_software_statement",
      /not supported/,
    )
  })

  it("refuses a body that is not JSON: invalid_client_metadata", async () => {
    await expectOAuthError(await register("{not json"), 400, "invalid_client_metadata", /not valid JSON/)
  })

  it("refuses a JSON array: invalid_client_metadata", async () => {
    await expectOAuthError(await register([1, 2]), 400, "invalid_client_metadata", /JSON object/)
  })

  it("refuses a form body: invalid_client_metadata", async () => {
    await expectOAuthError(
      await register("a=b", "application/x-www-form-urlencoded"),
      400,
      "invalid_client_metadata",
      /application\/json/,
    )
  })

  it("refuses an oversized body: 413 invalid_client_metadata", async () => {
    await expectOAuthError(
      await register({ redirect_uris: ["https://app.example.com/cb"], client_name: "x".repeat(70 * 1024) }),
      413,
      "invalid_client_metadata",
      /exceeds 65536 bytes/,
    )
  })
})

describe("client metadata fields that extensions declare", () => {
  let extended: TestServer
  beforeAll(async () => {
    extended = await startServer({
      registration: true,
      rateLimits: { registration: { max: 1000 } },
      extensions: [exampleExtension],
    })
  })
  afterAll(async () => {
    await extended.close()
  })
  const registerWith = (body: Record<string, unknown>) =>
    fetch(`${extended.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        redirect_uris: ["http://127.0.0.1/callback"],
        token_endpoint_auth_method: "none",
        ...body,
      }),
    })

  it("keeps and echoes exactly the declared fields, and the extension reads them on the client's token requests", async () => {
    const response = await registerWith({
      example_tier: "gold",
      example_limits: { level: 2 },
      example_undeclared: true,
      dpop_bound_access_tokens: true,
    })
    expect(response.status).toBe(201)
    const body = (await response.json()) as Record<string, unknown>
    expect(body).toMatchObject({ example_tier: "gold", example_limits: { level: 2 } })
    expect("example_undeclared" in body).toBe(false)
    expect("dpop_bound_access_tokens" in body).toBe(false)
    expect("extension_metadata" in body).toBe(false)
    const clientId = body.client_id as string
    const { code, verifier } = await obtainCode(extended, {
      client_id: clientId,
      redirect_uri: "http://127.0.0.1:5052/callback",
    })
    const token = await tokenRequest(extended, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: "http://127.0.0.1:5052/callback",
    })
    expect(token.status).toBe(200)
    expect(token.headers.get("example-tier")).toBe("gold")
  })

  it("a client without them registers as before", async () => {
    const response = await registerWith({ client_name: "Plain" })
    expect(response.status).toBe(201)
    const body = (await response.json()) as Record<string, unknown>
    expect(Object.keys(body).filter((k) => k.startsWith("example_"))).toEqual([])
  })

  it("refuses a value the declaring extension's schema refuses: 400 invalid_client_metadata naming the field", async () => {
    const cases: ReadonlyArray<[Record<string, unknown>, string]> = [
      [{ example_tier: "bronze" }, "example_tier must be gold or silver"],
      [{ example_tier: null }, "example_tier must be gold or silver"],
      [{ example_limits: 3 }, "example_limits must be an object"],
      [{ example_limits: { level: "high" } }, "example_limits.level must be a number"],
    ]
    for (const [body, description] of cases) {
      await expectOAuthError(await registerWith(body), 400, "invalid_client_metadata", description)
    }
  })
})

describe("extension grant types in dynamic registration", () => {
  const answer = (context: GrantContext) =>
    context.issue({ subject: "-", clientId: context.client?.client_id ?? "", resource: MCP, scope: "" })
  const grants: AuthorizationServerExtension = {
    id: "example.com/grants",
    grants: [
      { grantType: "urn:example:open", clientAuthentication: "required", dynamicRegistration: true, handle: answer },
      { grantType: "urn:example:operator-only", clientAuthentication: "required", handle: answer },
    ],
  }
  let served: TestServer
  beforeAll(async () => {
    served = await startServer({
      registration: true,
      rateLimits: { registration: { max: 1000 } },
      extensions: [grants],
    })
  })
  afterAll(async () => {
    await served.close()
  })
  const registerWith = (grantTypes: ReadonlyArray<string>) =>
    fetch(`${served.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        redirect_uris: [],
        response_types: [],
        grant_types: grantTypes,
        token_endpoint_auth_method: "none",
      }),
    })

  it("are registered when the grant allows it, and refused when an operator must register the client", async () => {
    const open = await registerWith(["urn:example:open", "refresh_token"])
    expect(open.status).toBe(201)
    expect(((await open.json()) as { grant_types: unknown }).grant_types).toEqual(["urn:example:open", "refresh_token"])
    await expectOAuthError(
      await registerWith(["urn:example:operator-only"]),
      400,
      "invalid_client_metadata",
      /^grant_type urn:example:operator-only is not supported$/,
    )
    await expectOAuthError(
      await registerWith(["client_credentials"]),
      400,
      "invalid_client_metadata",
      /^grant_type client_credentials is not supported$/,
    )
  })
})
