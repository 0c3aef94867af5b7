/**
 * Real loopback servers for the registration and login stages: Keyway's authorization server, a Keyway resource
 * server in front of the official MCP SDK server (a tool that needs more scope), and walks seeded with what the
 * earlier stages would have found.
 */
import { createPublicKey, verify } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createAuthorizationServer, NodeServer, UserAuthenticator } from "@keyway/authorization-server"
import { Challenge, Revision, Scope } from "@keyway/core"
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
  /** The second resource the authorization server serves, with `otherResource` (`<MCP origin>/archive`). */
  readonly other: string
  readonly close: () => Promise<void>
}

export interface KeywayStackOptions {
  /** Replaces the resource server's verifier (a misconfigured one). */
  readonly verifier?: (jwksUri: string, resource: string) => TokenVerifier.VerifierDefinition
  /** The authorization server also serves `other`, with the same scopes (for the audience check). */
  readonly otherResource?: true
  /**
   * Replaces the Keyway resource server by a node:http MCP endpoint that checks a token's signature, issuer, expiry
   * and scope, but not its audience: it accepts a token for any resource of its authorization server.
   */
  readonly audienceUnchecked?: true
}

const base64url = (part: string): Buffer => Buffer.from(part, "base64url")

/** The claims of a JWT signed by a key of the JWK Set, undefined when no key verifies it. */
const verifiedClaims = (token: string, keys: ReadonlyArray<Record<string, unknown>>) => {
  const [header, payload, signature] = token.split(".")
  if (header === undefined || payload === undefined || signature === undefined) return undefined
  const kid = (JSON.parse(base64url(header).toString("utf8")) as { kid?: unknown }).kid
  const jwk = keys.find((key) => key.kid === kid)
  if (jwk === undefined) return undefined
  const key = createPublicKey({ key: jwk, format: "jwk" })
  const data = Buffer.from(`${header}.${payload}`)
  const good =
    jwk.kty === "OKP"
      ? verify(null, data, key, base64url(signature))
      : verify(
          jwk.crv === "P-384" ? "sha384" : jwk.crv === "P-521" ? "sha512" : "sha256",
          data,
          jwk.kty === "EC" ? { key, dsaEncoding: "ieee-p1363" } : key,
          base64url(signature),
        )
  return good ? (JSON.parse(base64url(payload).toString("utf8")) as Record<string, unknown>) : undefined
}

/** The MCP endpoint that forgets the audience: everything else as a careful server does it. */
const audienceUncheckedListener =
  (issuer: string, jwksUri: string, mcp: string) => async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", mcp)
    const metadataPath = `/.well-known/oauth-protected-resource${new URL(mcp).pathname}`
    if (url.pathname === metadataPath) {
      response.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          resource: mcp,
          authorization_servers: [issuer],
          scopes_supported: Object.keys(SCOPES),
          bearer_methods_supported: ["header"],
        }),
      )
      return
    }
    const chunks: Array<Buffer> = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const message = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as { id?: unknown; method?: unknown }
    const challenge = (params: Challenge.BearerParams) => ({
      "www-authenticate": Challenge.formatBearer({ resource_metadata: `${url.origin}${metadataPath}`, ...params }),
    })
    const authorization = request.headers.authorization ?? ""
    if (!authorization.startsWith("Bearer ")) {
      response.writeHead(401, challenge({ scope: "notes:read" })).end()
      return
    }
    const { keys } = (await (await fetch(jwksUri)).json()) as { keys: Array<Record<string, unknown>> }
    const claims = verifiedClaims(authorization.slice("Bearer ".length), keys)
    if (
      claims === undefined ||
      claims.iss !== issuer ||
      typeof claims.exp !== "number" ||
      claims.exp * 1000 < Date.now()
    ) {
      response.writeHead(401, challenge({ error: "invalid_token" })).end()
      return
    }
    if (!Scope.containsAll(Scope.parse(String(claims.scope ?? "")), ["notes:read"])) {
      response.writeHead(403, challenge({ error: "insufficient_scope", scope: "notes:read" })).end()
      return
    }
    const result = message.method === "tools/list" ? { tools: [] } : { protocolVersion: "2025-11-25", capabilities: {} }
    response
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ jsonrpc: "2.0", id: message.id ?? null, result }))
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
  const other = `${origin}/archive`
  const authorizationServer = createAuthorizationServer({
    issuer,
    resources: [
      { uri: mcp, name: "Notes", scopes: SCOPES },
      ...(options.otherResource === true ? [{ uri: other, name: "Archive", scopes: SCOPES }] : []),
    ],
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
  if (options.audienceUnchecked === true) {
    const listener = audienceUncheckedListener(issuer, jwksUri, mcp)
    rsServer.on("request", (request, response) => {
      listener(request, response).catch((error: unknown) => {
        if (!response.headersSent) response.writeHead(500).end(String(error))
      })
    })
    return {
      issuer,
      mcp,
      other,
      close: async () => {
        await Promise.all([asServer, rsServer].map(closing))
        await authorizationServer.close()
      },
    }
  }
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
    other,
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
