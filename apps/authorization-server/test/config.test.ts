import { writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Config } from "@keyway/authorization-server"
import { describe, expect, it } from "vitest"
import {
  type AppConfig,
  ConfigFileError,
  loadConfig,
  parseCommandLine,
  parseConfig,
  readConfigFile,
  startAuthorizationServer,
  USAGE,
  UsageError,
} from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { PASSWORD, RESOURCE, SCOPES } from "./support/flow.js"

const { dir } = testCleanups()

const minimal = {
  users: [{ username: "alice", password: PASSWORD }],
  resources: [{ uri: RESOURCE, scopes: SCOPES }],
}

const problems = (value: unknown): string => {
  try {
    parseConfig(value, "test.json")
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigFileError)
    return (e as Error).message
  }
  throw new Error("the configuration was accepted")
}

describe("parseConfig", () => {
  it("accepts a minimal configuration as is", () => {
    expect(parseConfig(minimal, "test.json")).toEqual(minimal)
  })

  it("accepts the operations options as is", () => {
    const config = {
      ...minimal,
      metrics: { port: 0, host: "::1" },
      auditLog: "audit.jsonl",
      tracing: { otlpEndpoint: "http://127.0.0.1:4318", serviceName: "keyway" },
    }
    expect(parseConfig(config, "test.json")).toEqual(config)
  })

  it.each([
    ["not an object", [], "must be a JSON object"],
    ["no users, no resources", {}, "users: is required\n  resources: is required"],
    ["empty resources", { ...minimal, resources: [] }, "resources: must name at least one MCP server"],
    ["unknown top-level field", { ...minimal, prot: 80 }, 'unknown field "prot"'],
    [
      "unknown nested fields",
      { ...minimal, users: [{ username: "a", password: PASSWORD, pass: 1, role: "x" }] },
      'users[0]: unknown fields "pass", "role"',
    ],
    [
      "user without a password",
      { ...minimal, users: [{ username: "alice" }] },
      "users[0]: needs exactly one of password and passwordHash",
    ],
    [
      "user with both",
      { ...minimal, users: [{ username: "alice", password: PASSWORD, passwordHash: "b" }] },
      "users[0]: needs exactly one of password and passwordHash",
    ],
    [
      "empty username",
      { ...minimal, users: [{ username: "", password: PASSWORD }] },
      "users[0].username: must not be empty",
    ],
    [
      "a clear-text password under 15 characters",
      { ...minimal, users: [{ username: "alice", password: "fourteen chars" }] },
      "users[0].password: must be at least 15 characters long (NIST SP 800-63B-4 §3.1.1.2, a password used alone); a few unrelated words make one easy to remember",
    ],
    ["port as a string", { ...minimal, port: "9000" }, "port: must be a number"],
    ["port too large", { ...minimal, port: 70000 }, "port: must be from 0 to 65535"],
    ["fractional port", { ...minimal, port: 1.5 }, "port: must be a whole number"],
    [
      "bad auth method",
      { ...minimal, clients: [{ clientId: "c", redirectUris: [], tokenEndpointAuthMethod: "basic" }] },
      "clients[0].tokenEndpointAuthMethod: must be one of none, client_secret_basic, client_secret_post, private_key_jwt",
    ],
    [
      "client without redirect URIs",
      { ...minimal, clients: [{ clientId: "c" }] },
      "clients[0].redirectUris: is required",
    ],
    [
      "scope description not a string",
      { ...minimal, resources: [{ uri: RESOURCE, scopes: { "notes:read": 1 } }] },
      'resources[0].scopes["notes:read"]: must be a string',
    ],
    ["registration not a boolean", { ...minimal, registration: "yes" }, "registration: must be true or false"],
    [
      "code lifetime over 60 s",
      { ...minimal, lifetimes: { authorizationCode: 120 } },
      "lifetimes.authorizationCode: must be at most 60",
    ],
  ])("refuses %s, naming the field", (_name, value, message) => {
    expect(problems(value)).toBe(`invalid configuration in test.json:\n  ${message}`)
  })

  it("lists several problems in the order of the fields, unknown fields last", () => {
    expect(problems({ prot: 80, resources: [], sessionSecret: "short" })).toBe(
      "invalid configuration in test.json:\n  users: is required\n  resources: must name at least one MCP server\n" +
        '  sessionSecret: must be at least 32 random characters\n  unknown field "prot"',
    )
  })
})

const SECRET = "0123456789abcdef0123456789abcdef"
const UPSTREAM = { issuer: "https://idp.example.com", clientId: "keyway" }

