import { createServer } from "node:http"
import { createAuthorizationServer, NodeServer } from "@keyway/authorization-server"
import { clientCredentialsGrant } from "@keyway/ext-client-credentials/authorization-server"
import { createProtectedResource, custom } from "@keyway/resource-server"
import { closing, freePort, listening } from "@keyway/testing"
import Provider from "oidc-provider"
import { afterEach, describe, expect, it } from "vitest"
import { stage } from "../src/checks/authorizationServer.js"
import { diagnose } from "../src/index.js"
import { findingOf, seededWalk, startMetadataServer, summary } from "./support/as-servers.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const MODERN = ["2025-06-18", "2025-11-25", "2026-07-28"] as const
const SECRET = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t"

/** A Keyway authorization server with dynamic registration and the client credentials extension; the MCP server at its origin. */
const startKeyway = async () => {
  const server = createServer()
  const issuer = await listening(server)
  const mcp = `${issuer}/mcp`
  const as = createAuthorizationServer({
    issuer,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
    registration: true,
    resources: [{ uri: mcp, name: "Notes", scopes: { "notes:read": "Read notes", "notes:write": "Write notes" } }],
    clients: [{ clientId: "reporter", clientSecret: SECRET, redirectUris: [], grantTypes: ["client_credentials"] }],
    extensions: [clientCredentialsGrant({ clients: { reporter: { resources: [mcp], scope: "notes:read" } } })],
  })
  server.on("request", NodeServer.toNodeListener(as.handler, { publicUrl: issuer }))
  cleanups.push(async () => {
    await closing(server)
    await as.close()
  })
  return { issuer, mcp }
}

/** A Keyway protected resource at /mcp and a Keyway authorization server at the same origin, as one deployment. */
const startKeywayStack = async () => {
  const server = createServer()
  const issuer = await listening(server)
  const mcp = `${issuer}/mcp`
  const as = createAuthorizationServer({
    issuer,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
    registration: true,
    resources: [{ uri: mcp, name: "Notes", scopes: { "notes:read": "Read notes" } }],
  })
  const resource = createProtectedResource({
    resource: mcp,
    authorizationServers: [issuer],
    scopesSupported: ["notes:read"],
    verifier: custom(() => null),
  })
  const protectedMcp = resource.protect(() => Response.json({ jsonrpc: "2.0", id: 1, result: {} }))
  server.on(
    "request",
    NodeServer.toNodeListener(
      (request) => {
        const path = new URL(request.url).pathname
        return path === "/mcp" || path.startsWith("/.well-known/oauth-protected-resource")
          ? protectedMcp(request)
          : as.handler(request)
      },
      { publicUrl: issuer },
    ),
  )
  cleanups.push(async () => {
    await closing(server)
    await resource.close()
    await as.close()
  })
  return { issuer, mcp }
}

/** A metadata server, closed after the test. */
const metadataServer = async (options: Parameters<typeof startMetadataServer>[0] = {}) => {
  const server = await startMetadataServer(options)
  cleanups.push(server.close)
  return server
}

/** Runs the stage over a walk whose protected resource metadata names `issuer`, for the revisions after 2025-03-26. */
const runModern = async (issuer: string, options: Parameters<typeof seededWalk>[2] = {}) => {
  const walk = seededWalk("https://mcp.example.com/mcp", [issuer], {
    revisions: [...MODERN],
    scopes: ["notes:read"],
    ...options,
  })
  return { walk, findings: await stage.run(walk) }
}

/** Every check passing for the revisions after 2025-03-26 against the metadata server's good metadata. */
const ALL_PASS = [
  "as.metadata pass 2025-06-18,2025-11-25,2026-07-28",
  "as.issuer pass 2025-06-18,2025-11-25,2026-07-28",
  "as.http-issuer pass 2025-06-18,2025-11-25,2026-07-28",
  "as.pkce-s256 pass 2025-06-18,2025-11-25,2026-07-28",
  "as.endpoints pass 2025-06-18,2025-11-25,2026-07-28",
  "as.iss-parameter pass 2025-06-18,2025-11-25,2026-07-28",
  "as.registration pass 2025-06-18",
  "as.registration pass 2025-11-25,2026-07-28",
  "as.token-auth-methods pass 2025-06-18,2025-11-25,2026-07-28",
  "as.scopes pass 2025-06-18,2025-11-25,2026-07-28",
  "as.jwks pass 2025-06-18,2025-11-25,2026-07-28",
  "as.cors pass 2025-06-18,2025-11-25,2026-07-28",
]

