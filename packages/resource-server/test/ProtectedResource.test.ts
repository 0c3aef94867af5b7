import { request as httpRequest } from "node:http"
import { it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect } from "vitest"
import { Descriptions } from "../src/internal/bearer.js"
import { bodyTokenDescription, insufficientDescription, queryTokenDescription } from "../src/internal/challenge.js"
import { descriptions } from "../src/internal/reasons.js"
import {
  createProtectedResource,
  InvalidConfiguration,
  ProtectedResource,
  type ProtectedResourceOptions,
  type ProtectedResourceService,
  Unauthorized,
} from "../src/ProtectedResource.js"
import { custom, jwt, TokenVerifier } from "../src/TokenVerifier.js"
import type { VerifiedToken } from "../src/VerifiedToken.js"
import { makeKey, mint, now, type SigningKey, startJwks, startWebServer, unsecured } from "./helpers.js"

const ISSUER = "https://as.example.com"

type Server = Awaited<ReturnType<typeof startWebServer>>
type Jwks = Awaited<ReturnType<typeof startJwks>>

let server: Server
let jwks: Jwks
let key: SigningKey
let resource: string
let metadataUrl: string
let protectedResource: ProtectedResourceService

const echo = (request: Request, auth: { token: VerifiedToken }) =>
  request.text().then((body) =>
    Response.json({
      subject: auth.token.subject,
      clientId: auth.token.clientId,
      scopes: auth.token.scopes,
      body,
    }),
  )

const protectWith = (options: Partial<ProtectedResourceOptions> = {}): ProtectedResourceService => {
  const h = createProtectedResource({
    resource,
    authorizationServers: [ISSUER],
    verifier: jwt({ jwksUri: jwks.url, jwksCooldownMs: 60_000 }),
    scopesSupported: ["mcp:tools", "profile"],
    requiredScopes: ["mcp:tools"],
    ...options,
  })
  server.setHandler(h.protect(echo))
  return h
}

const claims = (extra: Record<string, unknown> = {}) => ({
  iss: ISSUER,
  aud: resource,
  sub: "user-1",
  client_id: "client-1",
  scope: "mcp:tools profile",
  iat: now(),
  exp: now() + 600,
  jti: crypto.randomUUID(),
  ...extra,
})

const get = (headers: Record<string, string> = {}, path = "/mcp") => fetch(`${server.origin}${path}`, { headers })