describe("parseConfig: operational options", () => {
  it("accepts every operational option as is", () => {
    const full: AppConfig = {
      ...minimal,
      database: "postgresql://keyway:pw@db.internal:5432/keyway",
      databaseSchema: "keyway_prod",
      signingKeys: { rotateEvery: 86400, publishAhead: 900, checkEvery: 0.5, clockSkew: 30 },
      maintenance: { purgeEvery: 120.5 },
      sessionSecret: SECRET,
      upstream: {
        ...UPSTREAM,
        clientSecret: SECRET,
        scope: "openid profile",
        resource: "https://api.example.com",
        subjectFrom: "id_token",
        name: "Example SSO",
        timeoutMs: 5000,
        consentSeconds: 3600,
      },
      lifetimes: {
        accessToken: 600,
        refreshToken: 86400,
        authorizationCode: 30,
        session: 3600,
        refreshTokenReuseInterval: 0,
        unusedRegistration: false,
        registeredClientSecret: 2592000,
      },
      rememberConsentFor: ["desktop-app"],
    }
    expect(parseConfig(full, "test.json")).toEqual(full)
  })

  it("accepts false for rotateEvery and purgeEvery, and a publishAhead longer than the default only without rotation", () => {
    const off = {
      ...minimal,
      signingKeys: { rotateEvery: false, publishAhead: 9_999_999 },
      maintenance: { purgeEvery: false },
    }
    expect(parseConfig(off, "test.json")).toEqual(off)
  })

  it("needs no users in proxy mode", () => {
    const proxy = { resources: minimal.resources, upstream: UPSTREAM }
    expect(parseConfig(proxy, "test.json")).toEqual(proxy)
  })

  it("accepts development.allowHttpLoopbackUpstream for an http loopback upstream", () => {
    for (const issuer of ["http://127.0.0.1:9300", "http://localhost:9300/idp", "http://[::1]:9300"]) {
      const config = { ...minimal, upstream: { ...UPSTREAM, issuer }, development: { allowHttpLoopbackUpstream: true } }
      expect(parseConfig(config, "test.json")).toEqual(config)
    }
  })

  const loopbackOnly =
    "development.allowHttpLoopbackUpstream: is only for an http upstream.issuer on a loopback host (127.0.0.1, [::1] or localhost)"

  it.each([
    [
      "metrics on the public port",
      { ...minimal, port: 9000, metrics: { port: 9000 } },
      "metrics.port: must differ from port (the public port)",
    ],
    ["metrics without a port", { ...minimal, metrics: { host: "127.0.0.1" } }, "metrics.port: is required"],
    [
      "a tracing endpoint that is not an http(s) URL",
      { ...minimal, tracing: { otlpEndpoint: "collector:4318" } },
      "tracing.otlpEndpoint: must be an http(s) URL",
    ],
    ["an empty auditLog", { ...minimal, auditLog: "" }, "auditLog: must not be empty"],
    [
      "a URL database of another scheme",
      { ...minimal, database: "mysql://keyway@db/keyway" },
      "database: must be a SQLite file path or a PostgreSQL connection string (postgres:// or postgresql://)",
    ],
    [
      "a PostgreSQL connection string that is not a URL",
      { ...minimal, database: "postgres://keyway:pw@[db/keyway" },
      "database: is not a valid PostgreSQL connection string (postgres://user:password@host:port/database)",
    ],
    [
      "databaseSchema with SQLite",
      { ...minimal, database: "keyway.db", databaseSchema: "keyway" },
      "databaseSchema: needs a PostgreSQL database (postgres://… in database)",
    ],
    [
      "databaseSchema without a database",
      { ...minimal, databaseSchema: "keyway" },
      "databaseSchema: needs a PostgreSQL database (postgres://… in database)",
    ],
    [
      "a databaseSchema over 63 bytes",
      { ...minimal, database: "postgres://db/keyway", databaseSchema: "s".repeat(64) },
      "databaseSchema: must be at most 63 bytes long",
    ],
    [
      "an empty databaseSchema",
      { ...minimal, database: "postgres://db/keyway", databaseSchema: "" },
      "databaseSchema: must not be empty",
    ],
    [
      "rotateEvery as a word",
      { ...minimal, signingKeys: { rotateEvery: "monthly" } },
      "signingKeys.rotateEvery: must be a number of seconds or false",
    ],
    [
      "rotateEvery true",
      { ...minimal, signingKeys: { rotateEvery: true } },
      "signingKeys.rotateEvery: must be a number of seconds or false",
    ],
    ["rotateEvery 0", { ...minimal, signingKeys: { rotateEvery: 0 } }, "signingKeys.rotateEvery: must be positive"],
    [
      "a fractional rotateEvery",
      { ...minimal, signingKeys: { rotateEvery: 3600.5 } },
      "signingKeys.rotateEvery: must be a whole number",
    ],
    [
      "a negative publishAhead",
      { ...minimal, signingKeys: { publishAhead: -1 } },
      "signingKeys.publishAhead: must not be negative",
    ],
    [
      "publishAhead not shorter than rotateEvery",
      { ...minimal, signingKeys: { rotateEvery: 600, publishAhead: 600 } },
      "signingKeys.publishAhead: must be shorter than rotateEvery (600 s)",
    ],
    [
      "publishAhead not shorter than the default rotateEvery",
      { ...minimal, signingKeys: { publishAhead: 2_592_000 } },
      "signingKeys.publishAhead: must be shorter than rotateEvery (2592000 s)",
    ],
    ["checkEvery 0", { ...minimal, signingKeys: { checkEvery: 0 } }, "signingKeys.checkEvery: must be positive"],
    [
      "checkEvery false",
      { ...minimal, signingKeys: { checkEvery: false } },
      "signingKeys.checkEvery: must be a number",
    ],
    [
      "a fractional clockSkew",
      { ...minimal, signingKeys: { clockSkew: 1.5 } },
      "signingKeys.clockSkew: must be a whole number",
    ],
    [
      "an unknown signingKeys field",
      { ...minimal, signingKeys: { rotate: 3600 } },
      'signingKeys: unknown field "rotate"',
    ],
    [
      "purgeEvery as a word",
      { ...minimal, maintenance: { purgeEvery: "hourly" } },
      "maintenance.purgeEvery: must be a number of seconds or false",
    ],
    ["purgeEvery 0", { ...minimal, maintenance: { purgeEvery: 0 } }, "maintenance.purgeEvery: must be positive"],
    ["an unknown maintenance field", { ...minimal, maintenance: { purge: 60 } }, 'maintenance: unknown field "purge"'],
    [
      "a sessionSecret under 32 characters",
      { ...minimal, sessionSecret: SECRET.slice(1) },
      "sessionSecret: must be at least 32 random characters",
    ],
    ["a sessionSecret not a string", { ...minimal, sessionSecret: 42 }, "sessionSecret: must be a string"],
    [
      "upstream without clientId",
      { ...minimal, upstream: { issuer: "https://idp.example.com" } },
      "upstream.clientId: is required",
    ],
    ["upstream not an object", { ...minimal, upstream: "https://idp.example.com" }, "upstream: must be an object"],
    [
      "an empty upstream.issuer",
      { ...minimal, upstream: { ...UPSTREAM, issuer: "" } },
      "upstream.issuer: must not be empty",
    ],
    [
      "a subjectFrom that is not one of the string forms",
      { ...minimal, upstream: { ...UPSTREAM, subjectFrom: "userinfo" } },
      "upstream.subjectFrom: must be id_token or access_token",
    ],
    [
      "a fractional upstream.timeoutMs",
      { ...minimal, upstream: { ...UPSTREAM, timeoutMs: 0.5 } },
      "upstream.timeoutMs: must be a whole number",
    ],
    [
      "an unknown upstream field",
      { ...minimal, upstream: { ...UPSTREAM, client_id: "x" } },
      'upstream: unknown field "client_id"',
    ],
    [
      "allowHttpLoopbackUpstream without upstream",
      { ...minimal, development: { allowHttpLoopbackUpstream: true } },
      loopbackOnly,
    ],
    [
      "allowHttpLoopbackUpstream for an https upstream",
      { ...minimal, upstream: UPSTREAM, development: { allowHttpLoopbackUpstream: true } },
      loopbackOnly,
    ],
    [
      "allowHttpLoopbackUpstream for an http upstream that is not loopback",
      {
        ...minimal,
        upstream: { ...UPSTREAM, issuer: "http://idp.internal:8080" },
        development: { allowHttpLoopbackUpstream: true },
      },
      loopbackOnly,
    ],
    [
      "allowHttpLoopbackUpstream not a boolean",
      { ...minimal, development: { allowHttpLoopbackUpstream: "yes" } },
      "development.allowHttpLoopbackUpstream: must be true or false",
    ],
    [
      "development.allowHttpLoopbackIssuer (the issuer decides it)",
      { ...minimal, development: { allowHttpLoopbackIssuer: true } },
      'development: unknown field "allowHttpLoopbackIssuer"',
    ],
  ])("refuses %s, naming the field", (_name, value, message) => {
    expect(problems(value)).toBe(`invalid configuration in test.json:\n  ${message}`)
  })
})

