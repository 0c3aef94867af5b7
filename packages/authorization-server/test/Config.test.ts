import { thrownBy } from "@keyway/testing"
import { Cause, Effect, Exit, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { z } from "zod"
import { AuthorizationServer, createAuthorizationServer } from "../src/AuthorizationServer.js"
import { ConfigError, defaults, limits, publishAheadConflict, resolve } from "../src/Config.js"
import { layerMemory } from "../src/storage/Storage.js"
import { UserAuthenticator } from "../src/UserAuthenticator.js"
import { refusedByBothFaces as refused } from "./support/refused.js"

const base = {
  issuer: "https://as.example.com",
  resources: [{ uri: "https://MCP.example.com/mcp", scopes: { read: "Read" } }],
}

describe("configuration", () => {
  it("canonicalises resources and derives endpoints under the issuer", () => {
    const config = resolve({ ...base, issuer: "https://as.example.com/tenant" })
    expect([...config.resources.keys()]).toEqual(["https://mcp.example.com/mcp"])
    expect(config.endpoints.token).toBe("https://as.example.com/tenant/token")
    expect(config.codeTtl).toBe(60)
    expect(config.accessTokenTtl).toBe(300)
    expect(config.secureCookies).toBe(true)
    expect(config.maxBodyBytes).toBe(65536)
  })

  const refusals: ReadonlyArray<[string, Record<string, unknown>, RegExp]> = [
    ["an http issuer on a public host", { issuer: "http://as.example.com" }, /must use https/],
    [
      "an http loopback issuer without the development flag",
      { issuer: "http://127.0.0.1:8080" },
      /allowHttpLoopbackIssuer/,
    ],
    ["an issuer with a query", { issuer: "https://as.example.com/?a=b" }, /query or fragment/],
    ["an issuer with a fragment", { issuer: "https://as.example.com/#x" }, /query or fragment/],
    ["a relative issuer", { issuer: "/as" }, /absolute URL/],
    ["no resources", { resources: [] }, /at least one/],
    [
      "an invalid resource",
      { resources: [{ uri: "https://x.example.com#f", scopes: { read: "Read" } }] },
      /not a valid canonical URI/,
    ],
    [
      "an introspection client that is not configured",
      { introspectionClients: ["rs"] },
      /introspectionClients: rs is not a configured client/,
    ],
    [
      "an introspection client without credentials",
      { clients: [{ clientId: "rs", redirectUris: ["https://rs.example.com/cb"] }], introspectionClients: ["rs"] },
      /introspectionClients: rs must authenticate/,
    ],
    [
      "a client with grants and no redirect URI",
      { clients: [{ clientId: "c", redirectUris: [] }] },
      /client c needs at least one redirect URI/,
    ],
    ["a default resource that is not configured", { defaultResource: "https://other.example.com" }, /defaultResource/],
    [
      "a code lifetime over 60 s",
      { lifetimes: { authorizationCode: 61 } },
      /^lifetimes\.authorizationCode: must be at most 60$/,
    ],
    ["a zero access token lifetime", { lifetimes: { accessToken: 0 } }, /^lifetimes\.accessToken: must be positive$/],
    [
      "a fractional access token lifetime",
      { lifetimes: { accessToken: 1.5 } },
      /^lifetimes\.accessToken: must be a whole number$/,
    ],
    [
      "a client with an unknown field, and a resource without scopes",
      {
        clients: [{ clientId: "c", redirectUris: ["https://c.example.com/cb"], secret: "x" }],
        resources: [{ uri: "https://x.example.com" }],
      },
      /^resources\[0\]\.scopes: is required; clients\[0\]: unknown field "secret"$/,
    ],
    [
      "an invalid scope name",
      { resources: [{ uri: "https://x.example.com", scopes: { "a b": "x" } }] },
      /not a valid scope token/,
    ],
  ]
  for (const [name, override, message] of refusals) {
    it(`refuses ${name}`, () => {
      expect(() => resolve({ ...base, ...override } as never)).toThrow(ConfigError)
      expect(() => resolve({ ...base, ...override } as never)).toThrow(message)
    })
  }

  const refusedByBothFaces = (options: Record<string, unknown>) => refused({ ...base, ...options })
  const client = { clientId: "c", redirectUris: ["https://c.example.com/cb"] }
  const twoScopes = { read: "Read", write: "Write" }

  it.each<[string, Record<string, unknown>, string]>([
    [
      "a client scope that no resource defines",
      {
        resources: [
          { uri: "https://a.example.com/mcp", scopes: twoScopes },
          { uri: "https://b.example.com/mcp", scopes: { admin: "Administer" } },
        ],
        clients: [
          { ...client, scope: "read admin" },
          { ...client, clientId: "d", scope: "write delete" },
        ],
      },
      "clients[1].scope: delete is not a scope of any resource (they define read write admin); add it to a resource's scopes, or remove it from client d's scope",
    ],
    [
      "client scopes that no resource defines",
      { clients: [{ ...client, scope: "read write  delete" }] },
      "clients[0].scope: write delete are not scopes of any resource (they define read); add them to a resource's scopes, or remove them from client c's scope",
    ],
    [
      "openid in a client scope without openid",
      { clients: [{ ...client, scope: "openid read" }] },
      "clients[0].scope: openid is not a scope of any resource (they define read); add it to a resource's scopes, or remove it from client c's scope",
    ],
    [
      "a malformed client scope",
      { clients: [{ ...client, scope: 'read "write"' }] },
      'clients[0].scope: Invalid scope "read \\"write\\"": character "\\"" (U+0022) at position 5 is not allowed in a scope token',
    ],
    [
      "a resource with no scopes",
      { resources: [base.resources[0], { uri: "https://other.example.com/mcp", scopes: {} }] },
      "resources[1].scopes: must name at least one scope (each with the description shown on the consent page): a client can be granted only scopes a resource defines",
    ],
    [
      "two resources that differ only by a trailing slash",
      { resources: [base.resources[0], { uri: "https://mcp.example.com/mcp/", scopes: twoScopes }] },
      "resources[1].uri: https://mcp.example.com/mcp/ differs from resources[0].uri (https://MCP.example.com/mcp) only by a trailing slash, which clients do not keep apart; configure the MCP server once, by its canonical URI (without the slash)",
    ],
    [
      "two resources that differ only by a trailing slash before the query",
      {
        resources: [
          { uri: "https://mcp.example.com/-/mcp/?tenant=a", scopes: twoScopes },
          { uri: "https://mcp.example.com/-/mcp?tenant=a", scopes: twoScopes },
        ],
      },
      "resources[1].uri: https://mcp.example.com/-/mcp?tenant=a differs from resources[0].uri (https://mcp.example.com/-/mcp/?tenant=a) only by a trailing slash, which clients do not keep apart; configure the MCP server once, by its canonical URI (without the slash)",
    ],
    [
      "two spellings of one canonical URI",
      { resources: [base.resources[0], { uri: "https://mcp.example.com:443/./mcp", scopes: twoScopes }] },
      "resources[1].uri: https://mcp.example.com:443/./mcp is the same MCP server as resources[0].uri (https://MCP.example.com/mcp): both are https://mcp.example.com/mcp in canonical form; configure it once, with every scope it defines",
    ],
    [
      "a root resource with and without its slash",
      {
        resources: [
          { uri: "https://mcp.example.com/", scopes: twoScopes },
          { uri: "https://mcp.example.com", scopes: twoScopes },
        ],
      },
      "resources[1].uri: https://mcp.example.com is the same MCP server as resources[0].uri (https://mcp.example.com/): both are https://mcp.example.com in canonical form; configure it once, with every scope it defines",
    ],
    [
      "the client credentials grant without its extension",
      { clients: [{ ...client, redirectUris: [], clientSecret: "s".repeat(32), grantTypes: ["client_credentials"] }] },
      "clients[0].grantTypes: client_credentials is served by an extension that is not configured: add clientCredentialsGrant() from @keyway/ext-client-credentials/authorization-server to extensions",
    ],
    [
      "the JWT bearer grant without an extension",
      { clients: [{ ...client, grantTypes: ["authorization_code", "urn:ietf:params:oauth:grant-type:jwt-bearer"] }] },
      "clients[0].grantTypes: urn:ietf:params:oauth:grant-type:jwt-bearer is served by an extension that is not configured: add workloadIdentityGrant() from @keyway/ext-workload-identity/authorization-server (workloads) or identityAssertionGrant() from @keyway/ext-enterprise-managed/authorization-server (enterprise-managed authorization) to extensions",
    ],
    [
      "the token exchange grant without its extension",
      { clients: [{ ...client, grantTypes: ["urn:ietf:params:oauth:grant-type:token-exchange"] }] },
      "clients[0].grantTypes: urn:ietf:params:oauth:grant-type:token-exchange is served by an extension that is not configured: add identityAssertionIssuer() from @keyway/ext-enterprise-managed/authorization-server to extensions",
    ],
    [
      "a grant type no extension serves",
      { clients: [client, { ...client, clientId: "-p", grantTypes: ["password"] }] },
      "clients[1].grantTypes: password is not a grant type this server serves (authorization_code, refresh_token); an extension that registers it must be added to extensions",
    ],
    [
      "a grant type named like a member of every object",
      { clients: [{ ...client, grantTypes: ["constructor"] }] },
      "clients[0].grantTypes: constructor is not a grant type this server serves (authorization_code, refresh_token); an extension that registers it must be added to extensions",
    ],
    [
      "a previous issuer that is the issuer",
      { previousIssuer: "https://as.example.com/" },
      "previousIssuer: is the issuer itself (https://as.example.com); set it to the issuer a database served before, or remove it",
    ],
  ])("refuses %s, on both faces, naming the field and the fix", async (_, options, message) => {
    expect(await refusedByBothFaces(options)).toBe(message)
  })

  const tier = z.enum(["gold", "silver"])
  it.each<[string, ReadonlyArray<Record<string, unknown>>, string]>([
    [
      "two extensions declaring the same client metadata field",
      [
        { id: "example/a", clientMetadata: { example_tier: tier } },
        { id: "example/b", clientMetadata: { example_other: tier, example_tier: tier } },
      ],
      "extensions: example/a and example/b both declare the client metadata field example_tier",
    ],
    [
      "an extension declaring a client metadata field the server defines",
      [{ id: "example/a", clientMetadata: { client_name: z.string() } }],
      "extensions: example/a declares the client metadata field client_name, which the server defines itself",
    ],
    [
      "an extension declaring a registration response member",
      [{ id: "example/a", clientMetadata: { registration_client_uri: z.string() } }],
      "extensions: example/a declares the client metadata field registration_client_uri, which the server defines itself",
    ],
    [
      "two extensions declaring the same confirmation member",
      [
        { id: "example/a", confirmations: { example_key: "ExampleA" } },
        { id: "example/b", confirmations: { example_key: "ExampleB" } },
      ],
      "extensions: example/a and example/b both declare the confirmation member example_key",
    ],
  ])("refuses %s at start-up, on both faces", async (_, extensions, message) => {
    expect(await refusedByBothFaces({ extensions })).toBe(message)
  })

  it("accepts extensions declaring distinct client metadata fields and confirmation members", () => {
    const extensions = [
      { id: "example/a", clientMetadata: { example_tier: tier }, confirmations: { example_key: "ExampleA" } },
      { id: "example/b", clientMetadata: { example_other: tier }, confirmations: { example_thumb: "ExampleB" } },
    ]
    expect(resolve({ ...base, extensions }).extensions).toEqual(extensions)
  })

  it("accepts client scopes the resources define, openid when ID tokens are on, and distinct resources", () => {
    const config = resolve({
      ...base,
      openid: true,
      resources: [
        { uri: "https://mcp.example.com/mcp", scopes: twoScopes },
        { uri: "https://mcp.example.com/mcp/v2", scopes: { admin: "Administer" } },
        { uri: "https://mcp.example.com/mcp/v2/?x", scopes: { admin: "Administer" } },
      ],
      clients: [{ ...client, scope: " read  admin openid " }],
    })
    expect([...config.resources.keys()]).toEqual([
      "https://mcp.example.com/mcp",
      "https://mcp.example.com/mcp/v2",
      "https://mcp.example.com/mcp/v2/?x",
    ])
    expect(resolve({ ...base, previousIssuer: "https://old.example.com/" }).previousIssuer).toBe(
      "https://old.example.com",
    )
  })

  it("fails the layer with ConfigError in its error channel, not as a defect", async () => {
    const exit = await Effect.runPromiseExit(
      Layer.build(
        AuthorizationServer.layer({ ...base, issuer: "http://as.example.com" }).pipe(
          Layer.provide(Layer.merge(layerMemory, UserAuthenticator.layerUsers([]))),
        ),
      ).pipe(Effect.scoped),
    )
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) {
      expect(Cause.hasDies(exit.cause)).toBe(false)
      const error = Cause.squash(exit.cause)
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError)._tag).toBe("ConfigError")
      expect((error as ConfigError).message).toBe(
        "issuer must use https (http is only possible on a loopback host in development mode)",
      )
    }
  })

  it("the plain face throws the ConfigError instance at creation", () => {
    const error = thrownBy(() => createAuthorizationServer({ ...base, resources: [] }))
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError)._tag).toBe("ConfigError")
    expect((error as ConfigError).message).toBe("resources: must name at least one MCP server")
  })

  it("accepts an http loopback issuer only with the development flag, and says so loudly", () => {
    const warnings: Array<string> = []
    const config = resolve({
      ...base,
      issuer: "http://127.0.0.1:8080",
      development: { allowHttpLoopbackIssuer: true },
      warn: (m) => warnings.push(m),
    })
    expect(config.secureCookies).toBe(false)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/DEVELOPMENT MODE.*insecure http issuer/)
  })

  it("logs nothing for an https issuer", () => {
    const warnings: Array<string> = []
    resolve({ ...base, warn: (m) => warnings.push(m) })
    expect(warnings).toEqual([])
  })

  it("takes a member given as undefined as left out, as JavaScript callers write it", () => {
    // The types say an optional member that is given has a value; validation is kinder to callers without them.
    const options: Record<string, unknown> = {
      ...base,
      resources: [{ ...base.resources[0], name: undefined }],
      users: undefined,
      lifetimes: { accessToken: undefined },
      signingKeys: { rotateEvery: undefined, publishAhead: 600 },
      rateLimits: { token: undefined, login: { account: undefined } },
      upstream: undefined,
      clientIdMetadataDocuments: { enabled: undefined },
    }
    const config = resolve(options as never)
    expect(config.resources.get("https://mcp.example.com/mcp")?.name).toBe("https://mcp.example.com/mcp")
    expect(config.accessTokenTtl).toBe(defaults.lifetimes.accessToken)
    expect(config.signingKeys.rotateEvery).toBe(defaults.signingKeys.rotateEvery)
    expect(config.rateLimits.token).toEqual(defaults.rateLimits.token)
    expect(config.rateLimits.login.account).toEqual(defaults.rateLimits.login.account)
    expect(config.clientIdMetadataDocuments).toBe(true)
  })
})

