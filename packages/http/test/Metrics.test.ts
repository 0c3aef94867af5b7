import { Metric } from "effect"
import { describe, expect, it } from "vitest"
import { allow, handler, Registry, SECONDS } from "../src/Metrics.js"

const requests = Metric.counter("test_requests_total", { description: "Requests", incremental: true })
const latency = Metric.histogram("test_latency_seconds", { description: "Latency", boundaries: SECONDS })

describe("Metrics", () => {
  it("keeps each registry's counts apart and formats them in the Prometheus text format", () => {
    const a = new Registry()
    const b = new Registry()
    a.add(requests, { endpoint: "token", status: "200" })
    a.add(requests, { endpoint: "token", status: "200" }, 2)
    a.add(requests, { endpoint: "login", status: "401" }, 0)
    a.observe(latency, { endpoint: "token" }, 0.003)
    b.add(requests, { endpoint: "token", status: "200" })
    const text = a.text()
    expect(text).toContain("# TYPE test_requests_total counter\n")
    expect(text).toContain('test_requests_total{endpoint="token",status="200"} 3\n')
    expect(text).toContain('test_requests_total{endpoint="login",status="401"} 0\n')
    expect(text).toContain('test_latency_seconds_bucket{endpoint="token",le="0.0025"} 0\n')
    expect(text).toContain('test_latency_seconds_bucket{endpoint="token",le="0.005"} 1\n')
    expect(text).toContain('test_latency_seconds_count{endpoint="token"} 1\n')
    expect(b.text()).toContain('test_requests_total{endpoint="token",status="200"} 1\n')
    expect(new Registry().text()).toBe("")
  })

  it("serves /metrics only, with the text format's media type", async () => {
    const serve = handler(() => "m 1\n")
    const ok = serve(new Request("http://127.0.0.1/metrics"))
    expect([ok.status, ok.headers.get("content-type"), await ok.text()]).toEqual([
      200,
      "text/plain; version=0.0.4; charset=utf-8",
      "m 1\n",
    ])
    const head = serve(new Request("http://127.0.0.1/metrics", { method: "HEAD" }))
    expect([head.status, head.body]).toEqual([200, null])
    expect(serve(new Request("http://127.0.0.1/other")).status).toBe(404)
    expect([allow("/metrics"), allow("/other")]).toEqual(["GET, HEAD", undefined])
  })
})
