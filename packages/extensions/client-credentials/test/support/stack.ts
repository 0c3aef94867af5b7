import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { type AuthorizationServer, createAuthorizationServer, NodeServer } from "@keyway/authorization-server"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server"

export const SCOPES = { "notes:read": "Read notes", "notes:write": "Write notes" } as const
export const SECRET = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t"

export const listening = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

export const closing = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })

/** One token-endpoint request as the authorization server saw it. */
export interface SeenTokenRequest {
  readonly form: URLSearchParams
  readonly authorization: string | null
}

export interface Stack {
  readonly issuer: string
  /** Two protected MCP endpoints, each its own resource; every request needs notes:read, write_note notes:write. */
  readonly mcp: readonly [string, string]
  readonly tokenRequests: ReadonlyArray<SeenTokenRequest>
  readonly close: () => Promise<void>
}

/**
 * A Keyway authorization server with the given options (issuer and resources filled in) and two protected MCP
 * endpoints on loopback, answering JSON-RPC with the caller's subject, client and scopes.
 */
export const startStack = async (
  options: (
    mcp: readonly [string, string],
  ) => Omit<AuthorizationServer.AuthorizationServerOptions, "issuer" | "resources">,
): Promise<Stack> => {
  const asServer = createServer()
  const issuer = await listening(asServer)
  const rsServers = [createServer(), createServer()] as const
  const mcp = [`${await listening(rsServers[0])}/mcp`, `${await listening(rsServers[1])}/mcp`] as const
  const authorizationServer = createAuthorizationServer({
    issuer,
    resources: mcp.map((uri, i) => ({ uri, name: `Notes ${i + 1}`, scopes: SCOPES })),
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
    ...options(mcp),
  })
  const tokenRequests: Array<SeenTokenRequest> = []
  const handler = NodeServer.toNodeListener(
    async (request) => {
      if (new URL(request.url).pathname === "/token") {
        tokenRequests.push({
          form: new URLSearchParams(await request.clone().text()),
          authorization: request.headers.get("authorization"),
        })
      }
      return authorizationServer.handler(request)
    },
    { publicUrl: issuer },
  )
  asServer.on("request", handler)
  const guards = rsServers.map((server, i) => {
    const guard = createProtectedResource({
      resource: mcp[i]!,
      authorizationServers: [issuer],
      verifier: jwt({ jwksUri: `${issuer}/jwks` }),
      scopesSupported: Object.keys(SCOPES),
      requiredScopes: ["notes:read"],
      toolScopes: { write_note: ["notes:write"] },
    })
    server.on(
      "request",
      toNodeListener(
        guard.protect(async (request, { token }) => {
          const body = (await request.json()) as { id: number }
          return Response.json({
            jsonrpc: "2.0",
            id: body.id,
            result: { subject: token.subject, clientId: token.clientId, scopes: token.scopes },
          })
        }),
      ),
    )
    return guard
  })
  return {
    issuer,
    mcp,
    tokenRequests,
    close: async () => {
      await Promise.all([asServer, ...rsServers].map(closing))
      await Promise.all(guards.map((guard) => guard.close()))
      await authorizationServer.close()
    },
  }
}

/** A JSON-RPC call with a plain fetch-like function. */
export const call = (
  fetch: (input: string, init: RequestInit) => Promise<Response>,
  url: string,
  method: string,
  params: Record<string, unknown> = {},
) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  })
