/**
 * The server's metrics in the Prometheus text format, served on a listener of their own (never the public port): Effect
 * metrics kept in a registry of this server's, updated from the observed requests, security events and storage
 * operations.
 *
 * @module
 */
import { NodeServer } from "@keyway/authorization-server"
import { Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import type { AuditEvent } from "./logging.js"

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

const requests = Metric.counter("keyway_http_requests_total", {
  description: "HTTP requests answered, by endpoint and status",
  incremental: true,
})
const requestSeconds = Metric.histogram("keyway_http_request_duration_seconds", {
  description: "Time to answer an HTTP request, by endpoint",
  boundaries: SECONDS,
})
const tokensIssued = Metric.counter("keyway_tokens_issued_total", {
  description: "Access tokens issued, by grant type",
  incremental: true,
})
const reuse = Metric.counter("keyway_refresh_token_reuse_detected_total", {
  description: "Rotated-out refresh tokens presented again (the family is revoked)",
  incremental: true,
})
const loginFailures = Metric.counter("keyway_login_failures_total", {
  description: "Failed sign-ins, by reason (wrong_credentials, rate_limited, csrf)",
  incremental: true,
})
const rateLimited = Metric.counter("keyway_rate_limited_total", {
  description: "Requests refused by an abuse limit (429), by endpoint",
  incremental: true,
})
const databaseSeconds = Metric.histogram("keyway_database_operation_duration_seconds", {
  description: "Time of a storage operation, by operation",
  boundaries: SECONDS,
})
const databaseErrors = Metric.counter("keyway_database_errors_total", {
  description: "Storage operations the database failed, by operation",
  incremental: true,
})

/** The metrics of one server. */
export class ServerMetrics {
  readonly #registry: Metric.MetricRegistry = new Map()

  constructor() {
    // Present from the start at zero, so that a rate and an alert need no first event.
    this.#run(Metric.update(reuse, 0))
    for (const grant of ["authorization_code", "refresh_token"]) {
      this.#run(Metric.update(Metric.withAttributes(tokensIssued, { grant_type: grant }), 0))
    }
    for (const reason of ["wrong_credentials", "rate_limited", "csrf"]) {
      this.#run(Metric.update(Metric.withAttributes(loginFailures, { reason }), 0))
    }
  }

  #run(effect: Effect.Effect<void>): void {
    Effect.runSync(Effect.provideService(effect, Metric.MetricRegistry, this.#registry))
  }

  /** One answered request. */
  readonly request = (endpoint: string, status: number, seconds: number): void => {
    this.#run(Metric.update(Metric.withAttributes(requests, { endpoint, status: String(status) }), 1))
    this.#run(Metric.update(Metric.withAttributes(requestSeconds, { endpoint }), seconds))
    if (status === 429) this.#run(Metric.update(Metric.withAttributes(rateLimited, { endpoint }), 1))
  }

  /** One security event. */
  readonly event = (event: AuditEvent): void => {
    if (event.event === "token_issued" || event.event === "token_refreshed") {
      this.#run(Metric.update(Metric.withAttributes(tokensIssued, { grant_type: String(event.grant_type) }), 1))
    } else if (event.event === "refresh_token_reuse_detected") {
      this.#run(Metric.update(reuse, 1))
    } else if (event.event === "login_failed") {
      this.#run(Metric.update(Metric.withAttributes(loginFailures, { reason: String(event.reason) }), 1))
    }
  }

  /** One storage operation. */
  readonly storage = (operation: string, seconds: number, ok: boolean): void => {
    this.#run(Metric.update(Metric.withAttributes(databaseSeconds, { operation }), seconds))
    if (!ok) this.#run(Metric.update(Metric.withAttributes(databaseErrors, { operation }), 1))
  }

  /** The exposition, in the Prometheus text format 0.0.4. */
  readonly text = (): string =>
    Effect.runSync(Effect.provideService(PrometheusMetrics.format(), Metric.MetricRegistry, this.#registry))
}

/** Where the metrics listener listens. */
export interface MetricsListenerOptions {
  readonly host: string
  readonly port: number
}

/**
 * Serves `GET /metrics` (Prometheus text format) and nothing else on a listener of its own.
 *
 * @see {@link https://prometheus.io/docs/instrumenting/exposition_formats/ | Prometheus exposition formats}
 */
export const serveMetrics = (text: () => string, options: MetricsListenerOptions): Promise<NodeServer.RunningServer> =>
  NodeServer.listen(
    async (request) => {
      if (new URL(request.url).pathname !== "/metrics") {
        return new Response("not found\n", { status: 404, headers: { "content-type": "text/plain" } })
      }
      return new Response(request.method === "HEAD" ? null : text(), {
        headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8", "cache-control": "no-store" },
      })
    },
    {
      host: options.host,
      port: options.port,
      allow: (pathname) => (pathname === "/metrics" ? "GET, HEAD" : undefined),
    },
  )
