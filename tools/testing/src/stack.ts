/**
 * A real MCP server (the official SDK v2 server's handler) on 127.0.0.1, behind a Bearer gate that trusts the
 * loopback authorization server of the test peers in `@keyway/testing/peers` (auto-approving authorization
 * endpoint, PKCE, dynamic registration). Tools: `echo` (needs `tools:read`) and `notes-write` (needs `notes:write`,
 * so calling it steps up).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Challenge, Scope } from "@keyway/core"
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server"
import * as z from "zod/v4"
import { type AuthorizationServerOptions, type AuthorizationServerPeer, startAuthorizationServer } from "./peers.js"

export interface McpRequest {
  readonly method: string | undefined
  readonly status: number
  readonly authorized: boolean
  readonly protocolVersion: string | undefined
}

export interface Stack {
  readonly as: AuthorizationServerPeer
  /** The MCP endpoint. */
  readonly url: string
  readonly requests: Array<McpRequest>
  readonly close: () => Promise<void>
}

const TOOL_SCOPES: Readonly<Record<string, string>> = { echo: "tools:read", "notes-write": "tools:read notes:write" }

const buildServer = () => {
  const server = new McpServer({ name: "keyway-test-mcp-server", version: "1.0.0" })
  server.registerTool(
    "echo",
    { description: "Repeats the text it is given", inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: "text", text: `echo: ${text}` }] }),
  )
  server.registerTool(
    "notes-write",
    { description: "Writes a note (needs notes:write)", inputSchema: z.object({ note: z.string() }) },
    async ({ note }) => ({ content: [{ type: "text", text: `saved: ${note}` }] }),
  )
  server.registerTool("fail", { description: "Always fails" }, async () => ({
    isError: true,
    content: [{ type: "text", text: "the disk is full" }],
  }))
  return server
}

/** Starts the authorization server peer and the protected MCP server. */
export const startStack = async (asOptions: AuthorizationServerOptions = {}): Promise<Stack> => {
  const as = await startAuthorizationServer({
    ...asOptions,
    metadata: (m) => {
      const base = { ...m, scopes_supported: ["tools:read", "notes:write", "offline_access"] }
      return asOptions.metadata?.(base) ?? base
    },
  })
  const handler = createMcpHandler(buildServer)
  const requests: Array<McpRequest> = []
  let origin = ""
  const send = async (res: ServerResponse, response: Response) => {
    res.writeHead(response.status, Object.fromEntries(response.headers))
    const reader = response.body?.getReader()
    for (let part = await reader?.read(); part !== undefined && !part.done; part = await reader?.read()) {
      res.write(part.value)
    }
    res.end()
  }
  const handle = async (req: IncomingMessage, body: string): Promise<Response> => {
    const path = new URL(req.url ?? "/", origin).pathname
    const metadataUrl = `${origin}/.well-known/oauth-protected-resource/mcp`
    if (path === "/.well-known/oauth-protected-resource/mcp") {
      return Response.json({
        resource: `${origin}/mcp`,
        authorization_servers: [as.issuer],
        scopes_supported: ["tools:read", "notes:write"],
      })
    }
    if (path !== "/mcp") return new Response("Not Found", { status: 404 })
    let message: { method?: string; params?: { name?: string } } | undefined
    try {
      message = body === "" ? undefined : (JSON.parse(body) as typeof message)
    } catch {
      message = undefined
    }
    const record = (status: number, authorized: boolean) => {
      const version = req.headers["mcp-protocol-version"]
      requests.push({
        method: message?.method,
        status,
        authorized,
        protocolVersion: typeof version === "string" ? version : undefined,
      })
    }
    const authorization = req.headers.authorization
    const token = authorization?.startsWith("Bearer ") ? authorization.slice(7) : undefined
    const issued = token === undefined ? undefined : as.lookup(token)
    if (
      issued === undefined ||
      issued.revoked ||
      issued.expires_at <= Date.now() ||
      issued.resource !== `${origin}/mcp`
    ) {
      record(401, false)
      return new Response(null, {
        status: 401,
        headers: {
          "www-authenticate": Challenge.formatBearer({
            resource_metadata: metadataUrl,
            scope: "tools:read",
            ...(token === undefined ? {} : { error: "invalid_token" }),
          }),
        },
      })
    }
    const needed =
      message?.method === "tools/call"
        ? TOOL_SCOPES[message.params?.name ?? ""]
        : req.method === "POST"
          ? "tools:read"
          : undefined
    if (needed !== undefined && !Scope.containsAll(Scope.parse(issued.scope), Scope.parse(needed))) {
      record(403, true)
      return new Response(null, {
        status: 403,
        headers: {
          "www-authenticate": Challenge.formatBearer({
            resource_metadata: metadataUrl,
            scope: needed,
            error: "insufficient_scope",
          }),
        },
      })
    }
    const headers = new Headers()
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === "string") headers.set(name, value)
    }
    const response = await handler.fetch(
      new Request(`${origin}${req.url}`, {
        method: req.method ?? "GET",
        headers,
        ...(req.method === "GET" || req.method === "HEAD" || req.method === "DELETE" ? {} : { body }),
      }),
    )
    record(response.status, true)
    return response
  }
  const node = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      handle(req, Buffer.concat(chunks).toString("utf8")).then(
        (response) => send(res, response),
        (error: unknown) => send(res, new Response(String(error), { status: 500 })),
      )
    })
  })
  await new Promise<void>((resolve) => node.listen(0, "127.0.0.1", resolve))
  origin = `http://127.0.0.1:${(node.address() as AddressInfo).port}`
  return {
    as,
    url: `${origin}/mcp`,
    requests,
    close: async () => {
      await handler.close()
      await new Promise<void>((resolve) => {
        node.close(() => resolve())
        node.closeAllConnections()
      })
      await as.close()
    },
  }
}