describe("parseConfig: rateLimits", () => {
  it("accepts the library's limits, false for one or all, and clientAddressHeader", () => {
    const rateLimits = {
      login: { account: { freeAttempts: 3, delay: 30 }, address: false },
      registration: { max: 5, window: 600 },
      token: false,
      metadataFetches: { max: 1 },
      clientAddressHeader: "X-Forwarded-For",
    }
    expect(parseConfig({ ...minimal, rateLimits }, "test.json")).toEqual({ ...minimal, rateLimits })
    expect(parseConfig({ ...minimal, rateLimits: false }, "test.json")).toEqual({ ...minimal, rateLimits: false })
  })

  it.each([
    ["a zero delay", { login: { account: { delay: 0 } } }, "rateLimits.login.account.delay: must be positive"],
    ["a fractional max", { token: { max: 1.5 } }, "rateLimits.token.max: must be a whole number"],
    ["true for a limit", { revocation: true }, "rateLimits.revocation: must be an object or false"],
    ["an unknown limit", { logins: false }, 'rateLimits: unknown field "logins"'],
    ["the library's function", { clientAddress: "x" }, 'rateLimits: unknown field "clientAddress"'],
    [
      "a header name with a space",
      { clientAddressHeader: "x real ip" },
      "rateLimits.clientAddressHeader: must be a header name",
    ],
  ])("refuses %s, naming the field", (_name, rateLimits, message) => {
    expect(problems({ ...minimal, rateLimits })).toBe(`invalid configuration in test.json:\n  ${message}`)
  })
})

