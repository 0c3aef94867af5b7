import { createServer } from "node:http"
import { createAuthClient, isAuthError } from "@keyway/client"
import { Grant, Options } from "@keyway/core"
import { closing, listening, thrownBy } from "@keyway/testing"
import { decodeJwt, generateKeyPair, type JWTPayload } from "jose"
import { afterEach, describe, expect, it } from "vitest"
// The protected notes stack the extensions' tests share.
import { call, SECRET, type Stack, startStack } from "../../client-credentials/test/support/stack.js"
import { ID_JAG_PROFILE, identityAssertionGrant } from "../src/authorization-server.js"
import { enterpriseManaged } from "../src/client.js"
import { EXTENSION_ID } from "../src/index.js"
import { startIdp, type TestIdp } from "./support/idp.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const clients = [
  { clientId: "chat", clientSecret: SECRET, redirectUris: [], grantTypes: [Grant.JWT_BEARER] },
  { clientId: "other", clientSecret: SECRET, redirectUris: [], grantTypes: [Grant.JWT_BEARER] },
]

const setup = async (
  policy: {
    clients?: Array<string>
    resources?: (mcp: readonly [string, string]) => Array<string>
    scope?: string
    jwksUri?: (idp: TestIdp) => string
  } = {},
  extra: { lifetimes?: { accessToken: number } } = {},
  // The test identity provider serves its keys over http on loopback.
  development: { allowHttpLoopbackJwks?: boolean } = { allowHttpLoopbackJwks: true },
): Promise<{ idp: TestIdp; s: Stack }> => {
  const idp = await startIdp({ clientId: "chat" })
  cleanups.push(idp.close)
  const s = await startStack((mcp) => ({
    clients,
    ...extra,
    extensions: [
      identityAssertionGrant({
        development,
        warn: () => {},
        identityProviders: [
          {
            issuer: idp.issuer,
            jwksUri: policy.jwksUri?.(idp) ?? `${idp.issuer}/jwks`,
            ...(policy.clients === undefined ? {} : { clients: policy.clients }),
            ...(policy.resources === undefined ? {} : { resources: policy.resources(mcp) }),
            ...(policy.scope === undefined ? {} : { scope: policy.scope }),
          },
        ],
      }),
    ],
  }))
  cleanups.push(s.close)
  return { idp, s }
}

const client = (
  idp: TestIdp,
  s: Stack,
  extra: Parameters<typeof createAuthClient>[0] = {},
  seen?: Array<JWTPayload>,
) => {
  const auth = createAuthClient({
    extensions: [
      enterpriseManaged({
        identityProvider: { issuer: idp.issuer, clientId: "chat-at-idp", clientSecret: "idp-secret" },
        idToken: () => "alice-id-token",
        clients: { issuer: s.issuer, clientId: "chat", clientSecret: SECRET },
        ...(seen === undefined ? {} : { onAssertion: (claims: JWTPayload) => void seen.push(claims) }),
      }),
    ],
    ...extra,
  })
  cleanups.push(() => auth.dispose())
  return auth
}