const rpc = (body: string, headers: Record<string, string> = {}) =>
  fetch(`${server.origin}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  })

const challenge = (params: string) => `Bearer resource_metadata="${metadataUrl}"${params}`

beforeAll(async () => {
  key = await makeKey("k1")
  jwks = await startJwks([key])
  server = await startWebServer()
  resource = `${server.origin}/mcp`
  metadataUrl = `${server.origin}/.well-known/oauth-protected-resource/mcp`
  protectedResource = protectWith()
})

afterAll(async () => {
  await server.close()
  await jwks.close()
})

describe("protected resource metadata", () => {
  it.each(["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])(
    "is served at %s",
    async (path) => {
      const response = await get({}, path)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("application/json")
      expect(response.headers.get("cache-control")).toBe("public, max-age=3600")
      expect(response.headers.get("access-control-allow-origin")).toBe("*")
      expect(await response.json()).toEqual({
        resource,
        authorization_servers: [ISSUER],
        scopes_supported: ["mcp:tools", "profile"],
        bearer_methods_supported: ["header"],
      })
    },
  )

  it("is served at the advertised URL, which the challenges name, with the optional RFC 9728 fields", async () => {
    const h = protectWith({
      resourceMetadataUrl: `${server.origin}/meta/prm.json`,
      resourceName: "Notes",
      resourceDocumentation: "https://docs.example.com/notes",
      resourcePolicyUri: "https://example.com/policy",
      resourceTosUri: "https://example.com/tos",
      additionalMetadata: { resource_signing_alg_values_supported: ["ES256"] },
      metadataMaxAgeSeconds: 60,
    })
    try {
      const response = await get({}, "/meta/prm.json")
      expect(response.status).toBe(200)
      expect(response.headers.get("cache-control")).toBe("public, max-age=60")
      expect(await response.json()).toEqual({
        resource,
        authorization_servers: [ISSUER],
        scopes_supported: ["mcp:tools", "profile"],
        bearer_methods_supported: ["header"],
        resource_name: "Notes",
        resource_documentation: "https://docs.example.com/notes",
        resource_policy_uri: "https://example.com/policy",
        resource_tos_uri: "https://example.com/tos",
        resource_signing_alg_values_supported: ["ES256"],
      })
      const unauthenticated = await get()
      expect(unauthenticated.headers.get("www-authenticate")).toBe(
        `Bearer resource_metadata="${server.origin}/meta/prm.json", scope="mcp:tools"`,
      )
      expect(h.metadataPaths).toEqual([
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        "/meta/prm.json",
      ])
    } finally {
      server.setHandler(protectedResource.protect(echo))
    }
  })

  it("answers HEAD, CORS preflight and refuses other methods", async () => {
    const path = `${server.origin}/.well-known/oauth-protected-resource/mcp`
    const head = await fetch(path, { method: "HEAD" })
    expect(head.status).toBe(200)
    expect(await head.text()).toBe("")
    const options = await fetch(path, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "GET" },
    })
    expect(options.status).toBe(204)
    expect(options.headers.get("access-control-allow-origin")).toBe("*")
    expect(options.headers.get("access-control-allow-methods")).toBe("GET, HEAD, OPTIONS")
    const post = await fetch(path, { method: "POST" })
    expect(post.status).toBe(405)
    expect(post.headers.get("allow")).toBe("GET, HEAD, OPTIONS")
  })

  it("root-path resources have only the root well-known URL", () => {
    const h = createProtectedResource({
      resource: "https://mcp.example.com/",
      authorizationServers: [ISSUER],
      verifier: custom(() => null),
    })
    expect(h.resource).toBe("https://mcp.example.com")
    expect(h.resourceMetadataUrl).toBe("https://mcp.example.com/.well-known/oauth-protected-resource")
    expect(h.metadataPaths).toEqual(["/.well-known/oauth-protected-resource"])
  })
})

describe("configuration", () => {
  const base = { resource: "https://mcp.example.com/mcp", verifier: custom(() => null) }
  it.each([
    [{ ...base, authorizationServers: [] }, "authorizationServers must name at least one authorization server"],
    [
      { ...base, authorizationServers: ["http://as.example.com"] },
      "authorizationServers must use https: http://as.example.com",
    ],
    [
      { ...base, authorizationServers: ["https://as.example.com?x=1"] },
      "authorizationServers has an issuer with a query or fragment: https://as.example.com?x=1",
    ],
    [{ ...base, authorizationServers: ["not a url"] }, "authorizationServers has a non-URL: not a url"],
    [
      { ...base, authorizationServers: [ISSUER], scopesSupported: ["a b"] },
      'scopesSupported has an invalid scope token: "a b"',
    ],
    [
      { ...base, authorizationServers: [ISSUER], toolScopes: { write: ['no"quote'] } },
      'toolScopes.write has an invalid scope token: "no\\"quote"',
    ],
    [
      { ...base, authorizationServers: [ISSUER], scopeStrategy: "lavish" as "minimal" },
      "scopeStrategy must be minimal, recommended or extended, not lavish",
    ],
    [{ ...base, authorizationServers: [ISSUER], maxBodyBytes: -1 }, "maxBodyBytes must be a non-negative integer"],
  ])("refuses %j", (options, problem) => {
    let thrown: unknown
    try {
      createProtectedResource(options as ProtectedResourceOptions)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(InvalidConfiguration)
    expect((thrown as InvalidConfiguration).message).toBe(`Invalid protected resource configuration: ${problem}`)
  })

  it("refuses a resource with a fragment", () => {
    expect(() =>
      createProtectedResource({ ...base, resource: "https://mcp.example.com/mcp#x", authorizationServers: [ISSUER] }),
    ).toThrow(/^Invalid protected resource configuration: resource is not a canonical server URI/)
  })

  it("allows http authorization servers on loopback, and elsewhere only when told to", () => {
    expect(() => createProtectedResource({ ...base, authorizationServers: ["http://127.0.0.1:9000"] })).not.toThrow()
    expect(() =>
      createProtectedResource({
        ...base,
        authorizationServers: ["http://as.internal"],
        allowInsecureAuthorizationServers: true,
      }),
    ).not.toThrow()
  })
})

describe("bad input", () => {
  it("no Authorization header: 401 without error code", async () => {
    const response = await get()
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(challenge(`, scope="mcp:tools"`))
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(await response.text()).toBe("")
  })

  it("Bearer with no token: 401 without error code", async () => {
    for (const value of ["Bearer", "Bearer   "]) {
      const response = await get({ authorization: value })
      expect(response.status).toBe(401)
      expect(response.headers.get("www-authenticate")).toBe(challenge(`, scope="mcp:tools"`))
    }
  })

  it("another scheme: 401 without error code", async () => {
    const response = await get({ authorization: "Basic dXNlcjpwYXNz" })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(challenge(`, scope="mcp:tools"`))
  })

  it("two tokens: 400 invalid_request", async () => {
    const token = await mint(key, claims())
    const response = await get({ authorization: `Bearer ${token} ${token}` })
    expect(response.status).toBe(400)
    expect(response.headers.get("www-authenticate")).toBe(
      challenge(`, error="invalid_request", error_description="${Descriptions.multipleTokens}"`),
    )
    expect(await response.json()).toEqual({ error: "invalid_request", error_description: Descriptions.multipleTokens })
  })

  it("two Authorization header lines: 400 invalid_request", async () => {
    const token = await mint(key, claims())
    const { status, header } = await new Promise<{ status: number; header: string | undefined }>((resolve, reject) => {
      const req = httpRequest(
        `${server.origin}/mcp`,
        {
          headers: [
            "host",
            `127.0.0.1:${server.port}`,
            "authorization",
            `Bearer ${token}`,
            "Authorization",
            `Bearer ${token}`,
          ],
        },
        (res) => {
          res.resume()
          resolve({ status: res.statusCode ?? 0, header: res.headers["www-authenticate"] })
        },
      )
      req.on("error", reject)
      req.end()
    })
    expect(status).toBe(400)
    expect(header).toBe(challenge(`, error="invalid_request", error_description="${Descriptions.multipleHeaders}"`))
    const joined = await get({ authorization: `Bearer ${token}, Bearer ${token}` })
    expect(joined.status).toBe(400)
    expect(joined.headers.get("www-authenticate")).toBe(
      challenge(`, error="invalid_request", error_description="${Descriptions.multipleHeaders}"`),
    )
  })

  it('lower-case "bearer" is accepted', async () => {
    const token = await mint(key, claims())
    const response = await get({ authorization: `bearer ${token}` })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      subject: "user-1",
      clientId: "client-1",
      scopes: ["mcp:tools", "profile"],
      body: "",
    })
  })

  it("token with illegal characters: 400 invalid_request", async () => {
    const response = await get({ authorization: 'Bearer abc"def' })
    expect(response.status).toBe(400)
    expect(response.headers.get("www-authenticate")).toBe(
      challenge(`, error="invalid_request", error_description="${Descriptions.illegalCharacters}"`),
    )
  })

  it("token in the query: 400 invalid_request, never used", async () => {
    const token = await mint(key, claims())
    for (const headers of [{}, { authorization: `Bearer ${token}` }]) {
      const response = await get(headers, `/mcp?access_token=${token}`)
      expect(response.status).toBe(400)
      expect(response.headers.get("www-authenticate")).toBe(
        challenge(`, error="invalid_request", error_description="${queryTokenDescription}"`),
      )
    }
  })

  it("token in a form body: 400 invalid_request, never used", async () => {
    const token = await mint(key, claims())
    const response = await fetch(`${server.origin}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `access_token=${token}`,
    })
    expect(response.status).toBe(400)
    expect(response.headers.get("www-authenticate")).toBe(
      challenge(`, error="invalid_request", error_description="${bodyTokenDescription}"`),
    )
  })

  it("a cached token does not bypass the header and body checks", async () => {
    const token = await mint(key, claims())
    expect((await get({ authorization: `Bearer ${token}` })).status).toBe(200)
    const joined = await get({ authorization: `Bearer ${token}, Bearer ${token}` })
    expect(joined.status).toBe(400)
    expect(joined.headers.get("www-authenticate")).toBe(
      challenge(`, error="invalid_request", error_description="${Descriptions.multipleHeaders}"`),
    )
    const form = await fetch(`${server.origin}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" },
      body: `access_token=${token}`,
    })
    expect(form.status).toBe(400)
    expect(form.headers.get("www-authenticate")).toBe(
      challenge(`, error="invalid_request", error_description="${bodyTokenDescription}"`),
    )
    expect((await get({ authorization: `bearer ${token}` })).status).toBe(200)
  })

  const invalidToken = (description: string) =>
    challenge(`, scope="mcp:tools", error="invalid_token", error_description="${description}"`)

  it.each([
    ["expired", () => mint(key, claims({ exp: now() - 120 })), descriptions.expired],
    ["not yet valid", () => mint(key, claims({ nbf: now() + 600 })), descriptions["not-yet-valid"]],
    ["wrong issuer", () => mint(key, claims({ iss: "https://evil.example.com" })), descriptions["wrong-issuer"]],
    [
      "wrong audience (another MCP server)",
      () => mint(key, claims({ aud: "https://other-mcp.example.com/mcp" })),
      descriptions["wrong-audience"],
    ],
    [
      "audience list without us",
      () => mint(key, claims({ aud: ["https://a.example.com", `${resource}/sub`] })),
      descriptions["wrong-audience"],
    ],
    ["alg none", () => Promise.resolve(unsecured(claims())), descriptions["algorithm-not-allowed"]],
    ["typ JWT instead of at+jwt", () => mint(key, claims(), { typ: "JWT" }), descriptions["wrong-type"]],
    ["no exp", () => mint(key, claims({ exp: undefined })), descriptions["missing-claim"]],
    ["garbage", () => Promise.resolve("not-a-jwt"), descriptions.malformed],
  ])("%s: 401 invalid_token", async (_name, token, description) => {
    const response = await get({ authorization: `Bearer ${await token()}` })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(invalidToken(description))
    expect(await response.json()).toEqual({ error: "invalid_token", error_description: description })
  })

  it("HS256 signed with the public key: 401 invalid_token", async () => {
    const { SignJWT } = await import("jose")
    const secret = new TextEncoder().encode(JSON.stringify(key.publicJwk))
    const token = await new SignJWT(claims())
      .setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: key.kid })
      .sign(secret)
    const response = await get({ authorization: `Bearer ${token}` })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(invalidToken(descriptions["algorithm-not-allowed"]))
  })

  it("signature by a different key under a known kid: 401 invalid_token", async () => {
    const impostor = await makeKey("k1")
    const response = await get({ authorization: `Bearer ${await mint(impostor, claims())}` })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(invalidToken(descriptions["bad-signature"]))
  })

  it("audience compared canonically: upper-case scheme and host are the same resource", async () => {
    const shouting = resource.replace("http://127.0.0.1", "HTTP://127.0.0.1")
    const response = await get({ authorization: `Bearer ${await mint(key, claims({ aud: ["x", shouting] }))}` })
    expect(response.status).toBe(200)
  })
})

describe("per-operation scopes from the JSON-RPC body", () => {
  const call = (name: string) =>
    JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: { text: "hi" } } })

  const withScopes = (strategy?: "minimal" | "recommended" | "extended") =>
    protectWith({
      requiredScopes: [],
      methodScopes: { "tools/call": ["mcp:tools"], "resources/read": ["files:read"] },
      toolScopes: { write_note: ["notes:write"] },
      relatedScopes: { "notes:write": ["notes:read"] },
      ...(strategy === undefined ? {} : { scopeStrategy: strategy }),
    })

  afterAll(() => {
    server.setHandler(protectedResource.protect(echo))
  })

  it("passes when the token has the tool's scope, and the handler still reads the body", async () => {
    withScopes()
    const token = await mint(key, claims({ scope: "mcp:tools notes:write" }))
    const response = await rpc(call("write_note"), { authorization: `Bearer ${token}` })
    expect(response.status).toBe(200)
    expect((await response.json()).body).toBe(call("write_note"))
  })

  it.each([
    ["minimal", `scope="mcp:tools notes:write"`],
    ["recommended", `scope="mcp:tools profile notes:write"`],
    ["extended", `scope="mcp:tools profile notes:write notes:read"`],
  ] as const)("403 insufficient_scope, %s strategy", async (strategy, scope) => {
    withScopes(strategy)
    const token = await mint(key, claims({ scope: "mcp:tools profile unrelated" }))
    const response = await rpc(call("write_note"), { authorization: `Bearer ${token}` })
    expect(response.status).toBe(403)
    expect(response.headers.get("www-authenticate")).toBe(
      challenge(`, ${scope}, error="insufficient_scope", error_description="${insufficientDescription}"`),
    )
    expect(await response.json()).toEqual({ error: "insufficient_scope", error_description: insufficientDescription })
  })

  it("the 401 challenge names the scopes of the requested operation", async () => {
    withScopes()
    const response = await rpc(call("write_note"))
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(challenge(`, scope="mcp:tools notes:write"`))
  })

  it("an anonymous request's body is read for the challenge only when small and declared", async () => {
    withScopes()
    const big = JSON.stringify({ ...JSON.parse(call("write_note")), padding: "x".repeat(70 * 1024) })
    const response = await rpc(big)
    expect(response.status).toBe(401)
    // Not inspected: the challenge falls back to scopes_supported.
    expect(response.headers.get("www-authenticate")).toBe(challenge(`, scope="mcp:tools profile"`))
    const token = await mint(key, claims({ scope: "mcp:tools" }))
    const authenticated = await rpc(big, { authorization: `Bearer ${token}` })
    expect(authenticated.status).toBe(403)
    expect(authenticated.headers.get("www-authenticate")).toContain(`scope="mcp:tools notes:write"`)
  })

  it("a batch needs the union of its operations", async () => {
    withScopes()
    const token = await mint(key, claims({ scope: "mcp:tools notes:write" }))
    const batch = `[${call("write_note")},{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"x"}}]`
    const response = await rpc(batch, { authorization: `Bearer ${token}` })
    expect(response.status).toBe(403)
    expect(response.headers.get("www-authenticate")).toBe(
      challenge(
        `, scope="mcp:tools notes:write files:read", error="insufficient_scope", error_description="${insufficientDescription}"`,
      ),
    )
  })

  it("methods without a requirement pass with any valid token", async () => {
    withScopes()
    const token = await mint(key, claims({ scope: "" }))
    const response = await rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, { authorization: `Bearer ${token}` })
    expect(response.status).toBe(200)
  })

  it("malformed JSON: 400 JSON-RPC parse error for an authenticated caller, 401 otherwise", async () => {
    withScopes()
    const token = await mint(key, claims())
    const response = await rpc(`{"jsonrpc":`, { authorization: `Bearer ${token}` })
    expect(response.status).toBe(400)
    expect(response.headers.get("www-authenticate")).toBeNull()
    expect(await response.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: "Parse error: the request body is not valid JSON" },
    })
    const anonymous = await rpc(`{"jsonrpc":`)
    expect(anonymous.status).toBe(401)
    // The operations are unknown, so the challenge falls back to scopes_supported.
    expect(anonymous.headers.get("www-authenticate")).toBe(challenge(`, scope="mcp:tools profile"`))
    const invalid = await rpc(`{"jsonrpc":`, { authorization: "Bearer nope" })
    expect(invalid.status).toBe(401)
    expect(invalid.headers.get("www-authenticate")).toBe(
      challenge(`, scope="mcp:tools profile", error="invalid_token", error_description="${descriptions.malformed}"`),
    )
  })

  it("JSON that is not a JSON-RPC message: 400 invalid request", async () => {
    withScopes()
    const token = await mint(key, claims())
    for (const body of ["42", "[]", `{"method":7}`]) {
      const response = await rpc(body, { authorization: `Bearer ${token}` })
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { code: number } }).error.code).toBe(-32600)
    }
  })

  it("insufficientScope builds the run-time 403 with the configured strategy", () => {
    const h = withScopes()
    const rejection = h.insufficientScope({ scopes: ["mcp:tools"], audience: [resource], claims: {} }, ["notes:write"])
    expect(rejection.status).toBe(403)
    expect(rejection.headers["www-authenticate"]).toBe(
      challenge(
        `, scope="mcp:tools notes:write", error="insufficient_scope", error_description="${insufficientDescription}"`,
      ),
    )
  })
})

describe("body limit (maxBodyBytes)", () => {
  const LIMIT = 1000
  const tooLarge = {
    jsonrpc: "2.0",
    id: null,
    error: { code: -32600, message: "the request body exceeds the limit of 1000 bytes" },
  }
  const big = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", padding: "x".repeat(LIMIT) })
  const streamed = (text: string): ReadableStream<Uint8Array> => {
    const bytes = new TextEncoder().encode(text)
    return new ReadableStream({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 300) controller.enqueue(bytes.slice(i, i + 300))
        controller.close()
      },
    })
  }
  const chunkedRpc = (text: string, headers: Record<string, string>) =>
    fetch(`${server.origin}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: streamed(text),
      duplex: "half",
    } as RequestInit)
  let handled = 0
  const counting = (request: Request, auth: { token: VerifiedToken }) => {
    handled++
    return echo(request, auth)
  }
  const limited = (withOperations: boolean) => {
    const h = createProtectedResource({
      resource,
      authorizationServers: [ISSUER],
      verifier: jwt({ jwksUri: jwks.url, jwksCooldownMs: 60_000 }),
      scopesSupported: ["mcp:tools", "profile"],
      requiredScopes: ["mcp:tools"],
      maxBodyBytes: LIMIT,
      ...(withOperations ? { toolScopes: { write_note: ["notes:write"] } } : {}),
    })
    server.setHandler(h.protect(counting))
    handled = 0
    return h
  }
  afterAll(() => {
    server.setHandler(protectedResource.protect(echo))
  })

  it.each([false, true])("a declared length over the limit: 413 before the handler (operations: %s)", async (ops) => {
    limited(ops)
    const token = await mint(key, claims())
    const response = await rpc(big, { authorization: `Bearer ${token}` })
    expect(response.status).toBe(413)
    expect(response.headers.get("connection")).toBe("close")
    expect(await response.json()).toEqual(tooLarge)
    expect(handled).toBe(0)
  })

  it.each([false, true])("a chunked body growing past the limit: 413 (operations: %s)", async (ops) => {
    limited(ops)
    const token = await mint(key, claims())
    const response = await chunkedRpc(big, { authorization: `Bearer ${token}` })
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual(tooLarge)
  })

  it("a body within the limit reaches the handler whole, chunked or not", async () => {
    limited(true)
    const token = await mint(key, claims())
    const small = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
    for (const response of [
      await rpc(small, { authorization: `Bearer ${token}` }),
      await chunkedRpc(small, { authorization: `Bearer ${token}` }),
    ]) {
      expect(response.status).toBe(200)
      expect((await response.json()).body).toBe(small)
    }
  })

  it("an anonymous caller's large body is not read: 401", async () => {
    limited(true)
    const response = await rpc(big)
    expect(response.status).toBe(401)
  })

  it("the Web face applies it without node:http in between", async () => {
    const h = limited(false)
    const token = await mint(key, claims())
    const response = await h.protect(counting)(
      new Request(resource, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: streamed(big),
        duplex: "half",
      } as RequestInit),
    )
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual(tooLarge)
    expect(h.maxBodyBytes).toBe(LIMIT)
  })
})