describe("parseConfig: extensions", () => {
  const machine = {
    clientId: "nightly",
    clientSecret: "s".repeat(32),
    redirectUris: [],
    grantTypes: ["client_credentials"],
  }

  it("accepts workload identity federation with its trusted issuers", () => {
    const value = {
      ...minimal,
      extensions: {
        workloadIdentity: {
          issuers: [
            {
              issuer: "https://oidc.cluster.example.com",
              jwksUri: "https://oidc.cluster.example.com/jwks",
              rules: [{ claims: { sub: "system:serviceaccount:agents:reader" }, resources: [RESOURCE], scopes: [] }],
            },
          ],
        },
      },
    }
    expect(parseConfig(value, "test.json")).toEqual(value)
    expect(problems({ ...minimal, extensions: { workloadIdentity: { issuers: [] } } })).toBe(
      "invalid configuration in test.json:\n  extensions.workloadIdentity.issuers: must name at least one trusted issuer",
    )
  })

  it("accepts the client credentials extension with its per-client limits, and clients with grant types", () => {
    const value = {
      ...minimal,
      clients: [machine],
      extensions: { clientCredentials: { clients: { nightly: { resources: [RESOURCE], scope: "notes:read" } } } },
    }
    expect(parseConfig(value, "test.json")).toEqual(value)
  })

  it("accepts the device authorization extension with its options, and clients with the device grant", () => {
    const value = {
      ...minimal,
      clients: [{ clientId: "-tv", redirectUris: [], grantTypes: ["urn:ietf:params:oauth:grant-type:device_code"] }],
      extensions: {
        deviceAuthorization: { lifetime: 300, interval: 5, pagePath: "/activate", entryLimit: { max: 5, window: 300 } },
      },
    }
    expect(parseConfig(value, "test.json")).toEqual(value)
  })

  it("accepts the token exchange extension with its per-client rules", () => {
    const value = {
      ...minimal,
      resources: [...minimal.resources, { uri: "https://api.example.com", scopes: { "files:read": "Read files" } }],
      clients: [{ ...machine, clientId: "-mcp", grantTypes: ["urn:ietf:params:oauth:grant-type:token-exchange"] }],
      extensions: {
        tokenExchange: {
          clients: {
            "-mcp": {
              exchanges: [{ from: RESOURCE, to: "https://api.example.com", scopes: { "files:read": "notes:read" } }],
            },
          },
          maxChain: 1,
        },
      },
    }
    expect(parseConfig(value, "test.json")).toEqual(value)
  })

  it("accepts the DPoP extension with nonces and a per-client requirement", () => {
    const value = {
      ...minimal,
      clients: [machine],
      extensions: {
        clientCredentials: {},
        dpop: { algorithms: ["ES256", "EdDSA"], window: 30, required: ["nightly"], nonce: { period: 120 } },
      },
    }
    expect(parseConfig(value, "test.json")).toEqual(value)
  })

  it.each([
    ["an unknown extension", { clientCredentials: {}, mtls: {} }, 'extensions: unknown field "mtls"'],
    [
      "a symmetric DPoP algorithm",
      { dpop: { algorithms: ["HS256"] } },
      "extensions.dpop.algorithms[0]: must be an asymmetric JWS algorithm",
    ],
    [
      "a DPoP policy that is neither a boolean nor client IDs",
      { dpop: { required: "yes" } },
      "extensions.dpop.required: must be a boolean or an array of client IDs",
    ],
    [
      "a wrong policy",
      { clientCredentials: { clients: { nightly: { scope: 1 } } } },
      "extensions.clientCredentials.clients.nightly.scope: must be a string",
    ],
    [
      "an unknown policy field",
      { clientCredentials: { clients: { nightly: { scopes: "x" } } } },
      'extensions.clientCredentials.clients.nightly: unknown field "scopes"',
    ],
    [
      "a device authorization interval that is not a whole number",
      { clientCredentials: {}, deviceAuthorization: { interval: 2.5 } },
      "extensions.deviceAuthorization.interval: must be a whole number",
    ],
    [
      "a device verification page path without its slash",
      { clientCredentials: {}, deviceAuthorization: { pagePath: "device" } },
      "extensions.deviceAuthorization.pagePath: must be a path like /device",
    ],
    [
      "a token exchange rule without a source",
      {
        clientCredentials: {},
        tokenExchange: {
          clients: { nightly: { exchanges: [{ to: RESOURCE, scopes: { "notes:read": "notes:read" } }] } },
        },
      },
      "extensions.tokenExchange.clients.nightly.exchanges[0].from: is required",
    ],
    [
      "a token exchange chain of 0",
      { clientCredentials: {}, tokenExchange: { clients: {}, maxChain: 0 } },
      "extensions.tokenExchange.maxChain: must be at least 1",
    ],
  ])("refuses %s, naming the field", (_name, extensions, message) => {
    expect(problems({ ...minimal, clients: [machine], extensions })).toBe(
      `invalid configuration in test.json:\n  ${message}`,
    )
  })
  const servedBy =
    "(authorization_code, refresh_token, client_credentials with extensions.clientCredentials, urn:ietf:params:oauth:grant-type:device_code with extensions.deviceAuthorization, urn:ietf:params:oauth:grant-type:jwt-bearer with extensions.workloadIdentity or extensions.enterpriseManaged.authorizationServer, urn:ietf:params:oauth:grant-type:token-exchange with extensions.enterpriseManaged.identityProvider or extensions.tokenExchange)"

  it.each([
    [
      "the client credentials grant without extensions.clientCredentials",
      [machine],
      { dpop: {} },
      "clients[0].grantTypes: client_credentials needs extensions.clientCredentials, which is not configured ({} turns it on with its defaults)",
    ],
    [
      "the JWT bearer grant without extensions.workloadIdentity or enterprise-managed authorization",
      [{ clientId: "-agent", redirectUris: [], grantTypes: ["urn:ietf:params:oauth:grant-type:jwt-bearer"] }, machine],
      { clientCredentials: {} },
      "clients[0].grantTypes: urn:ietf:params:oauth:grant-type:jwt-bearer needs extensions.workloadIdentity or extensions.enterpriseManaged.authorizationServer, which is not configured (extensions.workloadIdentity: with the issuers whose workload JWTs it trusts; extensions.enterpriseManaged.authorizationServer: with the identity providers whose ID-JAGs it trusts)",
    ],
    [
      "the token exchange grant without the enterprise identity provider",
      [machine, { ...machine, clientId: "exchanger", grantTypes: ["urn:ietf:params:oauth:grant-type:token-exchange"] }],
      { clientCredentials: {} },
      "clients[1].grantTypes: urn:ietf:params:oauth:grant-type:token-exchange needs extensions.enterpriseManaged.identityProvider or extensions.tokenExchange, which is not configured (extensions.enterpriseManaged.identityProvider: with the MCP authorization servers it issues ID-JAGs for; extensions.tokenExchange: with the clients that may exchange tokens and their rules)",
    ],
    [
      "the device code grant without extensions.deviceAuthorization",
      [{ clientId: "-tv", redirectUris: [], grantTypes: ["urn:ietf:params:oauth:grant-type:device_code"] }],
      undefined,
      "clients[0].grantTypes: urn:ietf:params:oauth:grant-type:device_code needs extensions.deviceAuthorization, which is not configured ({} turns it on with its defaults)",
    ],
    [
      "a grant type named like a member of every object",
      [{ clientId: "odd", redirectUris: ["https://odd.example.com/cb"], grantTypes: ["toString"] }],
      undefined,
      `clients[0].grantTypes: toString is not a grant type this server serves ${servedBy}`,
    ],
    [
      "a grant type OAuth 2.1 removed",
      [
        {
          clientId: "legacy",
          redirectUris: ["https://legacy.example.com/cb"],
          grantTypes: ["authorization_code", "password"],
        },
      ],
      undefined,
      `clients[0].grantTypes: password is not a grant type this server serves ${servedBy}`,
    ],
  ])("refuses %s, naming the extension to configure", (_name, clients, extensions, message) => {
    expect(problems({ ...minimal, clients, ...(extensions === undefined ? {} : { extensions }) })).toBe(
      `invalid configuration in test.json:\n  ${message}`,
    )
  })
})

