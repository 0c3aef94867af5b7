/**
 * A server's metrics in the Prometheus text format: Effect metrics kept in a registry of the server's own (so two
 * servers in one process never mix their counts), and the Web handler that serves them at `/metrics`, meant for a
 * listener of its own rather than the public port.
 *
 * @see {@link https://prometheus.io/docs/instrumenting/exposition_formats/ | Prometheus exposition formats}
 * @module
 */
import { Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"

/**
 * Histogram boundaries for durations in seconds, from a millisecond to ten seconds.
 *
 * @see {@link https://prometheus.io/docs/practices/histograms/ | Prometheus: histograms}
 */
export const SECONDS: ReadonlyArray<number> = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/**
 * One server's metrics: `add` to a counter, `observe` a histogram value, `text` for the exposition.
 *
 * @see {@link https://prometheus.io/docs/concepts/metric_types/ | Prometheus metric types}
 */
export class Registry {
  readonly #registry: Metric.MetricRegistry = new Map()

  #run<A>(effect: Effect.Effect<A>): A {
    return Effect.runSync(Effect.provideService(effect, Metric.MetricRegistry, this.#registry))
  }

  /** Adds `value` (1 by default; 0 makes the series appear) to a counter with these labels. */
  add(counter: Metric.Counter<number>, labels: Readonly<Record<string, string>> = {}, value = 1): void {
    this.#run(Metric.update(Metric.withAttributes(counter, labels), value))
  }

  /** Records one value of a histogram with these labels. */
  observe(
    histogram: Metric.Metric<number, Metric.HistogramState>,
    labels: Readonly<Record<string, string>>,
    value: number,
  ): void {
    this.#run(Metric.update(Metric.withAttributes(histogram, labels), value))
  }

  /** The exposition, in the Prometheus text format 0.0.4. */
  text(): string {
    return this.#run(PrometheusMetrics.format())
  }
}

/**
 * Answers `GET /metrics` (and `HEAD`) with `text()`, anything else with 404.
 *
 * @see {@link https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format | Prometheus text format}
 */
export const handler =
  (text: () => string) =>
  (request: Request): Response => {
    if (new URL(request.url).pathname !== "/metrics") {
      return new Response("not found\n", { status: 404, headers: { "content-type": "text/plain" } })
    }
    return new Response(request.method === "HEAD" ? null : text(), {
      headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8", "cache-control": "no-store" },
    })
  }

/**
 * The `allow` option of the node:http bridge for a metrics listener: only `/metrics` exists.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-10.2.1 | RFC 9110 §10.2.1 (Allow)}
 */
export const allow = (pathname: string): string | undefined => (pathname === "/metrics" ? "GET, HEAD" : undefined)