describe("CORS", () => {
  it("refusals expose WWW-Authenticate to browser clients", async () => {
    const response = await get({ origin: "https://app.example" })
    expect(response.headers.get("access-control-allow-origin")).toBe("*")
    expect(response.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate, Mcp-Session-Id")
  })

  it("answers preflights without authentication", async () => {
    const response = await fetch(`${server.origin}/mcp`, {
      method: "OPTIONS",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    })
    expect(response.status).toBe(204)
    expect(response.headers.get("access-control-allow-origin")).toBe("*")
    expect(response.headers.get("access-control-allow-headers")).toBe("authorization, content-type")
    expect(response.headers.get("access-control-allow-methods")).toBe("GET, POST, DELETE, OPTIONS")
  })

  it("adds CORS headers to successful responses of browser requests", async () => {
    const token = await mint(key, claims())
    const response = await get({ origin: "https://app.example", authorization: `Bearer ${token}` })
    expect(response.status).toBe(200)
    expect(response.headers.get("access-control-allow-origin")).toBe("*")
  })

  it("with an origin list, only listed origins are allowed", async () => {
    protectWith({ cors: { origins: ["https://good.example"] } })
    try {
      const good = await get({ origin: "https://good.example" })
      expect(good.headers.get("access-control-allow-origin")).toBe("https://good.example")
      expect(good.headers.get("vary")).toBe("Origin")
      const bad = await get({ origin: "https://bad.example" })
      expect(bad.status).toBe(401)
      expect(bad.headers.get("access-control-allow-origin")).toBeNull()
    } finally {
      server.setHandler(protectedResource.protect(echo))
    }
  })
})

describe("verified-token cache", () => {
  const counting = (token: Partial<VerifiedToken> = {}) => {
    const calls: Array<string> = []
    const h = createProtectedResource({
      resource,
      authorizationServers: [ISSUER],
      cache: { maxEntries: 2 },
      verifier: custom((t) => {
        calls.push(t)
        return { scopes: [], audience: [resource], claims: {}, expiresAt: now() + 600, ...token }
      }),
    })
    return { h, calls }
  }
  const req = (token: string) => new Request(resource, { headers: { authorization: `Bearer ${token}` } })

  it("verifies a repeated token once, re-verifies after eviction", async () => {
    const { h, calls } = counting()
    expect((await h.authenticate(req("a"))).ok).toBe(true)
    expect((await h.authenticate(req("a"))).ok).toBe(true)
    expect(calls).toEqual(["a"])
    await h.authenticate(req("b"))
    await h.authenticate(req("c"))
    await h.authenticate(req("a"))
    expect(calls).toEqual(["a", "b", "c", "a"])
  })

  it("shares one verification between concurrent requests with the same token", async () => {
    const { h, calls } = counting()
    await Promise.all([h.authenticate(req("z")), h.authenticate(req("z")), h.authenticate(req("z"))])
    expect(calls).toEqual(["z"])
  })

  it("never caches a token past its expiry, and re-checks expiry and audience of custom verifiers", async () => {
    const expired = counting({ expiresAt: now() - 120 })
    const first = await expired.h.authenticate(req("old"))
    expect(first.ok).toBe(false)
    if (!first.ok) {
      expect(first.response.status).toBe(401)
      expect(first.response.headers.get("www-authenticate")).toContain(`error_description="${descriptions.expired}"`)
    }
    await expired.h.authenticate(req("old"))
    expect(expired.calls).toEqual(["old", "old"])
    const foreign = counting({ audience: ["https://other.example.com"] })
    const result = await foreign.h.authenticate(req("t"))
    expect(result.ok).toBe(false)
    if (!result.ok) {
      expect(result.response.headers.get("www-authenticate")).toContain(
        `error_description="${descriptions["wrong-audience"]}"`,
      )
    }
  })

  it("a custom verifier that throws fails closed with 401", async () => {
    const h = createProtectedResource({
      resource,
      authorizationServers: [ISSUER],
      verifier: custom(() => {
        throw new Error("database down")
      }),
    })
    const result = await h.authenticate(req("t"))
    expect(result.ok).toBe(false)
    if (!result.ok) {
      expect(result.response.status).toBe(401)
      expect(result.response.headers.get("www-authenticate")).toBe(
        challenge(`, error="invalid_token", error_description="The access token could not be verified"`),
      )
    }
  })
})

const EFFECT_RESOURCE = "https://mcp.example.com/mcp"

describe("Effect face", () => {
  it("ProtectedResource.layer over a TokenVerifier layer; authenticateEffect fails with Unauthorized", async () => {
    const layer = ProtectedResource.layer({ resource: EFFECT_RESOURCE, authorizationServers: [ISSUER] }).pipe(
      Layer.provide(
        TokenVerifier.layerCustom((token) =>
          token === "good" ? { scopes: ["a"], audience: [EFFECT_RESOURCE], claims: {}, subject: "s" } : null,
        ),
      ),
    )
    const program = Effect.gen(function* () {
      const pr = yield* ProtectedResource
      const ok = yield* pr.authenticateEffect({
        method: "GET",
        url: EFFECT_RESOURCE,
        authorization: "Bearer good",
        contentType: null,
      })
      const bad = yield* Effect.flip(
        pr.authenticateEffect({ method: "GET", url: EFFECT_RESOURCE, authorization: "Bearer bad", contentType: null }),
      )
      return { ok, bad }
    })
    const { ok, bad } = await Effect.runPromise(program.pipe(Effect.provide(layer)))
    expect(ok.token.subject).toBe("s")
    expect(ok.accessToken).toBe("good")
    expect(bad).toBeInstanceOf(Unauthorized)
    expect(bad.message).toBe("401 invalid_token: The access token was rejected")
  })

  it("the layer fails with InvalidConfiguration when there is no authorization server", async () => {
    const layer = ProtectedResource.layer({ resource: EFFECT_RESOURCE, authorizationServers: [] }).pipe(
      Layer.provide(TokenVerifier.layerCustom(() => null)),
    )
    const error = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(layer))))
    expect(error._tag).toBe("InvalidConfiguration")
    expect(error.message).toBe(
      "Invalid protected resource configuration: authorizationServers must name at least one authorization server",
    )
  })

  it.effect(
    "the verified-token cache and the expiry re-check read the Clock of the context the layer is built in",
    () =>
      Effect.gen(function* () {
        let verifications = 0
        const layer = ProtectedResource.layer({
          resource: EFFECT_RESOURCE,
          authorizationServers: [ISSUER],
          clockSkewSeconds: 0,
        }).pipe(
          Layer.provide(
            TokenVerifier.layerCustom(() => {
              verifications++
              return { scopes: [], audience: [EFFECT_RESOURCE], claims: {}, expiresAt: 100 }
            }),
          ),
        )
        const pr = yield* ProtectedResource.pipe(Effect.provide(layer))
        const request = { method: "GET", url: EFFECT_RESOURCE, authorization: "Bearer t", contentType: null }
        yield* TestClock.setTime(99_000)
        expect((yield* pr.authenticateEffect(request)).token.expiresAt).toBe(100)
        expect((yield* pr.authenticateEffect(request)).token.expiresAt).toBe(100)
        expect(verifications).toBe(1)
        // At exp the cache entry is gone and the verifier's answer is refused as expired by the protected resource.
        yield* TestClock.setTime(100_000)
        const refused = yield* Effect.flip(pr.authenticateEffect(request))
        expect(refused.rejection.description).toBe(descriptions.expired)
        expect(verifications).toBe(2)
      }),
  )
})