/** A raw JWT bearer request as `chat` (client_secret_basic). */
const present = async (s: Stack, assertion: string, extra: Record<string, string> = {}, clientId = "chat") => {
  const response = await fetch(`${s.issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `Basic ${btoa(`${clientId}:${SECRET}`)}`,
    },
    body: new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion, ...extra }),
  })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

const now = () => Math.floor(Date.now() / 1000)
const claimsFor = (idp: TestIdp, s: Stack, extra: Record<string, unknown> = {}): JWTPayload => ({
  iss: idp.issuer,
  sub: "alice",
  aud: s.issuer,
  resource: s.mcp[0],
  client_id: "chat",
  jti: crypto.randomUUID(),
  iat: now(),
  exp: now() + 120,
  scope: "notes:read",
  ...extra,
})

describe("enterprise-managed authorization: Keyway's client, an identity provider, Keyway's authorization server", () => {
  it("the client exchanges the ID token and presents the assertion; the MCP server sees the user and the client", async () => {
    const { idp, s } = await setup()
    const seen: Array<JWTPayload> = []
    const auth = client(idp, s, {}, seen)
    const response = await call(auth.fetch, s.mcp[0], "tools/list")
    expect(response.status).toBe(200)
    const body = (await response.json()) as { result: Record<string, unknown> }
    expect(body.result).toEqual({ subject: "user:alice-id-token", clientId: "chat", scopes: ["notes:read"] })

    // The exchange: the ID token for an ID-JAG, audience = the validated issuer, resource as the metadata gives it.
    expect(idp.exchanges).toHaveLength(1)
    const exchange = idp.exchanges[0]!
    expect(Object.fromEntries(exchange.form)).toEqual({
      grant_type: Grant.TOKEN_EXCHANGE,
      requested_token_type: Grant.ID_JAG_TOKEN_TYPE,
      subject_token: "alice-id-token",
      subject_token_type: Grant.ID_TOKEN_TYPE,
      audience: s.issuer,
      resource: s.mcp[0],
      // The scope the MCP server's challenge asked for.
      scope: "notes:read",
    })
    expect(exchange.authorization).toBe(`Basic ${btoa("chat-at-idp:idp-secret")}`)
    // The JWT bearer grant, authenticated as the client at the MCP authorization server; no registration.
    expect(s.tokenRequests).toHaveLength(1)
    const grant = s.tokenRequests[0]!
    expect(grant.form.get("grant_type")).toBe(Grant.JWT_BEARER)
    expect(grant.form.get("assertion")).toMatch(/^ey/)
    expect(grant.authorization).toBe(`Basic ${btoa(`chat:${SECRET}`)}`)
    expect(seen.map((c) => [c.sub, c.client_id, c.resource])).toEqual([["user:alice-id-token", "chat", s.mcp[0]]])
  })

  it("the authorization server advertises the grant profile; the client does not require it", async () => {
    const { s } = await setup()
    const metadata = (await (await fetch(`${s.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(metadata.authorization_grant_profiles_supported).toEqual([ID_JAG_PROFILE])
    expect(metadata.grant_types_supported).toContain(Grant.JWT_BEARER)
    expect(EXTENSION_ID).toBe("io.modelcontextprotocol/enterprise-managed-authorization")
  })

  it("tokens are obtained again, without a person, before they expire: a new exchange and a new assertion", async () => {
    const { idp, s } = await setup({}, { lifetimes: { accessToken: 60 } })
    const auth = client(idp, s, { refreshSkewSeconds: 120 })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    // Every token is within the skew of its expiry at once, so each use obtains a new one: one exchange and one
    // fresh assertion per JWT bearer request, never an assertion presented twice.
    expect(s.tokenRequests.length).toBeGreaterThanOrEqual(2)
    expect(idp.exchanges).toHaveLength(s.tokenRequests.length)
    const assertions = s.tokenRequests.map((r) => r.form.get("assertion"))
    expect(new Set(assertions).size).toBe(assertions.length)
  })

  it("an assertion refused by the authorization server is not presented again; the failure is typed", async () => {
    const { idp, s } = await setup({ clients: ["other"] })
    const auth = client(idp, s)
    const failure = await call(auth.fetch, s.mcp[0], "tools/list").catch((e: unknown) => e)
    expect(isAuthError(failure) && [failure.step, failure.reason, failure.error]).toEqual([
      "token",
      "invalid-grant",
      "invalid_grant",
    ])
    expect((failure as Error).message).toContain(`${idp.issuer} may not grant access to the client chat`)
    await call(auth.fetch, s.mcp[0], "tools/list").catch(() => undefined)
    expect(idp.exchanges).toHaveLength(2)
  })

  it("a token exchange answer that is not an ID-JAG is refused (issued_token_type)", async () => {
    const { idp, s } = await setup()
    idp.answer = async () =>
      Response.json({
        access_token: "x.y.z",
        issued_token_type: "urn:ietf:params:oauth:token-type:access_token",
        token_type: "Bearer",
      })
    const failure = await call(client(idp, s).fetch, s.mcp[0], "tools/list").catch((e: unknown) => e)
    expect(isAuthError(failure) && [failure.reason, failure.message]).toEqual([
      "unsupported-token-type",
      `the identity provider's token exchange: the token response from ${idp.issuer}/token has issued_token_type "urn:ietf:params:oauth:token-type:access_token", not ${Grant.ID_JAG_TOKEN_TYPE}`,
    ])
    expect(s.tokenRequests).toHaveLength(0)
  })

  it("the identity provider's metadata passes core's checks: schema, exact issuer, token endpoint", async () => {
    const { idp, s } = await setup()
    // A stand-in for the identity provider's metadata, one document at a time; nothing at the other locations.
    let document: unknown
    const server = createServer((req, res) => {
      if (req.url !== "/.well-known/oauth-authorization-server" || document === undefined) {
        res.writeHead(404, { "content-type": "text/plain" }).end("Not Found")
        return
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(document))
    })
    const issuer = await listening(server)
    cleanups.push(() => closing(server))
    const failureWith = async (metadata: unknown) => {
      document = metadata
      const auth = createAuthClient({
        extensions: [
          enterpriseManaged({
            identityProvider: { issuer, clientId: "chat-at-idp", clientSecret: "idp-secret" },
            idToken: () => "alice-id-token",
            clients: { issuer: s.issuer, clientId: "chat", clientSecret: SECRET },
          }),
        ],
      })
      cleanups.push(() => auth.dispose())
      const failure = await call(auth.fetch, s.mcp[0], "tools/list").catch((e: unknown) => e)
      return isAuthError(failure) ? [failure.step, failure.reason, failure.url, failure.message] : failure
    }
    const at = `${issuer}/.well-known/oauth-authorization-server`
    expect(await failureWith({ issuer: `${issuer}/`, token_endpoint: `${issuer}/token` })).toEqual([
      "token",
      "issuer-mismatch",
      at,
      `the identity provider ${issuer}: the authorization server metadata at ${at} has issuer "${issuer}/" but "${issuer}" was expected (compared exactly, without normalisation); refusing to use it`,
    ])
    expect(await failureWith({ issuer })).toEqual([
      "token",
      "missing-endpoint",
      at,
      expect.stringMatching(
        new RegExp(
          `^the identity provider ${issuer}: the authorization server metadata at ${at} has no token_endpoint`,
        ),
      ),
    ])
    expect(await failureWith({ issuer, token_endpoint: 5 })).toEqual([
      "token",
      "invalid-document",
      at,
      expect.stringMatching(
        new RegExp(`^the identity provider ${issuer}: the authorization server metadata at ${at} is invalid: `),
      ),
    ])
    expect(await failureWith(undefined)).toEqual([
      "token",
      "not-found",
      issuer,
      `no metadata of the identity provider ${issuer} was found`,
    ])
    expect(idp.exchanges).toHaveLength(0)
    expect(s.tokenRequests).toHaveLength(0)
  })

  it("an identity provider's refusal is typed with its error", async () => {
    const { idp, s } = await setup()
    idp.answer = async () => Response.json({ error: "access_denied", error_description: "policy" }, { status: 400 })
    const failure = await call(client(idp, s).fetch, s.mcp[0], "tools/list").catch((e: unknown) => e)
    expect(isAuthError(failure) && [failure.reason, failure.error, failure.message]).toEqual([
      "oauth-error",
      "access_denied",
      `the identity provider's token exchange: the token endpoint ${idp.issuer}/token answered HTTP 400 access_denied: policy`,
    ])
  })

  it("an authorization server that takes none of the client's methods: a typed error, and no assertion obtained", async () => {
    const { idp } = await setup()
    // An MCP server whose authorization server takes client_secret_basic only; the client has a private key.
    let origin = ""
    const server = createServer((req, res) => {
      const json = (body: unknown) =>
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body))
      if (req.url === "/.well-known/oauth-protected-resource/mcp") {
        return json({ resource: `${origin}/mcp`, authorization_servers: [origin] })
      }
      if (req.url === "/.well-known/oauth-authorization-server") {
        return json({
          issuer: origin,
          authorization_endpoint: `${origin}/authorize`,
          token_endpoint: `${origin}/token`,
          code_challenge_methods_supported: ["S256"],
          token_endpoint_auth_methods_supported: ["client_secret_basic"],
        })
      }
      if (req.url === "/mcp") {
        res
          .writeHead(401, {
            "www-authenticate": `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`,
          })
          .end()
        return
      }
      res.writeHead(404).end()
    })
    origin = await listening(server)
    cleanups.push(() => closing(server))
    const { privateKey } = await generateKeyPair("ES256")
    const auth = createAuthClient({
      extensions: [
        enterpriseManaged({
          identityProvider: { issuer: idp.issuer, clientId: "chat-at-idp", clientSecret: "idp-secret" },
          idToken: () => "alice-id-token",
          clients: { issuer: origin, clientId: "chat", privateKey: { key: privateKey, alg: "ES256" } },
        }),
      ],
    })
    cleanups.push(() => auth.dispose())
    const failure = await call(auth.fetch, `${origin}/mcp`, "tools/list").catch((e: unknown) => e)
    expect(isAuthError(failure) && [failure.step, failure.reason, failure.url, failure.message]).toEqual([
      "token",
      "invalid-input",
      `${origin}/token`,
      `${origin} accepts client_secret_basic at its token endpoint, but the client chat has a private key`,
    ])
    expect(idp.exchanges).toHaveLength(0)
  })

  it("credentials go only to the authorization server they belong to", async () => {
    const { idp, s } = await setup()
    const auth = createAuthClient({
      extensions: [
        enterpriseManaged({
          identityProvider: { tokenEndpoint: `${idp.issuer}/token`, clientId: "chat-at-idp" },
          idToken: () => "alice-id-token",
          clients: { issuer: "https://auth.example.com", clientId: "chat", clientSecret: SECRET },
        }),
      ],
    })
    cleanups.push(() => auth.dispose())
    const failure = await call(auth.fetch, s.mcp[0], "tools/list").catch((e: unknown) => e)
    expect(isAuthError(failure) && failure.reason).toBe("no-client")
    expect(idp.exchanges).toHaveLength(0)
  })
})

