/**
 * Loopback servers for the resource stage's tests: a small node:http server whose answers each test writes (to be
 * misconfigured on purpose), a walk built the way `diagnose` builds it, and a fetch that sends a made-up public host
 * to a loopback port.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { Revision } from "@keyway/core"
import { closing, listening } from "@keyway/testing"
import { createProbe, type DiagnoseOptions, type Finding, type Walk } from "../../src/index.js"

export interface Loopback {
  readonly origin: string
  readonly close: () => Promise<void>
}

/** A node:http server on 127.0.0.1; `handler` gets the request, its parsed URL and the server's origin. */
export const serve = async (
  handler: (request: IncomingMessage, response: ServerResponse, url: URL, origin: string) => void,
): Promise<Loopback> => {
  let origin = ""
  const server = createServer((request, response) => {
    request.resume()
    request.on("end", () => handler(request, response, new URL(request.url ?? "/", origin), origin))
  })
  origin = await listening(server)
  return { origin, close: () => closing(server) }
}

/** A fetch that sends requests for `host` (e.g. `mcp.example.com`) to `origin` (a loopback server), path unchanged. */
export const mapHost =
  (host: string, origin: string): typeof globalThis.fetch =>
  (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input))
    if (url.hostname === host) {
      const target = new URL(origin)
      url.protocol = target.protocol
      url.host = target.host
    }
    return globalThis.fetch(url, init)
  }

/** A walk as `diagnose` starts it. */
export const newWalk = (target: string, options: DiagnoseOptions = {}): Walk => ({
  target,
  revisions: options.revisions ?? ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
  options,
  probe: createProbe({ ...(options.fetch === undefined ? {} : { fetch: options.fetch }) }),
  authorizationServers: new Map(),
})

/** A finding without its exchanges, for exact comparisons. */
export interface Seen {
  readonly check: string
  readonly status: Finding["status"]
  readonly revisions: ReadonlyArray<Revision.Revision>
  readonly detail: string
}

export const summary = (findings: ReadonlyArray<Finding>): ReadonlyArray<Seen> =>
  findings.map(({ check, status, revisions, detail }) => ({ check, status, revisions, detail }))

/** The findings that are not `pass`. */
export const problems = (findings: ReadonlyArray<Finding>): ReadonlyArray<Seen> =>
  summary(findings.filter((f) => f.status !== "pass"))

/** The JSON headers of a metadata document, readable cross-origin. */
export const jsonHeaders = { "content-type": "application/json", "access-control-allow-origin": "*" } as const

/** CORS headers of an MCP endpoint that browser-based clients can use. */
export const corsHeaders = {
  "access-control-allow-origin": "*",
  "access-control-expose-headers": "WWW-Authenticate",
} as const

/** A CORS preflight answer allowing what MCP clients send. */
export const preflight = (response: ServerResponse): void => {
  response
    .writeHead(204, {
      "access-control-allow-origin": "*",
      "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
      "access-control-allow-headers": "authorization, content-type, mcp-protocol-version",
    })
    .end()
}
