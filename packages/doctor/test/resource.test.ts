import { createServer } from "node:http"
import { createProtectedResource, custom } from "@keyway/resource-server"
import { toNodeListener } from "@keyway/resource-server/node"
import { closing, freePort, listening } from "@keyway/testing"
import { afterEach, describe, expect, it } from "vitest"
import { stage } from "../src/checks/resource.js"
import { diagnose } from "../src/index.js"
import { ISSUER, type McpServerOptions, startMcpServer } from "./support/resource-mcp.js"
import { type Loopback, mapHost, newWalk, problems, summary } from "./support/resource-servers.js"

const running: Array<Loopback> = []
afterEach(async () => {
  for (const server of running.splice(0)) await server.close()
})

const start = async (options: McpServerOptions = {}): Promise<Loopback> => {
  const server = await startMcpServer(options)
  running.push(server)
  return server
}

const ALL = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] as const
const PRM = ["2025-06-18", "2025-11-25", "2026-07-28"] as const
const FALLBACK = ["2025-11-25", "2026-07-28"] as const

const ALL_CHECKS = [
  "transport.https",
  "mcp.reachable",
  "challenge.status",
  "challenge.syntax",
  "challenge.resource-metadata",
  "challenge.no-error-without-token",
  "challenge.scope",
  "prm.reachable",
  "prm.no-redirect",
  "prm.json",
  "prm.resource",
  "prm.authorization-servers",
  "prm.path-location",
  "prm.root-location",
  "cors.prm",
  "cors.mcp",
  "clock.skew",
]

const BROWSER = "https://client.doctor.example"

describe("the resource stage against Keyway's protected resource", () => {
  it("passes every check, and records the challenge, the metadata and the authorization servers", async () => {
    let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
    const server = createServer(toNodeListener((request) => handler(request)))
    const origin = await listening(server)
    running.push({ origin, close: () => closing(server) })
    const resource = createProtectedResource({
      resource: `${origin}/mcp`,
      authorizationServers: [ISSUER],
      scopesSupported: ["tools:read"],
      verifier: custom(() => null),
    })
    handler = resource.protect(() => Response.json({ jsonrpc: "2.0", id: 1, result: {} }))
    const walk = newWalk(`${origin}/mcp`)
    const findings = await stage.run(walk)
    await resource.close()
    expect(problems(findings)).toEqual([])
    expect(findings.map((f) => f.check)).toEqual(ALL_CHECKS)
    expect(Object.keys(stage.catalog).sort()).toEqual([...ALL_CHECKS].sort())
    expect(walk.unauthenticated).toEqual({
      status: 401,
      wwwAuthenticate: `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", scope="tools:read"`,
    })
    expect(walk.resourceMetadata?.url).toBe(`${origin}/.well-known/oauth-protected-resource/mcp`)
    expect(walk.resourceMetadata?.document).toMatchObject({
      resource: `${origin}/mcp`,
      authorization_servers: [ISSUER],
    })
    expect([...walk.authorizationServers.values()]).toEqual([{ issuer: ISSUER }])
    expect(walk.stopped).toBeUndefined()
    expect(summary(findings).find((f) => f.check === "prm.resource")).toEqual({
      check: "prm.resource",
      status: "pass",
      revisions: PRM,
      detail: `resource is "${origin}/mcp"`,
    })
  })
})

