/**
 * What an operator watches on the MCP server: `/health/live`, `/health/ready` (the authorization server's metadata
 * answers, without which no token can be verified) and Prometheus metrics of requests and authentication outcomes.
 *
 * @module
 */
import { WellKnown } from "@keyway/core"
import { Metrics } from "@keyway/http"
import { Metric } from "effect"

const requests = Metric.counter("keyway_resource_requests_total", {
  description: "HTTP requests answered, by endpoint (mcp, metadata, other) and status",
  incremental: true,
})
const requestSeconds = Metric.histogram("keyway_resource_request_duration_seconds", {
  description: "Time to answer an HTTP request, by endpoint",
  boundaries: Metrics.SECONDS,
})
const authentications = Metric.counter("keyway_resource_authentications_total", {
  description:
    "Requests to the MCP endpoint by authentication outcome: authenticated, no_token, invalid_token, invalid_request, insufficient_scope",
  incremental: true,
})

const OUTCOMES = ["authenticated", "no_token", "invalid_token", "invalid_request", "insufficient_scope"]

/** The metrics of one MCP server. */
export class ResourceMetrics {
  readonly #registry = new Metrics.Registry()

  constructor() {
    for (const outcome of OUTCOMES) this.#registry.add(authentications, { outcome }, 0)
  }

  /** One answered request, with the authentication outcome of a request to the MCP endpoint. */
  readonly request = (endpoint: string, status: number, seconds: number, outcome: string | undefined): void => {
    this.#registry.add(requests, { endpoint, status: String(status) })
    this.#registry.observe(requestSeconds, { endpoint }, seconds)
    if (outcome !== undefined) this.#registry.add(authentications, { outcome })
  }

  readonly text = (): string => this.#registry.text()
}

/**
 * The authentication outcome of an answer from the protected MCP endpoint: the challenge's `error` (RFC 6750 §3.1),
 * `no_token` for a challenge without one (§3: no credentials), `authenticated` otherwise.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export const authenticationOutcome = (status: number, challenge: string | null): string => {
  if (challenge === null || (status !== 401 && status !== 403)) return "authenticated"
  const error = /error="([^"]*)"/.exec(challenge)?.[1]
  if (error === undefined) return "no_token"
  return OUTCOMES.includes(error) ? error : "other"
}

/** Whether the authorization server's metadata answers (within two seconds); never rejects. */
export const readiness = (issuer: string) => {
  const url = WellKnown.authorizationServerMetadataUrls(issuer)[0]?.url ?? issuer
  return async (): Promise<boolean> => {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2000), headers: { accept: "application/json" } })
      await response.body?.cancel()
      return response.ok
    } catch {
      return false
    }
  }
}

const HEALTH = new Set(["/health/live", "/health/ready"])

/** The answer to a health check, or undefined for any other request. */
export const healthAnswer = (
  request: Request,
  path: string,
  ready: () => Promise<boolean>,
): Promise<Response> | undefined => {
  if (!HEALTH.has(path)) return undefined
  if (request.method !== "GET" && request.method !== "HEAD") {
    return Promise.resolve(new Response(null, { status: 405, headers: { allow: "GET, HEAD" } }))
  }
  const answer = (status: number, body: object) =>
    new Response(request.method === "HEAD" ? null : JSON.stringify(body), {
      status,
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    })
  if (path === "/health/live") return Promise.resolve(answer(200, { status: "ok" }))
  return ready().then((ok) =>
    answer(ok ? 200 : 503, {
      status: ok ? "ok" : "unavailable",
      checks: { authorizationServer: ok ? "ok" : "unreachable" },
    }),
  )
}