describe("the identity assertion grant at the MCP authorization server: every refusal", () => {
  it("issues a token for the asserted resource and the scopes asked, asserted and allowed alike", async () => {
    const { idp, s } = await setup({ scope: "notes:read notes:write" })
    const ok = await present(s, await idp.sign(claimsFor(idp, s, { scope: "notes:read notes:write" })), {
      scope: "notes:write",
    })
    expect(ok.status).toBe(200)
    expect([ok.body.scope, ok.body.token_type]).toEqual(["notes:write", "Bearer"])
    // Without a scope parameter: what the assertion grants within the policy.
    const narrow = await setup({ scope: "notes:read" })
    const limited = await present(
      narrow.s,
      await narrow.idp.sign(claimsFor(narrow.idp, narrow.s, { scope: "notes:read notes:write" })),
    )
    expect(limited.body.scope).toBe("notes:read")
  })

  const refusals: ReadonlyArray<
    [string, (idp: TestIdp, s: Stack) => Promise<string>, Record<string, string>, string, string]
  > = [
    [
      "wrong audience",
      (idp, s) => idp.sign(claimsFor(idp, s, { aud: "https://as.example.com" })),
      {},
      "invalid_grant",
      "the assertion's aud does not name this authorization server (accepted: ISSUER)",
    ],
    [
      "expired",
      (idp, s) => idp.sign(claimsFor(idp, s, { iat: now() - 400, exp: now() - 100 })),
      {},
      "invalid_grant",
      "the assertion expired at EXP (clock skew 60 s)",
    ],
    [
      "issued in the future",
      (idp, s) => idp.sign(claimsFor(idp, s, { iat: now() + 300, exp: now() + 400 })),
      {},
      "invalid_grant",
      "the assertion's iat IAT is in the future (clock skew 60 s)",
    ],
    [
      "too long a life",
      (idp, s) => idp.sign(claimsFor(idp, s, { exp: now() + 3600 })),
      {},
      "invalid_grant",
      "the assertion lives LIFE s (exp - iat), longer than the 600 s accepted",
    ],
    [
      "no jti",
      (idp, s) => idp.sign(claimsFor(idp, s, { jti: undefined })),
      {},
      "invalid_grant",
      "the assertion has no jti claim (RFC 7523 section 3 item 7)",
    ],
    [
      "typ missing",
      (idp, s) => idp.sign(claimsFor(idp, s), { typ: undefined }),
      {},
      "invalid_grant",
      "the assertion's typ must be oauth-id-jag+jwt",
    ],
    [
      "untrusted issuer",
      (idp, s) => idp.sign(claimsFor(idp, s, { iss: "https://idp.evil.example" })),
      {},
      "invalid_grant",
      "the assertion's issuer https://idp.evil.example is not a trusted identity provider",
    ],
    [
      "signed by another key",
      async (idp, s) => idp.sign(claimsFor(idp, s), { key: (await generateKeyPair("ES256")).privateKey }),
      {},
      "invalid_grant",
      "the assertion's signature does not verify with the keys of IDP",
    ],
    [
      "client mismatch",
      (idp, s) => idp.sign(claimsFor(idp, s, { client_id: "other" })),
      {},
      "invalid_grant",
      "the assertion's client_id is not the authenticated client",
    ],
    [
      "other resource",
      (idp, s) => idp.sign(claimsFor(idp, s, { resource: "https://mcp.elsewhere.example/mcp" })),
      {},
      "invalid_target",
      "the assertion's resource https://mcp.elsewhere.example/mcp is not served by this authorization server",
    ],
    [
      "resource parameter differs",
      (idp, s) => idp.sign(claimsFor(idp, s)),
      { resource: "MCP1" },
      "invalid_target",
      "resource differs from the assertion's resource",
    ],
    [
      "unknown scope",
      (idp, s) => idp.sign(claimsFor(idp, s)),
      { scope: "notes:admin" },
      "invalid_scope",
      "MCP0 has no scope notes:admin",
    ],
    [
      "scope not asserted",
      (idp, s) => idp.sign(claimsFor(idp, s)),
      { scope: "notes:write" },
      "invalid_scope",
      "the assertion grants none of the scope notes:write",
    ],
  ]
  it.each(refusals)("%s", async (_, make, extra, error, description) => {
    const { idp, s } = await setup()
    const assertion = await make(idp, s)
    // The times a description names are the assertion's own.
    const { exp, iat } = decodeJwt(assertion)
    const fill = (v: string) =>
      v
        .replace("ISSUER", s.issuer)
        .replace("IDP", idp.issuer)
        .replace("MCP0", s.mcp[0])
        .replace("MCP1", s.mcp[1])
        .replace("EXP", String(exp))
        .replace("IAT", String(iat))
        .replace("LIFE", String((exp ?? 0) - (iat ?? 0)))
    const answer = await present(s, assertion, Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, fill(v)])))
    expect(answer).toEqual({ status: 400, body: { error, error_description: fill(description) } })
  })

  it("a replayed jti is refused", async () => {
    const { idp, s } = await setup()
    const assertion = await idp.sign(claimsFor(idp, s))
    expect((await present(s, assertion)).status).toBe(200)
    expect(await present(s, assertion)).toEqual({
      status: 400,
      body: { error: "invalid_grant", error_description: "the assertion's jti was already used" },
    })
  })

  it("per-provider policy: clients and resources", async () => {
    const { idp, s } = await setup({ clients: ["other"], resources: (mcp) => [mcp[1]] })
    expect(await present(s, await idp.sign(claimsFor(idp, s)))).toEqual({
      status: 400,
      body: { error: "invalid_grant", error_description: `${idp.issuer} may not grant access to the client chat` },
    })
    expect(await present(s, await idp.sign(claimsFor(idp, s, { client_id: "other" })), {}, "other")).toEqual({
      status: 400,
      body: { error: "invalid_target", error_description: `${idp.issuer} may not grant access to ${s.mcp[0]}` },
    })
  })

  it("a client that does not authenticate is refused", async () => {
    const { idp, s } = await setup()
    const anonymous = await fetch(`${s.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion: await idp.sign(claimsFor(idp, s)) }),
    })
    expect(anonymous.status).toBe(401)
    expect(((await anonymous.json()) as { error: string }).error).toBe("invalid_client")
  })

  it("refuses keys over http, even on loopback, without the development flag (as workload identity does)", () => {
    const issuer = "http://127.0.0.1:9"
    expect(
      thrownBy(() => identityAssertionGrant({ identityProviders: [{ issuer, jwksUri: `${issuer}/jwks` }] })),
    ).toEqual(
      new Options.InvalidOptions({
        factory: "identityAssertionGrant",
        option: "identityProviders.0.jwksUri",
        message:
          "identityAssertionGrant: identityProviders.0.jwksUri: must use https; set development.allowHttpLoopbackJwks to fetch keys over http from a loopback host",
      }),
    )
    expect(
      thrownBy(() =>
        identityAssertionGrant({
          identityProviders: [{ issuer, jwksUri: "http://idp.example.com/jwks" }],
          development: { allowHttpLoopbackJwks: true },
        }),
      ),
    ).toEqual(
      new Options.InvalidOptions({
        factory: "identityAssertionGrant",
        option: "identityProviders.0.jwksUri",
        message: "identityAssertionGrant: identityProviders.0.jwksUri: must be an https URL",
      }),
    )
  })

  it("allows keys over http on loopback with the development flag, and warns once", () => {
    const warnings: Array<string> = []
    identityAssertionGrant({
      identityProviders: [
        { issuer: "http://127.0.0.1:9", jwksUri: "http://127.0.0.1:9/jwks" },
        { issuer: "http://127.0.0.1:10", jwksUri: "http://127.0.0.1:10/jwks" },
      ],
      development: { allowHttpLoopbackJwks: true },
      warn: (message) => warnings.push(message),
    })
    expect(warnings).toEqual([
      "[keyway] DEVELOPMENT MODE: identity provider keys are fetched over plain http from http://127.0.0.1:9/jwks. Never use this outside local development.",
    ])
  })

  it("fetches keys from a loopback address only with the development flag: the SSRF guard refuses it before connecting", async () => {
    // https passes the configuration check; the guard refuses the address when the assertion is verified.
    const { idp, s } = await setup({ jwksUri: (idp) => `${idp.issuer.replace("http:", "https:")}/jwks` }, {}, {})
    expect(await present(s, await idp.sign(claimsFor(idp, s)))).toEqual({
      status: 400,
      body: {
        error: "invalid_grant",
        error_description: `the assertion's signature does not verify with the keys of ${idp.issuer}`,
      },
    })
    // Refused before any connection, not by the TLS handshake with a plain http server.
    expect(idp.connections()).toBe(0)
    // The same provider with the development flag: fetched, and the assertion verifies.
    const allowed = await setup({}, {}, { allowHttpLoopbackJwks: true })
    expect((await present(allowed.s, await allowed.idp.sign(claimsFor(allowed.idp, allowed.s)))).status).toBe(200)
    expect(allowed.idp.jwksFetches()).toBe(1)
  })

  it("refuses inline keys with private key material", () => {
    const jwks = { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y", d: "private" }] }
    expect(
      thrownBy(() => identityAssertionGrant({ identityProviders: [{ issuer: "https://idp.example.com", jwks }] })),
    ).toEqual(
      new Options.InvalidOptions({
        factory: "identityAssertionGrant",
        option: "identityProviders.0.jwks.keys.0.d",
        message:
          "identityAssertionGrant: identityProviders.0.jwks.keys.0.d: must not be present: only public keys may be published",
      }),
    )
  })

  it("refuses a provider without keys", () => {
    expect(
      thrownBy(() => identityAssertionGrant({ identityProviders: [{ issuer: "https://idp.example.com" }] })),
    ).toEqual(
      new Options.InvalidOptions({
        factory: "identityAssertionGrant",
        option: "identityProviders.0",
        message: "identityAssertionGrant: identityProviders.0: give exactly one of jwksUri and jwks",
      }),
    )
  })

  it("refuses a client extension without a way to reach the identity provider, or a client without credentials", () => {
    expect(thrownBy(() => enterpriseManaged({ identityProvider: { clientId: "chat" }, clients: [] } as never))).toEqual(
      new Options.InvalidOptions({
        factory: "enterpriseManaged",
        option: "identityProvider",
        message: "enterpriseManaged: identityProvider: needs issuer or tokenEndpoint",
      }),
    )
    const identityProvider = { issuer: "https://idp.example.com", clientId: "chat", clientSecret: "s" }
    const withSecret = { issuer: "https://as.example.com", clientId: "chat", clientSecret: "s" }
    const without = { issuer: "https://other.example.com", clientId: "bare" }
    expect(thrownBy(() => enterpriseManaged({ identityProvider, clients: [withSecret, without] } as never))).toEqual(
      new Options.InvalidOptions({
        factory: "enterpriseManaged",
        option: "clients.1",
        message: "enterpriseManaged: clients.1: the client bare needs clientSecret or privateKey",
      }),
    )
    expect(thrownBy(() => enterpriseManaged({ identityProvider, clients: without } as never))).toEqual(
      new Options.InvalidOptions({
        factory: "enterpriseManaged",
        option: "clients",
        message: "enterpriseManaged: clients: the client bare needs clientSecret or privateKey",
      }),
    )
  })
})
