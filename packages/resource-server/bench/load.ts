/**
 * Load generator process: drives autocannon against one URL with no token, the repeated token, or cycling through
 * the distinct tokens of the setup file. Prints the autocannon figures as one JSON line.
 */
import { readFileSync } from "node:fs"
import autocannon from "autocannon"
import type { Setup } from "./setup.ts"

const [url, setupFile, tokens, duration, connections] = process.argv.slice(2)
const setup = JSON.parse(readFileSync(setupFile!, "utf8")) as Setup
let next = 0
const result = await autocannon({
  url: url!,
  connections: Number(connections ?? "32"),
  duration: Number(duration ?? "10"),
  ...(tokens === "same" ? { headers: { authorization: `Bearer ${setup.sameToken}` } } : {}),
  ...(tokens === "distinct"
    ? {
        requests: [
          {
            setupRequest: (request) => {
              request.headers = {
                ...request.headers,
                authorization: `Bearer ${setup.tokens[next++ % setup.tokens.length]}`,
              }
              return request
            },
          },
        ],
      }
    : {}),
})
process.stdout.write(
  `${JSON.stringify({
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    ok: result["2xx"],
    non2xx: result.non2xx,
    errors: result.errors,
  })}\n`,
)
