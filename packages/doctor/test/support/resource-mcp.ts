/**
 * A small protected MCP server on node:http that follows every rule of the resource stage unless told otherwise:
 * each option breaks one thing, the way deployed servers get it wrong.
 */
import type { ServerResponse } from "node:http"
import { corsHeaders, jsonHeaders, type Loopback, preflight, serve } from "./resource-servers.js"

export const ISSUER = "https://auth.example.com"

export interface McpServerOptions {
  /** The MCP endpoint's path; `/mcp` by default. */
  readonly path?: string
  /** The status of an unauthenticated request; 401 by default. */
  readonly status?: number
  /** The WWW-Authenticate value (from the origin); `null` for none. Default: Bearer with resource_metadata and scope. */
  readonly challenge?: (origin: string) => string | null
  /** The metadata document (from the origin). */
  readonly metadata?: (origin: string) => unknown
  /** The content type of the metadata; application/json by default. */
  readonly metadataType?: string
  /** Which well-known locations serve the metadata; both by default. */
  readonly metadataAt?: ReadonlyArray<"path" | "root">
  /** Paths answered with a 302 to the location (from the origin). */
  readonly redirects?: Readonly<Record<string, (origin: string) => string>>
  /** CORS headers and preflights; on by default. */
  readonly cors?: boolean
  /** The Date header; the real date by default. */
  readonly date?: string
}

export const defaultChallenge = (path: string) => (origin: string) =>
  `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource${path}", scope="tools:read"`

export const startMcpServer = (options: McpServerOptions = {}): Promise<Loopback> => {
  const path = options.path ?? "/mcp"
  const cors = options.cors ?? true
  const metadataAt = options.metadataAt ?? ["path", "root"]
  const pathMetadata = `/.well-known/oauth-protected-resource${path}`
  const rootMetadata = "/.well-known/oauth-protected-resource"
  return serve((request, response, url, origin) => {
    const dated = (headers: Record<string, string>): Record<string, string> =>
      options.date === undefined ? headers : { ...headers, date: options.date }
    const write = (res: ServerResponse, status: number, headers: Record<string, string>, body?: string) => {
      if (options.date !== undefined) res.sendDate = false
      res.writeHead(status, dated(headers)).end(body)
    }
    const redirect = options.redirects?.[url.pathname]
    if (redirect !== undefined) {
      write(response, 302, { location: redirect(origin) })
      return
    }
    if (
      (url.pathname === pathMetadata && metadataAt.includes("path")) ||
      (url.pathname === rootMetadata && metadataAt.includes("root"))
    ) {
      const document = options.metadata?.(origin) ?? {
        resource: `${origin}${path}`,
        authorization_servers: [ISSUER],
        scopes_supported: ["tools:read"],
      }
      const headers = cors ? { ...jsonHeaders } : { "content-type": "application/json" }
      write(
        response,
        200,
        { ...headers, "content-type": options.metadataType ?? "application/json" },
        JSON.stringify(document),
      )
      return
    }
    if (url.pathname !== path) {
      write(response, 404, { "content-type": "text/plain" }, "Not Found")
      return
    }
    if (request.method === "OPTIONS") {
      if (cors) preflight(response)
      else write(response, 405, { allow: "POST" })
      return
    }
    const status = options.status ?? 401
    const challenge = (options.challenge ?? defaultChallenge(path))(origin)
    const headers: Record<string, string> = { "content-type": "application/json", ...(cors ? corsHeaders : {}) }
    if (status === 401 && challenge !== null) headers["www-authenticate"] = challenge
    write(
      response,
      status,
      headers,
      status === 200 ? JSON.stringify({ jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-11-25" } }) : "",
    )
  })
}
