/** Load generator process: autocannon against one URL (GET, or POST with a JSON body); prints one JSON line. */
import autocannon from "autocannon"

const [url, method, duration, connections] = process.argv.slice(2)
const post = method === "POST"
const result = await autocannon({
  url: url!,
  connections: Number(connections ?? "32"),
  duration: Number(duration ?? "8"),
  ...(post
    ? {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "x", pad: "p".repeat(400) },
        }),
      }
    : {}),
})
process.stdout.write(
  `${JSON.stringify({ rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, total: result.requests.total, non2xx: result.non2xx, errors: result.errors })}\n`,
)