describe("the resource stage against misconfigured servers", () => {
  it("a well-configured server: nothing but passes", async () => {
    const { origin } = await start()
    const findings = await stage.run(newWalk(`${origin}/mcp`))
    expect(problems(findings)).toEqual([])
    expect(findings.map((f) => f.check)).toEqual(ALL_CHECKS)
  })

  it("no resource_metadata in the challenge: fails 2025-06-18, warns from 2025-11-25 (clients fall back)", async () => {
    const { origin } = await start({ challenge: () => 'Bearer scope="tools:read"' })
    const findings = await stage.run(newWalk(`${origin}/mcp`))
    expect(problems(findings)).toEqual([
      {
        check: "challenge.resource-metadata",
        status: "fail",
        revisions: ["2025-06-18"],
        detail: "the Bearer challenge has no resource_metadata; clients of this revision cannot find the metadata",
      },
      {
        check: "challenge.resource-metadata",
        status: "warn",
        revisions: FALLBACK,
        detail: "the Bearer challenge has no resource_metadata; clients fall back to the well-known URIs",
      },
    ])
    expect(summary(findings).find((f) => f.check === "prm.reachable")).toEqual({
      check: "prm.reachable",
      status: "pass",
      revisions: FALLBACK,
      detail: `found at the path-specific well-known URI ${origin}/.well-known/oauth-protected-resource/mcp (the challenge names none)`,
    })
  })

  it("resource_metadata naming a path that does not answer, the document being at the well-known URI", async () => {
    const { origin } = await start({
      challenge: (o) => `Bearer resource_metadata="${o}/mcp/.well-known/oauth-protected-resource", scope="tools:read"`,
    })
    const walk = newWalk(`${origin}/mcp`)
    expect(problems(await stage.run(walk))).toEqual([
      {
        check: "prm.reachable",
        status: "fail",
        revisions: PRM,
        detail: `the challenge's resource_metadata ${origin}/mcp/.well-known/oauth-protected-resource answered 404; the document is at ${origin}/.well-known/oauth-protected-resource/mcp, which clients do not try`,
      },
    ])
    expect(walk.resourceMetadata).toBeUndefined()
    expect(walk.authorizationServers.size).toBe(0)
  })

  it("an error code on a token-less 401", async () => {
    const { origin } = await start({
      challenge: (o) =>
        `Bearer error="invalid_token", resource_metadata="${o}/.well-known/oauth-protected-resource/mcp", scope="tools:read"`,
    })
    expect(problems(await stage.run(newWalk(`${origin}/mcp`)))).toEqual([
      {
        check: "challenge.no-error-without-token",
        status: "warn",
        revisions: ALL,
        detail: 'error="invalid_token" on a request that carried no token',
      },
    ])
  })

  it("a 200 instead of a 401: the server is not protected, and nothing is discovered", async () => {
    const { origin } = await start({ status: 200 })
    const walk = newWalk(`${origin}/mcp`)
    const findings = await stage.run(walk)
    expect(problems(findings)).toEqual([
      { check: "challenge.status", status: "fail", revisions: ALL, detail: "answered 200 instead of 401" },
    ])
    expect(findings.map((f) => f.check)).toEqual([
      "transport.https",
      "mcp.reachable",
      "challenge.status",
      "cors.mcp",
      "clock.skew",
    ])
    expect(walk.resourceMetadata).toBeUndefined()
    expect(walk.authorizationServers.size).toBe(0)
  })

  it("an unparsable WWW-Authenticate: clients from 2025-11-25 still find the metadata at the well-known URIs", async () => {
    const { origin } = await start({ challenge: (o) => `Bearer resource_metadata="${o}/x` })
    expect(problems(await stage.run(newWalk(`${origin}/mcp`)))).toEqual([
      {
        check: "challenge.syntax",
        status: "fail",
        revisions: ALL,
        detail: "Malformed WWW-Authenticate at position 25: unterminated quoted-string",
      },
    ])
  })

  it("a resource with a trailing slash", async () => {
    const { origin } = await start({
      metadata: (o) => ({ resource: `${o}/mcp/`, authorization_servers: [ISSUER], scopes_supported: ["tools:read"] }),
    })
    expect(problems(await stage.run(newWalk(`${origin}/mcp`)))).toEqual([
      {
        check: "prm.resource",
        status: "warn",
        revisions: PRM,
        detail: `resource is "${origin}/mcp/" but the server URL is "${origin}/mcp" (a trailing slash differs)`,
      },
    ])
  })

  it("a resource on another port: clients refuse the metadata", async () => {
    const { origin } = await start({
      metadata: () => ({ resource: "http://127.0.0.1:1/mcp", authorization_servers: [ISSUER] }),
    })
    expect(problems(await stage.run(newWalk(`${origin}/mcp`)))).toEqual([
      {
        check: "prm.resource",
        status: "fail",
        revisions: PRM,
        detail: `resource is "http://127.0.0.1:1/mcp" but the server URL is "${origin}/mcp" (another port): clients refuse the metadata`,
      },
    ])
  })

  it("the metadata redirected to another origin", async () => {
    let mcp = ""
    const elsewhere = await start({
      metadata: () => ({ resource: `${mcp}/mcp`, authorization_servers: [ISSUER], scopes_supported: ["tools:read"] }),
    })
    const path = "/.well-known/oauth-protected-resource/mcp"
    const server = await start({ redirects: { [path]: () => `${elsewhere.origin}${path}` } })
    mcp = server.origin
    const walk = newWalk(`${mcp}/mcp`)
    expect(problems(await stage.run(walk))).toEqual([
      {
        check: "prm.no-redirect",
        status: "fail",
        revisions: PRM,
        detail: `redirected to another origin: ${mcp}${path} answered 302 to ${elsewhere.origin}${path}`,
      },
    ])
    expect(walk.resourceMetadata?.url).toBe(`${elsewhere.origin}${path}`)
  })

  it("root-only metadata for a server under a sub-path", async () => {
    const { origin } = await start({
      metadataAt: ["root"],
      challenge: (o) => `Bearer resource_metadata="${o}/.well-known/oauth-protected-resource", scope="tools:read"`,
    })
    expect(problems(await stage.run(newWalk(`${origin}/mcp`)))).toEqual([
      {
        check: "prm.path-location",
        status: "warn",
        revisions: FALLBACK,
        detail: `${origin}/.well-known/oauth-protected-resource/mcp answered 404; only the root well-known URI answers`,
      },
    ])
  })

  it("the metadata served as text/plain", async () => {
    const { origin } = await start({ metadataType: "text/plain" })
    expect(problems(await stage.run(newWalk(`${origin}/mcp`)))).toEqual([
      {
        check: "prm.json",
        status: "warn",
        revisions: PRM,
        detail: "a valid JSON document served as text/plain, not application/json",
      },
    ])
  })

  it("no authorization_servers", async () => {
    const { origin } = await start({ metadata: (o) => ({ resource: `${o}/mcp`, scopes_supported: ["tools:read"] }) })
    const walk = newWalk(`${origin}/mcp`)
    expect(problems(await stage.run(walk))).toEqual([
      {
        check: "prm.authorization-servers",
        status: "fail",
        revisions: PRM,
        detail: "no authorization_servers member",
      },
    ])
    expect(walk.authorizationServers.size).toBe(0)
  })

  it("no CORS", async () => {
    const { origin } = await start({ cors: false })
    expect(problems(await stage.run(newWalk(`${origin}/mcp`)))).toEqual([
      {
        check: "cors.prm",
        status: "warn",
        revisions: PRM,
        detail: `GET ${origin}/.well-known/oauth-protected-resource/mcp from origin ${BROWSER} answered 200 without access-control-allow-origin`,
      },
      {
        check: "cors.mcp",
        status: "warn",
        revisions: ALL,
        detail: `from origin ${BROWSER}: the preflight (OPTIONS) answered 405; the 401 answer has no access-control-allow-origin for the origin`,
      },
    ])
  })

  it("a Date header 10 minutes off", async () => {
    const { origin } = await start({ date: "Wed, 01 Jul 2026 12:10:00 GMT" })
    const walk = newWalk(`${origin}/mcp`, { now: () => Date.parse("2026-07-01T12:00:00Z") })
    expect(problems(await stage.run(walk))).toEqual([
      {
        check: "clock.skew",
        status: "fail",
        revisions: ALL,
        detail: "Date: Wed, 01 Jul 2026 12:10:00 GMT is 600 s ahead of the local clock",
      },
    ])
  })

  it("a Date header 2 minutes behind: a warning", async () => {
    const { origin } = await start({ date: "Wed, 01 Jul 2026 11:58:00 GMT" })
    const walk = newWalk(`${origin}/mcp`, { now: () => Date.parse("2026-07-01T12:00:00Z") })
    expect(problems(await stage.run(walk))).toEqual([
      {
        check: "clock.skew",
        status: "warn",
        revisions: ALL,
        detail: "Date: Wed, 01 Jul 2026 11:58:00 GMT is 120 s behind the local clock",
      },
    ])
  })

  it("http on a public host name", async () => {
    const publicOrigin = "http://mcp.example.com"
    const { origin } = await start({
      challenge: () =>
        `Bearer resource_metadata="${publicOrigin}/.well-known/oauth-protected-resource/mcp", scope="tools:read"`,
      metadata: () => ({
        resource: `${publicOrigin}/mcp`,
        authorization_servers: [ISSUER],
        scopes_supported: ["tools:read"],
      }),
    })
    const walk = newWalk(`${publicOrigin}/mcp`, { fetch: mapHost("mcp.example.com", origin) })
    expect(problems(await stage.run(walk))).toEqual([
      {
        check: "transport.https",
        status: "fail",
        revisions: ALL,
        detail: "http on the public host mcp.example.com: tokens would travel in clear",
      },
    ])
  })

  it("2025-03-26 only: no protected resource metadata is looked for", async () => {
    const { origin } = await start({ challenge: () => "Bearer" })
    const walk = newWalk(`${origin}/mcp`, { revisions: ["2025-03-26"] })
    const findings = await stage.run(walk)
    expect(problems(findings)).toEqual([])
    expect(findings.map((f) => f.check)).toEqual([
      "transport.https",
      "mcp.reachable",
      "challenge.status",
      "challenge.syntax",
      "challenge.no-error-without-token",
      "cors.mcp",
      "clock.skew",
    ])
  })

  it("an unreachable MCP server stops the walk", async () => {
    const port = await freePort()
    const target = `http://127.0.0.1:${port}/mcp`
    const diagnosis = await diagnose(target)
    expect(summary(diagnosis.findings)).toEqual([
      {
        check: "transport.https",
        status: "pass",
        revisions: ALL,
        detail: "http on the loopback host 127.0.0.1 (local development)",
      },
      {
        check: "mcp.reachable",
        status: "fail",
        revisions: ALL,
        detail: `POST ${target} got no answer: connect ECONNREFUSED 127.0.0.1:${port}`,
      },
    ])
    expect(diagnosis.stopped).toBe(`the MCP server ${target} cannot be reached: connect ECONNREFUSED 127.0.0.1:${port}`)
  })
})