describe("Config.defaults, Config.limits and publishAheadConflict", () => {
  it("are what resolve applies", () => {
    const config = resolve({ ...base, warn: () => undefined })
    expect({
      accessToken: config.accessTokenTtl,
      refreshToken: config.refreshTokenTtl,
      authorizationCode: config.codeTtl,
      session: config.sessionTtl,
      refreshTokenReuseInterval: config.refreshTokenReuseInterval,
      unusedRegistration: config.unusedRegistration,
      registeredClientSecret: config.registeredClientSecret,
    }).toEqual(defaults.lifetimes)
    expect(config.signingKeys).toEqual(defaults.signingKeys)
    expect(config.purgeEvery).toBe(defaults.maintenance.purgeEvery)
    expect(config.maxBodyBytes).toBe(defaults.maxBodyBytes)
    expect(config.registration).toBe(defaults.registration)
    expect(config.rotateConfidentialRefreshTokens).toBe(defaults.rotateConfidentialRefreshTokens)
  })

  it("enforce the limits", () => {
    const code = { ...base, lifetimes: { authorizationCode: limits.authorizationCodeMax + 1 } }
    expect(() => resolve(code)).toThrow(ConfigError)
    const secret = thrownBy(() => resolve({ ...base, sessionSecret: "s".repeat(limits.secretMinLength - 1) }))
    expect(secret).toBeInstanceOf(ConfigError)
    expect((secret as ConfigError).message).toBe("sessionSecret: must be at least 32 random characters")
  })

  it.each([
    [undefined, undefined],
    [{ publishAhead: 600, rotateEvery: 601 }, undefined],
    [{ publishAhead: 600, rotateEvery: 600 }, 600],
    [{ publishAhead: defaults.signingKeys.rotateEvery }, defaults.signingKeys.rotateEvery],
    [{ rotateEvery: 600 }, 600],
    [{ publishAhead: 9_999_999, rotateEvery: false as const }, undefined],
  ])("publishAheadConflict(%j) is %j", (options, expected) => {
    expect(publishAheadConflict(options)).toBe(expected)
  })
})