describe("parseConfig and the library's resolve", () => {
  const libraryProblem = (value: object): string => {
    try {
      Config.resolve({ issuer: "https://as.example.com", ...value } as Config.ConfigOptions)
    } catch (e) {
      expect(e).toBeInstanceOf(Config.ConfigError)
      return (e as Error).message
    }
    throw new Error("the library accepted the configuration")
  }

  it.each([
    [
      "a fractional access-token lifetime",
      { lifetimes: { accessToken: 1.5 } },
      "lifetimes.accessToken: must be a whole number",
    ],
    [
      "a code lifetime over 60 s",
      { lifetimes: { authorizationCode: 61 } },
      "lifetimes.authorizationCode: must be at most 60",
    ],
    ["a zero checkEvery", { signingKeys: { checkEvery: 0 } }, "signingKeys.checkEvery: must be positive"],
    [
      "a negative reuse interval",
      { lifetimes: { refreshTokenReuseInterval: -1 } },
      "lifetimes.refreshTokenReuseInterval: must not be negative",
    ],
    [
      "an unusedRegistration that is neither seconds nor false",
      { lifetimes: { unusedRegistration: true } },
      "lifetimes.unusedRegistration: must be a number of seconds or false",
    ],
    ["a rememberConsentFor that is no list", { rememberConsentFor: "app" }, "rememberConsentFor: must be an array"],
    [
      "a rotateEvery not longer than the default publishAhead",
      { signingKeys: { rotateEvery: 600 } },
      "signingKeys.rotateEvery: must be longer than publishAhead (600 s)",
    ],
    ["a resource without scopes", { resources: [{ uri: RESOURCE }] }, "resources[0].scopes: is required"],
    [
      "a resource with no scopes",
      { resources: [{ uri: RESOURCE, scopes: {} }] },
      "resources[0].scopes: must name at least one scope (each with the description shown on the consent page): a client can be granted only scopes a resource defines",
    ],
    [
      "an unknown client field",
      { clients: [{ clientId: "c", redirectUris: ["https://c.example.com/cb"], secret: "x" }] },
      'clients[0]: unknown field "secret"',
    ],
  ])("report %s with the same message", (_name, value, message) => {
    expect(problems({ ...minimal, ...value })).toBe(`invalid configuration in test.json:\n  ${message}`)
    expect(libraryProblem({ ...minimal, users: [], ...value })).toBe(message)
  })
})

