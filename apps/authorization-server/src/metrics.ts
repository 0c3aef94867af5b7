/**
 * The server's metrics in the Prometheus text format, served on a listener of their own (never the public port),
 * updated from the observed requests, security events and storage operations.
 *
 * @module
 */
import type { Operations } from "@keyway/authorization-server"
import { Metrics } from "@keyway/http"
import { listen, type RunningServer } from "@keyway/http/node"
import { Metric } from "effect"

const requests = Metric.counter("keyway_http_requests_total", {
  description: "HTTP requests answered, by endpoint and status",
  incremental: true,
})
const requestSeconds = Metric.histogram("keyway_http_request_duration_seconds", {
  description: "Time to answer an HTTP request, by endpoint",
  boundaries: Metrics.SECONDS,
})
const tokensIssued = Metric.counter("keyway_tokens_issued_total", {
  description: "Tokens issued at the token endpoint, by grant type",
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
  boundaries: Metrics.SECONDS,
})
const databaseErrors = Metric.counter("keyway_database_errors_total", {
  description: "Storage operations the database failed, by operation",
  incremental: true,
})

/** The metrics of one server. */
export class ServerMetrics {
  readonly #registry = new Metrics.Registry()
  readonly #grantTypes: ReadonlySet<string>

  /** `grantTypes`: every grant type the server serves, each a `grant_type` label of its own. */
  constructor(grantTypes: ReadonlyArray<string>) {
    this.#grantTypes = new Set(grantTypes)
    // Present from the start at zero, so that a rate or an alert needs no first event.
    this.#registry.add(reuse, {}, 0)
    for (const grant_type of this.#grantTypes) this.#registry.add(tokensIssued, { grant_type }, 0)
    for (const reason of ["wrong_credentials", "rate_limited", "csrf"]) this.#registry.add(loginFailures, { reason }, 0)
  }

  /** One answered request. */
  readonly request = (endpoint: string, status: number, seconds: number): void => {
    this.#registry.add(requests, { endpoint, status: String(status) })
    this.#registry.observe(requestSeconds, { endpoint }, seconds)
    if (status === 429) this.#registry.add(rateLimited, { endpoint })
  }

  /** One security event. */
  readonly event = (event: Operations.SecurityEvent): void => {
    if (event.event === "token_issued") {
      this.#registry.add(tokensIssued, { grant_type: this.#grantLabel(event.grant_type) })
    } else if (event.event === "refresh_token_reuse_detected") {
      this.#registry.add(reuse)
    } else if (event.event === "login_failed") {
      this.#registry.add(loginFailures, { reason: event.reason })
    }
  }

  // A grant type the server does not serve is never issued; should one be, it cannot grow the label set.
  readonly #grantLabel = (grantType: string): string => (this.#grantTypes.has(grantType) ? grantType : "other")

  /** One storage operation. */
  readonly storage = (operation: string, seconds: number, ok: boolean): void => {
    this.#registry.observe(databaseSeconds, { operation }, seconds)
    if (!ok) this.#registry.add(databaseErrors, { operation })
  }

  /** The exposition, in the Prometheus text format 0.0.4. */
  readonly text = (): string => this.#registry.text()
}

/**
 * Serves `GET /metrics` (Prometheus text format) and nothing else on a listener of its own.
 *
 * @see {@link https://prometheus.io/docs/instrumenting/exposition_formats/ | Prometheus exposition formats}
 */
export const serveMetrics = (
  text: () => string,
  options: { readonly host: string; readonly port: number },
): Promise<RunningServer> =>
  listen(Metrics.handler(text), { host: options.host, port: options.port, allow: Metrics.allow })
