/**
 * The whole stack of the connections' tests on loopback: node-oidc-provider playing the third-party provider (with
 * its API under `/api`), the MCP server's site with the connect pages and a protected MCP endpoint (SDK 2.4.0
 * `McpServer`: 2025-era requests on a sessionful streamable HTTP transport, 2026-07-28 ones through
 * `createMcpHandler`), and the connections on Effect's `TestClock` over the package's memory vault.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { listen } from "@keyway/http/node"
import { protectMcp } from "@keyway/mcp-sdk-server"
import { createProtectedResource, custom } from "@keyway/resource-server/node"
import {
  type AuthInfo,
  createMcpHandler,
  isLegacyRequest,
  McpServer,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server"
import { Clock, Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import Provider from "oidc-provider"
import { Connections, type ConnectionsOptions, toClient } from "../../src/Connections.js"
import * as KeyRing from "../../src/KeyRing.js"
import { connectionTools } from "../../src/mcp-sdk.js"
import { Vault } from "../../src/Vault.js"

/** The MCP authorization server the test tokens name; tokens are `user.<subject>`. */
export const MCP_ISSUER = "https://as.example"
export const CLIENT_SECRET = "a secret of the notes server at the code host"
/** Milliseconds a 2026-07-28 retry waits for the connect flow (on the TestClock). */
export const RETRY_WAIT = 30_000

type Cleanups = Array<() => Promise<void>>

export interface StackOptions {
  readonly flowTtl?: number
}

