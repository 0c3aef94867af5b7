import { createServer } from "node:http"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { createAuthClient, UserAgent } from "@keyway/client"
import { Grant } from "@keyway/core"
import { enterpriseManaged, signIn } from "@keyway/ext-enterprise-managed/client"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { closing, freePort, listening } from "@keyway/testing"
import { describe, expect, it } from "vitest"
import { type AppConfig, loadConfig, parseConfig, readConfigFile, startAuthorizationServer } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { PASSWORD, REDIRECT_URI, SCOPES } from "./support/flow.js"
import { tokensIssued } from "./support/metrics.js"

const { defer, dir } = testCleanups()

const IDP_SECRET = "idp-secret-idp-secret-idp-secret-idp-secret"
const AS_SECRET = "as-secret-as-secret-as-secret-as-secret-as"

/** A configuration as a JSON file holds it: what the app reads from its file is JSON. */
const asJson = (config: AppConfig): AppConfig => JSON.parse(JSON.stringify(config)) as AppConfig

describe("enterprise-managed authorization between two app instances", () => {
  it("the identity provider signs the user in and issues an ID-JAG; the MCP server's authorization server accepts it", async () => {
    // The MCP server listens first: both authorization servers name it.
    const mcpListener = createServer()
    defer(() => closing(mcpListener))
    const mcpUrl = `${await listening(mcpListener)}/mcp`
    // The identity provider's port is chosen ahead: the MCP server's authorization server trusts it by its issuer.
    const idpIssuer = `http://127.0.0.1:${await freePort()}`

    const as = await startAuthorizationServer(
      asJson({
        port: 0,
        database: join(await dir(), "as.db"),
        users: [],
        resources: [{ uri: mcpUrl, name: "Notes", scopes: SCOPES }],
        clients: [{ clientId: "chat", clientSecret: AS_SECRET, redirectUris: [], grantTypes: [Grant.JWT_BEARER] }],
        extensions: {
          enterpriseManaged: {
            // The identity provider of this test serves its keys over http on loopback.
            authorizationServer: {
              identityProviders: [{ issuer: idpIssuer, jwksUri: `${idpIssuer}/jwks` }],
              development: { allowHttpLoopbackJwks: true },
            },
          },
        },
        metrics: { port: 0 },
      }),
      { log: () => undefined },
    )
    defer(as.close)
    const guard = createProtectedResource({
      resource: mcpUrl,
      authorizationServers: [as.issuer],
      verifier: jwt({ jwksUri: `${as.issuer}/jwks` }),
      scopesSupported: Object.keys(SCOPES),
      requiredScopes: ["notes:read"],
    })
    defer(() => guard.close())
    mcpListener.on(
      "request",
      toNodeListener(
        guard.protect(async (_request, { token }) => Response.json({ subject: token.subject, scopes: token.scopes })),
      ),
    )

    const idp = await startAuthorizationServer(
      asJson({
        port: Number(new URL(idpIssuer).port),
        database: join(await dir(), "idp.db"),
        openid: true,
        users: [
          { username: "alice", password: PASSWORD },
          { username: "bob", password: PASSWORD },
        ],
        resources: [{ uri: `${idpIssuer}/profile`, scopes: { profile: "Your profile" } }],
        defaultResource: `${idpIssuer}/profile`,
        clients: [
          {
            clientId: "chat",
            clientName: "Chat",
            clientSecret: IDP_SECRET,
            redirectUris: [REDIRECT_URI],
            grantTypes: [Grant.AUTHORIZATION_CODE, Grant.TOKEN_EXCHANGE],
          },
        ],
        extensions: {
          enterpriseManaged: {
            identityProvider: {
              authorizationServers: [{ issuer: as.issuer, resources: [mcpUrl], clients: { chat: "chat" } }],
              rules: [{ users: ["alice"], resource: mcpUrl, scope: "notes:read" }],
            },
          },
        },
        metrics: { port: 0 },
      }),
      { log: () => undefined },
    )
    defer(idp.close)
    expect(idp.issuer).toBe(idpIssuer)
    const idpMetadata = (await (await fetch(`${idp.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(idpMetadata.identity_chaining_requested_token_types_supported).toEqual([Grant.ID_JAG_TOKEN_TYPE])
    const asMetadata = (await (await fetch(`${as.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(asMetadata.authorization_grant_profiles_supported).toEqual(["urn:ietf:params:oauth:grant-profile:id-jag"])

    const idpCounts = { authorization_code: 0, refresh_token: 0, [Grant.TOKEN_EXCHANGE]: 0 }
    const asCounts = { authorization_code: 0, refresh_token: 0, [Grant.JWT_BEARER]: 0 }
    expect(await tokensIssued(idp.metricsUrl ?? "")).toEqual(idpCounts)
    expect(await tokensIssued(as.metricsUrl ?? "")).toEqual(asCounts)

    // The user signs in once, at the identity provider (OpenID Connect): the client holds an ID token.
    const signedIn = await signIn({
      issuer: idp.issuer,
      clientId: "chat",
      clientSecret: IDP_SECRET,
      userAgent: UserAgent.testUser({ username: "alice", password: PASSWORD }),
    })
    expect(signedIn.claims).toMatchObject({ iss: idp.issuer, sub: "alice", aud: "chat" })
    expect(await tokensIssued(idp.metricsUrl ?? "")).toEqual({ ...idpCounts, authorization_code: 1 })

    // The client reaches the MCP server: the token exchange at the identity provider, then the JWT bearer grant.
    const assertions: Array<Readonly<Record<string, unknown>>> = []
    const auth = createAuthClient({
      extensions: [
        enterpriseManaged({
          identityProvider: { issuer: idp.issuer, clientId: "chat", clientSecret: IDP_SECRET },
          idToken: () => signedIn.idToken,
          clients: { issuer: as.issuer, clientId: "chat", clientSecret: AS_SECRET },
          onAssertion: (claims) => void assertions.push(claims),
        }),
      ],
    })
    defer(() => auth.dispose())
    const answer = await auth.fetch(mcpUrl, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    })
    expect([answer.status, await answer.json()]).toEqual([200, { subject: "alice", scopes: ["notes:read"] }])
    expect(assertions).toEqual([
      expect.objectContaining({
        iss: idp.issuer,
        sub: "alice",
        aud: as.issuer,
        resource: mcpUrl,
        client_id: "chat",
        scope: "notes:read",
      }),
    ])
    expect(await tokensIssued(idp.metricsUrl ?? "")).toEqual({
      ...idpCounts,
      authorization_code: 1,
      [Grant.TOKEN_EXCHANGE]: 1,
    })
    expect(await tokensIssued(as.metricsUrl ?? "")).toEqual({ ...asCounts, [Grant.JWT_BEARER]: 1 })

    // Bob may not reach the MCP server: the identity provider's rules refuse his token exchange.
    const bob = await signIn({
      issuer: idp.issuer,
      clientId: "chat",
      clientSecret: IDP_SECRET,
      userAgent: UserAgent.testUser({ username: "bob", password: PASSWORD }),
    })
    const refused = await fetch(`${idp.issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${btoa(`chat:${IDP_SECRET}`)}`,
      },
      body: new URLSearchParams({
        grant_type: Grant.TOKEN_EXCHANGE,
        requested_token_type: Grant.ID_JAG_TOKEN_TYPE,
        subject_token: bob.idToken,
        subject_token_type: Grant.ID_TOKEN_TYPE,
        audience: as.issuer,
        resource: mcpUrl,
      }),
    })
    expect([refused.status, await refused.json()]).toEqual([
      400,
      { error: "invalid_grant", error_description: `the user bob may not reach ${mcpUrl}` },
    ])
  }, 120_000)
})

describe("enterprise-managed authorization in the configuration", () => {
  const minimal = {
    users: [{ username: "alice", password: PASSWORD }],
    resources: [{ uri: "https://mcp.example.com/mcp", scopes: SCOPES }],
  }
  const problems = (value: object): string => {
    try {
      parseConfig(value, "test.json")
    } catch (e) {
      return (e as Error).message
    }
    throw new Error("the configuration was accepted")
  }

  it("accepts openid and both roles with the extension's options", () => {
    const value = {
      ...minimal,
      openid: true,
      extensions: {
        enterpriseManaged: {
          identityProvider: {
            authorizationServers: [
              {
                issuer: "https://auth.example.com",
                resources: ["https://mcp.example.com/mcp"],
                clients: { chat: "c" },
              },
            ],
            rules: [{ resource: "https://mcp.example.com/mcp", scope: "notes:read" }],
            lifetime: 120,
          },
          authorizationServer: {
            identityProviders: [
              {
                issuer: "https://idp.example.com",
                jwksUri: "https://idp.example.com/jwks",
                clients: ["chat"],
                resources: ["https://mcp.example.com/mcp"],
                scope: "notes:read",
              },
            ],
            clockSkew: 30,
            maxLifetime: 300,
          },
        },
      },
    }
    expect(parseConfig(value, "test.json")).toEqual(value)
  })

  it.each([
    ["openid that is not a boolean", { openid: "yes" }, "openid: must be true or false"],
    [
      "enterpriseManaged without a role",
      { extensions: { enterpriseManaged: {} } },
      "extensions.enterpriseManaged: needs identityProvider, authorizationServer or both",
    ],
    [
      "an unknown role",
      { extensions: { enterpriseManaged: { relyingParty: {} } } },
      'extensions.enterpriseManaged: unknown field "relyingParty"\n  extensions.enterpriseManaged: needs identityProvider, authorizationServer or both',
    ],
    [
      "a trusted identity provider with two key sources",
      {
        extensions: {
          enterpriseManaged: {
            authorizationServer: {
              identityProviders: [
                { issuer: "https://idp.example.com", jwksUri: "https://idp.example.com/jwks", jwks: { keys: [] } },
              ],
            },
          },
        },
      },
      "extensions.enterpriseManaged.authorizationServer.identityProviders[0]: give exactly one of jwksUri and jwks",
    ],
    [
      "a fetch function, which a file cannot hold",
      {
        extensions: {
          enterpriseManaged: { authorizationServer: { identityProviders: [], fetch: "globalThis.fetch" } },
        },
      },
      'extensions.enterpriseManaged.authorizationServer: unknown field "fetch"',
    ],
    [
      "a downstream authorization server without resources",
      {
        extensions: {
          enterpriseManaged: {
            identityProvider: {
              authorizationServers: [{ issuer: "https://auth.example.com", resources: [], clients: {} }],
              rules: [],
            },
          },
        },
      },
      "extensions.enterpriseManaged.identityProvider.authorizationServers[0].resources: must name at least one resource",
    ],
  ])("refuses %s, naming the field", (_name, value, message) => {
    expect(problems({ ...minimal, ...value })).toBe(`invalid configuration in test.json:\n  ${message}`)
  })

  it("refuses the identity provider's role without openid, and trust in resources it does not serve, at start", async () => {
    const start = async (config: Partial<AppConfig>) =>
      startAuthorizationServer(
        { port: 0, database: join(await dir(), "keyway.db"), ...minimal, ...config },
        { log: () => undefined },
      ).then(
        (server) => {
          defer(server.close)
          throw new Error("the server started")
        },
        (e: Error) => [e.name, e.message],
      )
    expect(
      await start({
        extensions: {
          enterpriseManaged: {
            identityProvider: {
              authorizationServers: [
                { issuer: "https://auth.example.com", resources: ["https://mcp.example.com/mcp"], clients: {} },
              ],
              rules: [],
            },
          },
        },
      }),
    ).toEqual([
      "ConfigFileError",
      "invalid configuration: io.modelcontextprotocol/enterprise-managed-authorization#identity-provider: identityAssertionIssuer needs the server's openid option",
    ])
    expect(
      await start({
        extensions: {
          enterpriseManaged: {
            authorizationServer: {
              identityProviders: [
                { issuer: "https://idp.example.com", jwks: { keys: [] }, resources: ["https://other.example.com/mcp"] },
              ],
            },
          },
        },
      }),
    ).toEqual([
      "ConfigFileError",
      "invalid configuration: io.modelcontextprotocol/enterprise-managed-authorization: identityProviders (https://idp.example.com).resources: https://other.example.com/mcp is not a configured resource",
    ])
  })
})

describe("the example configurations", () => {
  it("an identity provider and the MCP server's authorization server that trusts it: they name each other, and start", async () => {
    const example = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url))
    const as = await readConfigFile(example("keyway.example.json"))
    const idp = await readConfigFile(example("keyway.idp.example.json"))
    const asIssuer = `http://${as.host}:${as.port}`
    const idpIssuer = `http://127.0.0.1:${idp.port}`
    const mcp = as.resources.map((r) => r.uri)
    expect(idp.extensions?.enterpriseManaged?.identityProvider?.authorizationServers).toEqual([
      { issuer: asIssuer, resources: mcp, clients: { chat: "chat" } },
    ])
    expect(idp.extensions?.enterpriseManaged?.identityProvider?.rules.map((r) => r.resource)).toEqual(mcp)
    expect(as.extensions?.enterpriseManaged?.authorizationServer?.identityProviders).toEqual([
      { issuer: idpIssuer, jwksUri: `${idpIssuer}/jwks`, clients: ["chat"], resources: mcp },
    ])
    expect(idp.openid).toBe(true)
    for (const name of ["keyway.example.json", "keyway.idp.example.json"]) {
      const config = await loadConfig(["--config", example(name), "--port", "0", "--data-dir", await dir()], {})
      const server = await startAuthorizationServer(config, { log: () => undefined })
      defer(server.close)
    }
  })
})
