/**
 * CORS for browser-based MCP clients (Fetch standard, CORS protocol): the headers of answers to allowed origins, the
 * preflight answer, and adding the headers to a handler's response. Bearer tokens are not ambient credentials, so no
 * `Access-Control-Allow-Credentials` is ever sent.
 */
import type { CorsConfig } from "./config.js"

const ALLOW_HEADERS = "Authorization, Content-Type, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
const EXPOSE_HEADERS = "WWW-Authenticate, Mcp-Session-Id"

export interface Cors {
  /** Adds the CORS headers for a response to `origin` into `into` (nothing when CORS is off or `origin` not allowed). */
  readonly headers: (origin: string | null | undefined, into: Record<string, string>) => void
  /** The preflight answer, or undefined when `request` is not a preflight (or CORS is off). */
  readonly preflight: (request: Request) => Response | undefined
  /** `response` with the CORS headers for `request`'s origin added, unless it has them already. */
  readonly withCors: (request: Request, response: Response) => Response
}

export const makeCors = (cors: CorsConfig): Cors => {
  const headers = (origin: string | null | undefined, into: Record<string, string>): void => {
    if (cors === undefined) return
    if (cors.any) {
      into["access-control-allow-origin"] = "*"
    } else if (origin !== null && origin !== undefined && cors.origins.has(origin)) {
      into["access-control-allow-origin"] = origin
      into.vary = "Origin"
    } else {
      return
    }
    into["access-control-expose-headers"] = EXPOSE_HEADERS
  }

  const preflight = (request: Request): Response | undefined => {
    if (cors === undefined || request.method !== "OPTIONS") return undefined
    if (!request.headers.has("access-control-request-method")) return undefined
    const answer: Record<string, string> = {}
    headers(request.headers.get("origin"), answer)
    if (answer["access-control-allow-origin"] === undefined) return new Response(null, { status: 403 })
    answer["access-control-allow-methods"] = "GET, POST, DELETE, OPTIONS"
    answer["access-control-allow-headers"] = request.headers.get("access-control-request-headers") ?? ALLOW_HEADERS
    answer["access-control-max-age"] = "86400"
    return new Response(null, { status: 204, headers: answer })
  }

  const withCors = (request: Request, response: Response): Response => {
    const origin = request.headers.get("origin")
    if (cors === undefined || origin === null || response.headers.has("access-control-allow-origin")) {
      return response
    }
    const extra: Record<string, string> = {}
    headers(origin, extra)
    const merged = new Headers(response.headers)
    for (const [name, value] of Object.entries(extra)) merged.set(name, value)
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers: merged })
  }

  return { headers, preflight, withCors }
}
