/**
 * Real loopback servers for the registration and login stages: Keyway's authorization server, a Keyway resource
 * server in front of the official MCP SDK server (a tool that needs more scope), and walks seeded with what the
 * earlier stages would have found.
 */
import { createServer } from "node:http"
import { createAuthorizationServer, NodeServer, UserAuthenticator } from "@keyway/authorization-server"
import { Revision } from "@keyway/core"
import { protectMcp } from "@keyway/mcp-sdk-server"
import { createProtectedResource, jwt, type TokenVerifier, toNodeListener } from "@keyway/resource-server/node"
import { closing, listening } from "@keyway/testing"
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server"
import { z } from "zod"
import { createProbe } from "../../src/Probe.js"
import type { DiagnoseOptions, Walk } from "../../src/Walk.js"

export const USER = { username: "alice", password: "correct horse battery staple" } as const

export const SCOPES = { "notes:read": "Read your notes", "notes:write": "Write your notes" } as const

const notesServer = () => {
  const server = new McpServer({ name: "notes", version: "1.0.0" })
  server.registerTool(
    "read_note",
    { description: "Reads a note", inputSchema: z.object({ title: z.string() }) },
    async ({ title }) => ({ content: [{ type: "text", text: `note ${title}` }] }),
  )
  server.registerTool(
    "write_note",
    { description: "Writes a note", inputSchema: z.object({ title: z.string(), text: z.string() }) },
    async ({ title }) => ({ content: [{ type: "text", text: `saved ${title}` }] }),
  )
  return server
}

export interface KeywayStack {
  readonly issuer: string
  /** The MCP endpoint. */
  readonly mcp: string
  readonly close: () => Promise<void>
}

export interface KeywayStackOptions {
  /** Replaces the resource server's verifier (a misconfigured one). */
  readonly verifier?: (jwksUri: string, resource: string) => TokenVerifier.VerifierDefinition
}

/**
 * Keyway's authorization server (dynamic registration, client ID metadata documents on loopback for development,
 * the test user) and a Keyway resource server protecting the MCP SDK server: every request needs `notes:read`,
 * `write_note` needs `notes:write`.
 */
export const startKeywayStack = async (options: KeywayStackOptions = {}): Promise<KeywayStack> => {
  const asServer = createServer()
  const issuer = await listening(asServer)
  const rsServer = createServer()
  const origin = await listening(rsServer)
  const mcp = `${origin}/mcp`
  const authorizationServer = createAuthorizationServer({
    issuer,
    resources: [{ uri: mcp, name: "Notes", scopes: SCOPES }],
    users: [{ username: USER.username, passwordHash: await UserAuthenticator.hashPassword(USER.password) }],
    registration: true,
    clientIdMetadataDocuments: { allowHttpLoopbackClientIds: true },
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
  })
  asServer.on("request", NodeServer.toNodeListener(authorizationServer.handler, { publicUrl: issuer }))
  const metadata = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as {
    jwks_uri: string
  }
  const jwksUri = metadata.jwks_uri
  const guard = createProtectedResource({
    resource: mcp,
    authorizationServers: [issuer],
    verifier: options.verifier?.(jwksUri, mcp) ?? jwt({ jwksUri }),
    scopesSupported: Object.keys(SCOPES),
    requiredScopes: ["notes:read"],
    toolScopes: { write_note: ["notes:write"] },
  })
  const handler = createMcpHandler(notesServer)
  rsServer.on("request", toNodeListener(protectMcp(guard, handler)))
  return {
    issuer,
    mcp,
    close: async () => {
      await Promise.all([asServer, rsServer].map(closing))
      await handler.close()
      await guard.close()
      await authorizationServer.close()
    },
  }
}

/**
 * A walk as the resource and authorization server stages leave it: the protected resource metadata of `target`
 * (when it answers) and the metadata of each issuer, fetched from their well-known locations.
 */
export const seededWalk = async (
  target: string,
  issuers: ReadonlyArray<string>,
  options: DiagnoseOptions = {},
): Promise<Walk> => {
  const walk: Walk = {
    target,
    revisions: options.revisions ?? Revision.all,
    options,
    probe: createProbe(),
    authorizationServers: new Map(),
  }
  const url = new URL(target)
  const prmUrl = `${url.origin}/.well-known/oauth-protected-resource${url.pathname}`
  // A made-up MCP server URL (a walk about the authorization server only) has no metadata to find.
  const prm = await fetch(prmUrl).catch(() => undefined)
  if (prm?.ok === true) walk.resourceMetadata = { url: prmUrl, document: (await prm.json()) as Record<string, unknown> }
  const unauthenticated = await fetch(target, {
    method: "POST",
    headers: { accept: "application/json, text/event-stream", "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  }).catch(() => undefined)
  if (unauthenticated !== undefined) {
    walk.unauthenticated = {
      status: unauthenticated.status,
      wwwAuthenticate: unauthenticated.headers.get("www-authenticate"),
    }
  }
  for (const issuer of issuers) {
    const metadataUrl = `${new URL(issuer).origin}/.well-known/oauth-authorization-server${new URL(issuer).pathname.replace(/\/$/, "")}`
    const response = await fetch(metadataUrl)
    walk.authorizationServers.set(issuer, {
      issuer,
      metadata: (await response.json()) as Record<string, unknown>,
      metadataUrl,
    })
  }
  return walk
}