describe("readConfigFile", () => {
  it("accepts the example configuration", async () => {
    const file = fileURLToPath(new URL("../keyway.example.json", import.meta.url))
    const config = await readConfigFile(file)
    expect(config.users?.map((u) => u.username)).toEqual(["alice"])
    expect(config.resources.map((r) => Object.keys(r.scopes))).toEqual([["notes:read", "notes:write"]])
    expect(config.dataDir).toBe(join(dirname(file), ".keyway-data"))
  })

  it("reports a missing file", async () => {
    const file = join(await dir(), "missing.json")
    await expect(readConfigFile(file)).rejects.toThrow(new ConfigFileError(`configuration file ${file} does not exist`))
  })

  it("reports invalid JSON with the parser's reason", async () => {
    const file = join(await dir(), "bad.json")
    await writeFile(file, "{ users: [] }")
    let reason = ""
    try {
      JSON.parse("{ users: [] }")
    } catch (e) {
      reason = (e as Error).message
    }
    await expect(readConfigFile(file)).rejects.toThrow(
      new ConfigFileError(`configuration file ${file} is not valid JSON: ${reason}`),
    )
  })

  it("names the file in validation errors", async () => {
    const file = join(await dir(), "config.json")
    await writeFile(file, JSON.stringify({ ...minimal, port: -1 }))
    await expect(readConfigFile(file)).rejects.toThrow(
      new ConfigFileError(`invalid configuration in ${file}:\n  port: must be from 0 to 65535`),
    )
  })

  it("takes relative dataDir and database from the file's directory", async () => {
    const d = await dir()
    const file = join(d, "config.json")
    await writeFile(file, JSON.stringify({ ...minimal, dataDir: "data", database: "db/as.db" }))
    const config = await readConfigFile(file)
    expect(config.dataDir).toBe(join(d, "data"))
    expect(config.database).toBe(join(d, "db/as.db"))
  })
})