export const startStack = async (cleanups: Cleanups, stackOptions: StackOptions = {}) => {
  const http = createServer()
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  const apiBase = `${issuer}/api`
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const site = await listen((request) => handler(request), { host: "127.0.0.1", port: 0 })
  cleanups.push(site.close)
  const counts = { refreshes: 0, revocations: 0, brokenRevocations: 0 }
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: "mcp-notes",
        client_secret: CLIENT_SECRET,
        redirect_uris: ["codehost", "manual", "brittle"].map((id) => `${site.url}/connect/${id}/callback`),
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      },
    ],
    cookies: { keys: ["a test key that is long enough to sign the cookies"] },
    features: {
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => apiBase,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({ scope: "", audience: resource, accessTokenFormat: "opaque" }),
      },
    },
    // Refresh tokens without `prompt=consent`, which the provider otherwise requires for offline_access.
    issueRefreshToken: async () => true,
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  })
  provider.on("grant.success", (ctx) => {
    if (ctx.oidc.params?.grant_type === "refresh_token") counts.refreshes++
  })
  const callback = provider.callback()
  http.on("request", async (req, res) => {
    if (req.url?.startsWith("/api/") === true) {
      const token = /^Bearer (.+)$/u.exec(req.headers.authorization ?? "")?.[1]
      const found = token === undefined ? undefined : await provider.AccessToken.find(token)
      res.writeHead(found === undefined ? 401 : 200, { "content-type": "application/json" })
      res.end(JSON.stringify(found === undefined ? { error: "invalid_token" } : { login: found.accountId }))
      return
    }
    if (req.url === "/broken/revocation") {
      counts.brokenRevocations++
      res.writeHead(503, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: "temporarily_unavailable" }))
      return
    }
    if (req.method === "POST" && req.url === "/token/revocation") counts.revocations++
    callback(req, res)
  })
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections()
        http.close(() => resolve())
      }),
  )

  const common = { clientId: "mcp-notes", clientSecret: CLIENT_SECRET, scopes: ["openid", "offline_access"], apiBase }
  const options: ConnectionsOptions = {
    baseUrl: site.url,
    serverName: "Keyway notes",
    providers: {
      codehost: { name: "Code Host", issuer, ...common },
      // The same provider given by its endpoints, as for one that publishes no metadata.
      manual: {
        name: "Manual Host",
        endpoints: {
          authorization: `${issuer}/auth`,
          token: `${issuer}/token`,
          revocation: `${issuer}/token/revocation`,
        },
        ...common,
      },
      brittle: {
        name: "Brittle Host",
        endpoints: {
          authorization: `${issuer}/auth`,
          token: `${issuer}/token`,
          revocation: `${issuer}/broken/revocation`,
        },
        ...common,
      },
    },
    ...(stackOptions.flowTtl === undefined ? {} : { flowTtl: stackOptions.flowTtl }),
  }
  const keyRing = KeyRing.make({ keys: [{ id: "-2025", key: KeyRing.generateKey() }] })
  const runtime = ManagedRuntime.make(
    Layer.provideMerge(Connections.layer(options), Vault.layerMemory(keyRing)).pipe(
      Layer.provideMerge(
        Layer.provideMerge(
          Layer.effectDiscard(TestClock.setTime(Date.now())),
          TestClock.layer({ warningDelay: "1 hour" }),
        ),
      ),
    ),
  )
  cleanups.push(() => runtime.dispose())
  const service = await runtime.runPromise(Connections.useSync((s) => s))
  const vault = await runtime.runPromise(Vault.useSync((v) => v))
  const connections = toClient(service, (effect) => runtime.runPromise(effect))
  /** Moves the connections' clock on by `millis`. */
  const adjust = (millis: number) => runtime.runPromise(TestClock.adjust(millis))
  const now = () => runtime.runPromise(Clock.currentTimeMillis)

  const resource = `${site.url}/mcp`
  const guard = createProtectedResource({
    resource,
    authorizationServers: [MCP_ISSUER],
    scopesSupported: ["mcp"],
    requiredScopes: ["mcp"],
    verifier: custom((token) => {
      const subject = /^user\.(.+)$/u.exec(token)?.[1]
      return subject === undefined
        ? null
        : {
            subject,
            clientId: "an-mcp-client",
            issuer: MCP_ISSUER,
            scopes: ["mcp"],
            audience: [resource],
            expiresAt: Math.floor(Date.now() / 1000) + 600,
            claims: { sub: subject },
          }
    }),
  })
  cleanups.push(() => guard.close())
  const makeServer = () => {
    const server = new McpServer({ name: "keyway-notes", version: "1.0.0" })
    const { withConnection } = connectionTools(connections, { server, retryWait: RETRY_WAIT })
    server.registerTool(
      "whoami_at_codehost",
      { description: "Your login at the code host" },
      withConnection("codehost", async (fetch) => {
        const answer = await fetch(`${apiBase}/user`)
        return { content: [{ type: "text", text: `${answer.status} ${await answer.text()}` }] }
      }),
    )
    return server
  }
  // 2025-era clients keep a session: the completion notification goes out on its stream.
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>()
  const legacy = async (request: Request, authInfo: AuthInfo) => {
    const id = request.headers.get("mcp-session-id")
    let transport = id === null ? undefined : sessions.get(id)
    if (transport === undefined) {
      const created = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (sessionId) => {
          sessions.set(sessionId, created)
        },
      })
      await makeServer().connect(created)
      transport = created
    }
    return transport.handleRequest(request, { authInfo })
  }
  cleanups.push(async () => {
    for (const transport of sessions.values()) await transport.close()
  })
  const modern = createMcpHandler(makeServer, { legacy: "reject" })
  cleanups.push(() => modern.close())
  const mcp = protectMcp(guard, async (request, { authInfo }) =>
    (await isLegacyRequest(request)) ? legacy(request, authInfo) : modern.fetch(request, { authInfo }),
  )
  const served = new Set(["/mcp", ...guard.metadataPaths])
  handler = async (request) => {
    if (served.has(new URL(request.url).pathname)) return mcp(request)
    return (await connections.handle(request)) ?? new Response(null, { status: 404 })
  }
  return { connections, vault, site, apiBase, issuer, provider, counts, adjust, now, resource, runtime }
}
