import { createServer } from "node:http"
import { createAuthorizationServer, NodeServer, UserAuthenticator } from "@keyway/authorization-server"
import { createProtectedResource, jwt, type ProtectedResource, toNodeListener } from "@keyway/resource-server/node"
import { closing, listening } from "@keyway/testing"

/** The demo user every stack knows. */
export const USER = { username: "alice", password: "correct horse battery staple" } as const

/** The scopes of the notes server, with the descriptions the consent page shows. */
export const NOTE_SCOPES = {
  "notes:read": "Read your notes",
  "notes:write": "Create and change your notes",
} as const

/** A running authorization server, and the resource servers it issues for. */
export interface Stack {
  readonly issuer: string
  readonly mcp: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

/**
 * Starts one Keyway authorization server and `count` protected MCP endpoints on loopback. Each endpoint answers
 * JSON-RPC with the caller's subject and scopes; every request needs `notes:read`, and `tools/call` of `write_note`
 * needs `notes:write`.
 */
export const startStack = async (
  count = 1,
  resource: Partial<ProtectedResource.ProtectedResourceOptions> = {},
): Promise<Stack> => {
  const asServer = createServer()
  const issuer = await listening(asServer)
  const rsServers = Array.from({ length: count }, () => createServer())
  const origins = await Promise.all(rsServers.map(listening))
  const mcp = origins.map((origin) => `${origin}/mcp`)
  const authorizationServer = createAuthorizationServer({
    issuer,
    resources: mcp.map((uri, i) => ({ uri, name: `Notes ${i + 1}`, scopes: NOTE_SCOPES })),
    users: [{ username: USER.username, passwordHash: await UserAuthenticator.hashPassword(USER.password) }],
    registration: true,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
  })
  asServer.on("request", NodeServer.toNodeListener(authorizationServer.handler, { publicUrl: issuer }))
  const metadata = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as {
    jwks_uri: string
  }
  const closers: Array<() => Promise<void>> = []
  rsServers.forEach((server, i) => {
    const guard = createProtectedResource({
      resource: mcp[i]!,
      authorizationServers: [issuer],
      verifier: jwt({ jwksUri: metadata.jwks_uri }),
      scopesSupported: Object.keys(NOTE_SCOPES),
      requiredScopes: ["notes:read"],
      toolScopes: { write_note: ["notes:write"] },
      ...resource,
    })
    const handler = guard.protect(async (request, { token }) => {
      const body = (await request.json()) as { id: number }
      return Response.json({ jsonrpc: "2.0", id: body.id, result: { subject: token.subject, scopes: token.scopes } })
    })
    server.on("request", toNodeListener(handler))
    closers.push(() => guard.close())
  })
  return {
    issuer,
    mcp,
    close: async () => {
      await Promise.all([asServer, ...rsServers].map(closing))
      await Promise.all(closers.map((close) => close()))
      await authorizationServer.close()
    },
  }
}