describe("parseCommandLine", () => {
  it.each([
    [["--port"], "Option '--port <value>' argument missing"],
    [["--config", "c.json", "--verbose"], "Unknown option '--verbose'"],
    [["--config", "c.json", "extra"], "Unexpected argument 'extra'. This command does not take positional arguments"],
    [[], "--config <file.json> is required"],
    [["--config", ""], "--config must not be empty"],
    [["--config", "c.json", "--port", "http"], '--port must be a whole number from 0 to 65535, got "http"'],
    [["--config", "c.json", "--port", "65536"], '--port must be a whole number from 0 to 65535, got "65536"'],
    [["--config", "c.json", "--issuer", "ftp://x"], '--issuer must be an http(s) URL, got "ftp://x"'],
  ])("refuses %j", (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(new UsageError(message))
  })

  it("keeps a PostgreSQL --database as given and resolves a SQLite one from the current directory", () => {
    const url = "postgresql://keyway:pw@db.internal:5432/keyway?sslmode=require"
    expect(parseCommandLine(["--config", "c.json", "--database", url])).toEqual({
      help: false,
      config: "c.json",
      overrides: { database: url },
    })
    expect(parseCommandLine(["--config", "c.json", "--database", "as.db"])).toEqual({
      help: false,
      config: "c.json",
      overrides: { database: join(process.cwd(), "as.db") },
    })
  })

  it("refuses a --database URL of another scheme without repeating it (it may hold a password)", () => {
    expect(() => parseCommandLine(["--config", "c.json", "--database", "mysql://u:hunter2@db/x"])).toThrow(
      new UsageError(
        "--database must be a SQLite file path or a PostgreSQL connection string (postgres:// or postgresql://)",
      ),
    )
  })

  it("--help wins over everything else", () => {
    expect(parseCommandLine(["--port", "x", "-h"])).toEqual({ help: true })
  })

  it("loadConfig refuses --help, with the usage as the message", async () => {
    await expect(loadConfig(["--help"])).rejects.toThrow(new UsageError(USAGE))
  })
})

describe("loadConfig", () => {
  const write = async (config: object) => {
    const d = await dir()
    const file = join(d, "keyway.json")
    await writeFile(file, JSON.stringify(config))
    return { d, file }
  }

  it("reads the file when no flag overrides it", async () => {
    const { d, file } = await write({ ...minimal, port: 9001, host: "::1", dataDir: "state" })
    expect(await loadConfig(["--config", file])).toEqual({
      ...minimal,
      port: 9001,
      host: "::1",
      dataDir: join(d, "state"),
    })
  })

  it("flags override the file", async () => {
    const { file } = await write({ ...minimal, port: 9001, host: "::1", issuer: "https://a.example", dataDir: "x" })
    const cwdDir = await dir()
    const config = await loadConfig([
      "--config",
      file,
      "--port",
      "0",
      "--host",
      "127.0.0.1",
      "--issuer",
      "https://b.example",
      "--data-dir",
      cwdDir,
    ])
    const expected: AppConfig = { ...minimal, port: 0, host: "127.0.0.1", issuer: "https://b.example", dataDir: cwdDir }
    expect(config).toEqual(expected)
  })

  it("--data-dir replaces a database path from the file; --database replaces both", async () => {
    const { d, file } = await write({ ...minimal, database: "file.db" })
    const other = await dir()
    expect(await loadConfig(["--config", file, "--data-dir", other])).toEqual({ ...minimal, dataDir: other })
    expect(await loadConfig(["--config", file])).toEqual({ ...minimal, database: join(d, "file.db") })
    expect(await loadConfig(["--config", file, "--database", join(other, "x.db")])).toEqual({
      ...minimal,
      database: join(other, "x.db"),
    })
  })
})

describe("loadConfig: PostgreSQL and the session secret", () => {
  const write = async (config: object) => {
    const d = await dir()
    const file = join(d, "keyway.json")
    await writeFile(file, JSON.stringify(config))
    return { d, file }
  }
  const PG = "postgres://keyway@127.0.0.1:5432/keyway"

  it("keeps a PostgreSQL database from the file as given (not a path)", async () => {
    const { file } = await write({ ...minimal, database: PG, databaseSchema: "tenant" })
    expect(await loadConfig(["--config", file], {})).toEqual({ ...minimal, database: PG, databaseSchema: "tenant" })
  })

  it("a flag choosing SQLite drops the file's databaseSchema; --database postgres://… keeps it", async () => {
    const { file } = await write({ ...minimal, database: PG, databaseSchema: "tenant" })
    const other = await dir()
    expect(await loadConfig(["--config", file, "--data-dir", other], {})).toEqual({ ...minimal, dataDir: other })
    expect(await loadConfig(["--config", file, "--database", join(other, "x.db")], {})).toEqual({
      ...minimal,
      database: join(other, "x.db"),
    })
    const elsewhere = "postgresql://keyway@db.internal/keyway"
    expect(await loadConfig(["--config", file, "--database", elsewhere], {})).toEqual({
      ...minimal,
      database: elsewhere,
      databaseSchema: "tenant",
    })
  })

  it("takes the session secret from KEYWAY_SESSION_SECRET over the file's", async () => {
    const fromFile = "f".repeat(32)
    const fromEnv = "e".repeat(40)
    const { file } = await write({ ...minimal, sessionSecret: fromFile })
    expect(await loadConfig(["--config", file], {})).toEqual({ ...minimal, sessionSecret: fromFile })
    expect(await loadConfig(["--config", file], { KEYWAY_SESSION_SECRET: fromEnv })).toEqual({
      ...minimal,
      sessionSecret: fromEnv,
    })
    const { file: without } = await write(minimal)
    expect(await loadConfig(["--config", without], { KEYWAY_SESSION_SECRET: fromEnv })).toEqual({
      ...minimal,
      sessionSecret: fromEnv,
    })
  })

  it.each([
    ["empty", "", 0],
    ["short", "s".repeat(31), 31],
  ])("refuses a KEYWAY_SESSION_SECRET that is %s, without showing it", async (_name, value, length) => {
    const { file } = await write(minimal)
    await expect(loadConfig(["--config", file], { KEYWAY_SESSION_SECRET: value })).rejects.toThrow(
      new ConfigFileError(
        `invalid configuration: KEYWAY_SESSION_SECRET must be at least 32 random characters (got ${length})`,
      ),
    )
  })
})