describe("rateLimits", () => {
  it("every limit is on with the defaults when left out; the client address comes from the bridge", () => {
    expect(resolve(base).rateLimits).toEqual({ ...defaults.rateLimits, clientAddress: undefined })
    expect(defaults.rateLimits).toEqual({
      login: {
        account: { freeAttempts: 5, delay: 60, maxDelay: 900, forgetAfter: 3600 },
        address: { freeAttempts: 5, delay: 60, maxDelay: 900, forgetAfter: 3600 },
      },
      registration: { max: 20, window: 3600 },
      token: { max: 1200, window: 60 },
      refresh: { max: 60, window: 60 },
      workload: { max: 600, window: 60 },
      revocation: { max: 600, window: 60 },
      introspection: { max: 6000, window: 60 },
      clientAuthentication: { max: 20, window: 60 },
      metadataFetches: { max: 20, window: 60 },
    })
  })

  it("a partial limit keeps the defaults of what it leaves out; false turns one limit, login, or all off", () => {
    const clientAddress = (request: Request) => request.headers.get("x-real-ip") ?? undefined
    const config = resolve({
      ...base,
      rateLimits: {
        login: { account: { delay: 10 }, address: false },
        token: false,
        registration: { max: 3 },
        refresh: { window: 30 },
        clientAuthentication: false,
        clientAddress,
      },
    })
    expect(config.rateLimits).toEqual({
      ...defaults.rateLimits,
      login: { account: { ...defaults.rateLimits.login.account, delay: 10 }, address: false },
      token: false,
      registration: { max: 3, window: 3600 },
      refresh: { max: 60, window: 30 },
      clientAuthentication: false,
      clientAddress,
    })
    expect(resolve({ ...base, rateLimits: { login: false } }).rateLimits.login).toEqual({
      account: false,
      address: false,
    })
    expect(resolve({ ...base, rateLimits: false }).rateLimits).toEqual({
      login: { account: false, address: false },
      registration: false,
      token: false,
      refresh: false,
      workload: false,
      revocation: false,
      introspection: false,
      clientAuthentication: false,
      metadataFetches: false,
      clientAddress: undefined,
    })
  })

  it.each([
    [{ token: { max: 0 } }, "rateLimits.token.max: must be positive"],
    [{ login: { address: { forgetAfter: 1.5 } } }, "rateLimits.login.address.forgetAfter: must be a whole number"],
    [{ introspection: true }, "rateLimits.introspection: must be an object or false"],
    [{ workload: { window: 0 } }, "rateLimits.workload.window: must be positive"],
    [{ clientAuthentication: "off" }, "rateLimits.clientAuthentication: must be an object or false"],
    [{ metadataFetches: { max: 1, burst: 2 } }, 'rateLimits.metadataFetches: unknown field "burst"'],
    [{ clientAddress: "x-real-ip" }, "rateLimits.clientAddress: must be a function"],
    ["on", "rateLimits: must be an object or false"],
  ])("refuses %j with the field and the reason", (rateLimits, message) => {
    const error = thrownBy(() => resolve({ ...base, rateLimits } as never))
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).message).toBe(message)
  })
})
