import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { type AuthorizationServer, createAuthorizationServer, NodeServer } from "@keyway/authorization-server"
import { clientCredentialsGrant } from "@keyway/ext-client-credentials/authorization-server"
import { createProtectedResource, jwt, type Presentation, toNodeListener } from "@keyway/resource-server/node"
import { type DPoPServerOptions, dpopAuthorizationServer } from "../../src/authorization-server.js"

export const SECRET = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t"
export const SCOPES = { "notes:read": "Read notes" } as const

const listening = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const closing = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })

/** One request as a server saw it. */
export interface Seen {
  readonly url: string
  readonly authorization: string | null
  readonly dpop: string | null
  readonly status: number
}

export interface Stack {
  readonly issuer: string
  readonly mcp: string
  readonly tokenRequests: ReadonlyArray<Seen>
  readonly mcpRequests: ReadonlyArray<Seen>
  readonly close: () => Promise<void>
}

export interface StackOptions {
  /** The DPoP extension of the authorization server; none when null. */
  readonly server?: DPoPServerOptions | null
  /** The presentation schemes of the MCP server. */
  readonly schemes?: ReadonlyArray<Presentation.PresentationScheme>
  readonly authorizationServer?: Partial<AuthorizationServer.AuthorizationServerOptions>
}

/**
 * A Keyway authorization server (client credentials for `machine`, DPoP unless `server` is null) and a protected MCP
 * endpoint with the given presentation schemes, on loopback; both record what they were sent.
 */
export const startStack = async (options: StackOptions = {}): Promise<Stack> => {
  const asServer = createServer()
  const rsServer = createServer()
  const issuer = await listening(asServer)
  const mcp = `${await listening(rsServer)}/mcp`
  const authorizationServer = createAuthorizationServer({
    issuer,
    resources: [{ uri: mcp, name: "Notes", scopes: SCOPES }],
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
    clients: [
      { clientId: "machine", clientSecret: SECRET, redirectUris: [], grantTypes: ["client_credentials"] },
      { clientId: "other", clientSecret: SECRET, redirectUris: [], grantTypes: ["client_credentials"] },
    ],
    introspectionClients: ["machine"],
    extensions: [
      clientCredentialsGrant({}),
      ...(options.server === null ? [] : [dpopAuthorizationServer(options.server ?? {})]),
    ],
    ...options.authorizationServer,
  })
  const tokenRequests: Array<Seen> = []
  const mcpRequests: Array<Seen> = []
  const record = (into: Array<Seen>, request: Request, response: Response) => {
    into.push({
      url: request.url,
      authorization: request.headers.get("authorization"),
      dpop: request.headers.get("dpop"),
      status: response.status,
    })
    return response
  }
  asServer.on(
    "request",
    NodeServer.toNodeListener(
      async (request) => {
        const response = await authorizationServer.handler(request)
        return new URL(request.url).pathname === "/token" ? record(tokenRequests, request, response) : response
      },
      { publicUrl: issuer },
    ),
  )
  const guard = createProtectedResource({
    resource: mcp,
    authorizationServers: [issuer],
    verifier: jwt({ jwksUri: `${issuer}/jwks` }),
    scopesSupported: Object.keys(SCOPES),
    requiredScopes: ["notes:read"],
    presentationSchemes: options.schemes ?? [],
  })
  const protect = guard.protect(async (request, { token }) => {
    const body = (await request.json()) as { id: number }
    return Response.json({ jsonrpc: "2.0", id: body.id, result: { subject: token.subject, cnf: token.claims.cnf } })
  })
  rsServer.on(
    "request",
    toNodeListener(async (request) =>
      new URL(request.url).pathname === "/mcp"
        ? record(mcpRequests, request, await protect(request))
        : protect(request),
    ),
  )
  return {
    issuer,
    mcp,
    tokenRequests,
    mcpRequests,
    close: async () => {
      await Promise.all([asServer, rsServer].map(closing))
      await guard.close()
      await authorizationServer.close()
    },
  }
}

/** A JSON-RPC call with a plain fetch-like function. */
export const call = (
  fetch: (input: string, init: RequestInit) => Promise<Response>,
  url: string,
  headers: Record<string, string> = {},
) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  })