describe("the authorization server stage", () => {
  it("passes every check against a Keyway authorization server, for every revision, and stores the metadata", async () => {
    const { issuer, mcp } = await startKeyway()
    const walk = seededWalk(mcp, [issuer], {
      scopes: ["notes:read", "notes:write"],
      clientCredentials: { clientId: "reporter", clientSecret: SECRET },
    })
    const findings = await stage.run(walk)
    expect(summary(findings)).toEqual([
      "as.metadata pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.issuer pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.http-issuer pass 2025-06-18,2025-11-25,2026-07-28",
      "as.pkce-s256 pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.endpoints pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.iss-parameter pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.registration pass 2025-03-26,2025-06-18",
      "as.registration pass 2025-11-25,2026-07-28",
      "as.token-auth-methods pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.scopes pass 2025-06-18,2025-11-25,2026-07-28",
      "as.jwks pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.cors pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.extensions pass 2025-11-25,2026-07-28",
      "as.client-credentials pass 2025-11-25,2026-07-28",
    ])
    expect(findingOf(findings, "as.metadata").detail).toBe(
      `tried ${issuer}/.well-known/oauth-authorization-server → 200: found`,
    )
    expect(findingOf(findings, "as.registration", "2025-11-25").detail).toBe(
      `clients can register by: pre-registration, client ID metadata documents (client_id_metadata_document_supported), dynamic registration (registration_endpoint ${issuer}/register)`,
    )
    expect(findingOf(findings, "as.extensions").detail).toBe(
      "advertises client credentials (grant_types_supported client_credentials)",
    )
    expect(findingOf(findings, "as.client-credentials").detail).toMatch(
      new RegExp(
        `^client reporter \\(client_secret_basic\\) got a Bearer token for ${mcp} with scope "notes:read", expiring in \\d+ s$`,
      ),
    )
    const found = walk.authorizationServers.get(issuer)
    expect(found?.metadataUrl).toBe(`${issuer}/.well-known/oauth-authorization-server`)
    expect(found?.metadata?.token_endpoint).toBe(`${issuer}/token`)
    // The secret never shows in the report.
    expect(JSON.stringify(findings)).not.toContain(SECRET)
  })

  it("runs after the resource stage in a diagnosis, on the authorization server the resource names", async () => {
    const { issuer, mcp } = await startKeywayStack()
    const diagnosis = await diagnose(mcp)
    expect(summary(diagnosis.findings.filter((f) => f.check.startsWith("as.")))).toEqual([
      "as.metadata pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.issuer pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.http-issuer pass 2025-06-18,2025-11-25,2026-07-28",
      "as.pkce-s256 pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.endpoints pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.iss-parameter pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.registration pass 2025-03-26,2025-06-18",
      "as.registration pass 2025-11-25,2026-07-28",
      "as.token-auth-methods pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.scopes pass 2025-06-18,2025-11-25,2026-07-28",
      "as.jwks pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
      "as.cors pass 2025-03-26,2025-06-18,2025-11-25,2026-07-28",
    ])
    expect(diagnosis.findings.filter((f) => f.check.startsWith("as.")).every((f) => f.server === issuer)).toBe(true)
  })

  it("fails the client credentials request with a wrong secret", async () => {
    const { issuer, mcp } = await startKeyway()
    const walk = seededWalk(mcp, [issuer], {
      revisions: ["2025-11-25"],
      clientCredentials: { clientId: "reporter", clientSecret: "not the secret" },
    })
    const finding = findingOf(await stage.run(walk), "as.client-credentials")
    expect(finding.status).toBe("fail")
    expect(finding.detail).toBe(
      `the token endpoint ${issuer}/token answered HTTP 401 invalid_client: client authentication failed`,
    )
    expect(finding.exchanges.map((e) => `${e.method} ${e.url} ${e.status}`)).toEqual([`POST ${issuer}/token 401`])
  })

  it("reports what node-oidc-provider (with dynamic registration) really has, and nothing else", async () => {
    const server = createServer()
    const issuer = await listening(server)
    const provider = new Provider(issuer, {
      clients: [{ client_id: "app", token_endpoint_auth_method: "none", redirect_uris: ["http://127.0.0.1/cb"] }],
      cookies: { keys: ["a test key that is long enough to sign the cookies"] },
      // Dynamic registration, as MCP clients of 2025-06-18 need it; off by default.
      features: { registration: { enabled: true } },
    })
    server.on("request", provider.callback())
    cleanups.push(() => closing(server))
    const { findings, walk } = await runModern(issuer, { scopes: ["openid"] })
    expect(summary(findings)).toEqual([
      "as.metadata pass 2025-06-18,2025-11-25,2026-07-28",
      "as.issuer pass 2025-06-18,2025-11-25,2026-07-28",
      "as.http-issuer pass 2025-06-18,2025-11-25,2026-07-28",
      "as.pkce-s256 pass 2025-06-18,2025-11-25,2026-07-28",
      "as.endpoints pass 2025-06-18,2025-11-25,2026-07-28",
      "as.iss-parameter pass 2025-06-18,2025-11-25,2026-07-28",
      "as.registration pass 2025-06-18,2025-11-25,2026-07-28",
      "as.token-auth-methods pass 2025-06-18,2025-11-25,2026-07-28",
      "as.scopes pass 2025-06-18,2025-11-25,2026-07-28",
      "as.jwks pass 2025-06-18,2025-11-25,2026-07-28",
      "as.cors warn 2025-06-18,2025-11-25,2026-07-28",
      "as.extensions pass 2025-11-25,2026-07-28",
    ])
    // Its registration endpoint answers no CORS preflight: browser-based clients cannot register.
    expect(findingOf(findings, "as.cors").detail).toBe(
      `the preflight of ${issuer}/reg answered 404: browser-based clients are blocked`,
    )
    expect(findingOf(findings, "as.registration").detail).toBe(
      `clients can register by: pre-registration, dynamic registration (registration_endpoint ${issuer}/reg)`,
    )
    expect(findingOf(findings, "as.extensions").detail).toBe(
      'advertises DPoP (dpop_signing_alg_values_supported ["ES256", "Ed25519", "EdDSA"])',
    )
    expect(walk.authorizationServers.get(issuer)?.metadataUrl).toBe(`${issuer}/.well-known/oauth-authorization-server`)
  })

  it("passes every check against good hand-written metadata", async () => {
    const server = await metadataServer()
    expect(summary((await runModern(server.issuer)).findings)).toEqual(ALL_PASS)
  })

  it("fails the issuer when the metadata's issuer has a trailing slash the resource's does not", async () => {
    const server = await metadataServer({ metadata: (origin) => ({ issuer: `${origin}/` }) })
    const { findings, walk } = await runModern(server.issuer)
    expect(summary(findings)).toEqual(
      ALL_PASS.map((line) => (line.startsWith("as.issuer") ? line.replace("pass", "fail") : line)),
    )
    expect(findingOf(findings, "as.issuer").detail).toBe(
      `the authorization server metadata at ${server.origin}/.well-known/oauth-authorization-server has issuer "${server.origin}/" but "${server.origin}" was expected (compared exactly, without normalisation); refusing to use it`,
    )
    // Clients refuse the document: later stages get none.
    expect(walk.authorizationServers.get(server.issuer)?.metadata).toBeUndefined()
  })

  it("fails PKCE without S256, and without the member fails 2025-11-25 clients and warns for older ones", async () => {
    const plain = await metadataServer({ metadata: () => ({ code_challenge_methods_supported: ["plain"] }) })
    const plainFinding = findingOf((await runModern(plain.issuer)).findings, "as.pkce-s256")
    expect(plainFinding.status).toBe("fail")
    expect(plainFinding.revisions).toEqual([...MODERN])
    expect(plainFinding.detail).toBe(
      `the authorization server metadata at ${plain.origin}/.well-known/oauth-authorization-server lists code_challenge_methods_supported [plain] without S256; the authorization server must support PKCE S256`,
    )

    const absent = await metadataServer({ metadata: () => ({ code_challenge_methods_supported: undefined }) })
    const findings = (await runModern(absent.issuer)).findings.filter((f) => f.check === "as.pkce-s256")
    expect(findings.map((f) => [f.status, f.revisions])).toEqual([
      ["warn", ["2025-06-18"]],
      ["fail", ["2025-11-25", "2026-07-28"]],
    ])
  })

  it("fails 2025-06-18 clients when the metadata is only at the OpenID Connect location", async () => {
    const server = await metadataServer({ paths: ["/.well-known/openid-configuration"] })
    const { findings } = await runModern(server.issuer)
    expect(summary(findings)).toEqual([
      "as.metadata fail 2025-06-18",
      "as.metadata pass 2025-11-25,2026-07-28",
      "as.issuer pass 2025-11-25,2026-07-28",
      "as.http-issuer pass 2025-06-18,2025-11-25,2026-07-28",
      "as.pkce-s256 pass 2025-11-25,2026-07-28",
      "as.endpoints pass 2025-11-25,2026-07-28",
      "as.iss-parameter pass 2025-11-25,2026-07-28",
      "as.registration pass 2025-11-25,2026-07-28",
      "as.token-auth-methods pass 2025-11-25,2026-07-28",
      "as.scopes pass 2025-11-25,2026-07-28",
      "as.jwks pass 2025-11-25,2026-07-28",
      "as.cors pass 2025-11-25,2026-07-28",
    ])
    expect(findingOf(findings, "as.metadata", "2025-06-18").detail).toBe(
      `tried ${server.origin}/.well-known/oauth-authorization-server → 404: none found`,
    )
    expect(findingOf(findings, "as.metadata", "2025-11-25").detail).toBe(
      `tried ${server.origin}/.well-known/oauth-authorization-server → 404, ${server.origin}/.well-known/openid-configuration → 200: found`,
    )
  })

  it("warns 2025-03-26 clients when the MCP server's origin has no metadata, and tells the default endpoints", async () => {
    const server = await metadataServer({ paths: [] })
    const walk = seededWalk(`${server.origin}/mcp`, [], { revisions: ["2025-03-26"] })
    const findings = await stage.run(walk)
    expect(summary(findings)).toEqual(["as.metadata warn 2025-03-26"])
    expect(findings[0]?.detail).toBe(
      `tried ${server.origin}/.well-known/oauth-authorization-server → 404: none found, so 2025-03-26 clients use the default endpoints ${server.origin}/authorize, ${server.origin}/token and ${server.origin}/register`,
    )
  })

  it("fails an http issuer on a public host, and its http endpoints", async () => {
    const server = await metadataServer({ issuer: (origin) => origin.replace("127.0.0.1", "as.example.com") })
    // The public name reaches the loopback server, as a DNS entry would.
    const fetch: typeof globalThis.fetch = (input, init) =>
      globalThis.fetch(
        String(input instanceof Request ? input.url : input).replace("as.example.com", "127.0.0.1"),
        init,
      )
    const { findings } = await runModern(server.issuer, { fetch })
    expect(summary(findings)).toEqual(
      ALL_PASS.map((line) =>
        line.startsWith("as.http-issuer") || line.startsWith("as.endpoints") ? line.replace("pass", "fail") : line,
      ),
    )
    expect(findingOf(findings, "as.http-issuer").detail).toBe(`the issuer ${server.issuer} is http on a public host`)
    expect(findingOf(findings, "as.endpoints").detail).toBe(
      `not https (nor http on a loopback host): authorization_endpoint ${server.issuer}/authorize, token_endpoint ${server.issuer}/token, registration_endpoint ${server.issuer}/register, jwks_uri ${server.issuer}/jwks`,
    )
  })

  it("warns when authorization responses do not carry iss", async () => {
    const server = await metadataServer({
      metadata: () => ({ authorization_response_iss_parameter_supported: undefined }),
    })
    const { findings } = await runModern(server.issuer)
    expect(summary(findings)).toEqual(
      ALL_PASS.map((line) => (line.startsWith("as.iss-parameter") ? line.replace("pass", "warn") : line)),
    )
    expect(findingOf(findings, "as.iss-parameter").detail).toBe(
      "authorization_response_iss_parameter_supported is absent: clients cannot detect a mix-up between authorization servers",
    )
  })

  it("warns 2025-06-18 clients when only client ID metadata documents are offered", async () => {
    const server = await metadataServer({ metadata: () => ({ registration_endpoint: undefined }) })
    const { findings } = await runModern(server.issuer)
    expect(summary(findings)).toEqual([
      ...ALL_PASS.slice(0, 6),
      "as.registration warn 2025-06-18",
      "as.registration pass 2025-11-25,2026-07-28",
      "as.token-auth-methods pass 2025-11-25,2026-07-28",
      ...ALL_PASS.slice(9),
    ])
    expect(findingOf(findings, "as.registration", "2025-06-18").detail).toBe(
      "clients can register by: pre-registration; client ID metadata documents are advertised, but clients of this revision predate them only: users must register a client by hand",
    )
  })

  it("warns when dynamic registration is offered without the none authentication method", async () => {
    const server = await metadataServer({
      metadata: () => ({
        token_endpoint_auth_methods_supported: ["client_secret_basic"],
        client_id_metadata_document_supported: undefined,
      }),
    })
    const { findings } = await runModern(server.issuer)
    expect(summary(findings)).toEqual([
      ...ALL_PASS.slice(0, 6),
      "as.registration pass 2025-06-18,2025-11-25,2026-07-28",
      "as.token-auth-methods warn 2025-06-18,2025-11-25,2026-07-28",
      ...ALL_PASS.slice(9),
    ])
    expect(findingOf(findings, "as.token-auth-methods").detail).toBe(
      'token_endpoint_auth_methods_supported is ["client_secret_basic"], without "none", but dynamic registration is offered: public clients have no method',
    )
  })

  it("fails an unreachable jwks_uri, and a JWK Set with only a symmetric key", async () => {
    const port = await freePort()
    const unreachable = await metadataServer({ metadata: () => ({ jwks_uri: `http://127.0.0.1:${port}/jwks` }) })
    const { findings } = await runModern(unreachable.issuer)
    expect(summary(findings)).toEqual(
      ALL_PASS.map((line) => (line.startsWith("as.jwks") ? line.replace("pass", "fail") : line)),
    )
    expect(findingOf(findings, "as.jwks").detail).toMatch(
      new RegExp(`^jwks_uri http://127\\.0\\.0\\.1:${port}/jwks answered no answer \\(.*ECONNREFUSED.*\\)$`),
    )

    const symmetric = await metadataServer({ jwks: { keys: [{ kty: "oct", k: "c2VjcmV0LXNlY3JldC1zZWNyZXQ" }] } })
    const finding = findingOf((await runModern(symmetric.issuer)).findings, "as.jwks")
    expect(finding.status).toBe("fail")
    expect(finding.detail).toBe(
      `the JWK Set at ${symmetric.issuer}/jwks has no public signing key of type RSA, EC or OKP (key types: ["oct"])`,
    )
  })

  it("warns when the metadata and endpoints answer no CORS", async () => {
    const server = await metadataServer({ cors: false })
    const { findings } = await runModern(server.issuer)
    expect(summary(findings)).toEqual(
      ALL_PASS.map((line) => (line.startsWith("as.cors") ? line.replace("pass", "warn") : line)),
    )
    expect(findingOf(findings, "as.cors").detail).toBe(
      `the metadata at ${server.origin}/.well-known/oauth-authorization-server has no Access-Control-Allow-Origin; the preflight of ${server.issuer}/token answered 404; the preflight of ${server.issuer}/register answered 404: browser-based clients are blocked`,
    )
  })
})