describe("startAuthorizationServer refuses", () => {
  it("an http upstream without development.allowHttpLoopbackUpstream, with the library's reason", async () => {
    await expect(
      startAuthorizationServer(
        { ...minimal, port: 0, dataDir: await dir(), upstream: { ...UPSTREAM, issuer: "http://127.0.0.1:9300" } },
        { log: () => undefined },
      ),
    ).rejects.toThrow(
      new ConfigFileError(
        "invalid configuration: upstream.issuer must use https (http only on a loopback host with development.allowHttpLoopbackUpstream)",
      ),
    )
  })

  it("an upstream whose subject has no source, with the library's reason", async () => {
    await expect(
      startAuthorizationServer(
        { ...minimal, port: 0, dataDir: await dir(), upstream: UPSTREAM },
        { log: () => undefined },
      ),
    ).rejects.toThrow(
      new ConfigFileError(
        'invalid configuration: upstream.subjectFrom "access_token" needs upstream.resource (the audience of the upstream access token); or set "openid" in upstream.scope, or give a function',
      ),
    )
  })

  it("an object that is not a valid configuration", async () => {
    await expect(startAuthorizationServer({ ...minimal, port: -5 }, { log: () => undefined })).rejects.toThrow(
      new ConfigFileError("invalid configuration in the configuration:\n  port: must be from 0 to 65535"),
    )
  })

  it("a non-loopback host without an issuer", async () => {
    await expect(
      startAuthorizationServer({ ...minimal, host: "0.0.0.0", dataDir: await dir() }, { log: () => undefined }),
    ).rejects.toThrow(
      new ConfigFileError(
        "invalid configuration: issuer is required when host (0.0.0.0) is not a loopback address; set an https issuer",
      ),
    )
  })

  it("an http issuer on a non-loopback host, with the library's reason", async () => {
    await expect(
      startAuthorizationServer(
        { ...minimal, port: 0, issuer: "http://auth.example.com", dataDir: await dir() },
        { log: () => undefined },
      ),
    ).rejects.toThrow(
      new ConfigFileError(
        "invalid configuration: issuer must use https (http is only possible on a loopback host in development mode)",
      ),
    )
  })

  it.each([
    [
      "a client scope no resource defines",
      { clients: [{ clientId: "c", redirectUris: ["http://127.0.0.1/cb"], scope: "notes:read notes:delete" }] },
      "clients[0].scope: notes:delete is not a scope of any resource (they define notes:read notes:write); add it to a resource's scopes, or remove it from client c's scope",
    ],
    [
      "two resources that differ only by a trailing slash",
      {
        resources: [
          { uri: RESOURCE, scopes: SCOPES },
          { uri: `${RESOURCE}/`, scopes: SCOPES },
        ],
      },
      `resources[1].uri: ${RESOURCE}/ differs from resources[0].uri (${RESOURCE}) only by a trailing slash, which clients do not keep apart; configure the MCP server once, by its canonical URI (without the slash)`,
    ],
  ])("%s, with the library's reason", async (_name, value, message) => {
    const error = await startAuthorizationServer(
      { ...minimal, ...value, port: 0, dataDir: await dir() },
      { log: () => undefined },
    ).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigFileError)
    expect((error as Error).message).toBe(`invalid configuration: ${message}`)
  })

  it("a resource URI that is not canonical", async () => {
    const error = await startAuthorizationServer(
      { ...minimal, port: 0, resources: [{ uri: "not a url", scopes: SCOPES }], dataDir: await dir() },
      { log: () => undefined },
    ).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigFileError)
    expect((error as Error).message).toMatch(
      /^invalid configuration: resource "not a url" is not a valid canonical URI: /,
    )
  })
})
