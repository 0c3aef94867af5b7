/**
 * Load generator for bench/token-endpoint.ts, run as a separate process so the server's event loop is not shared
 * with the client's. Input (stdin, JSON): the scenario. Output (stdout, JSON): counts, latencies and the server's CPU
 * time over the measured window (read from the server's control port at its start and end).
 *
 * - `reauth`: warm re-authorization, repeated by every connection: GET of the authorization endpoint with the signed-in
 *   session's cookie (consent remembered), which answers at once with a redirect carrying a code, then the code's
 *   redemption at the token endpoint (PKCE S256, `resource`). One operation = both requests.
 * - `refresh`: every connection first gets a refresh token of its own family (one re-authorization, not measured),
 *   then rotates it as fast as it can. One operation = one token request.
 */

import { readScenario, refresh, requests } from "./requests.ts"

const s = await readScenario()
const { serverCpu, post, reauth } = requests(s)

const latencies: Array<number> = []
let ok = 0
let failed = 0
let firstFailure: string | undefined
const timed = async <A extends { ok: boolean; status: number; json: unknown }>(f: () => Promise<A>) => {
  const started = performance.now()
  const result = await f()
  latencies.push(performance.now() - started)
  if (result.ok) ok++
  else {
    failed++
    firstFailure ??= `${result.status} ${JSON.stringify(result.json)}`
  }
  return result
}

// Every connection's own refresh family, before the clock starts.
const families =
  s.kind === "refresh"
    ? await Promise.all(Array.from({ length: s.concurrency }, async () => (await reauth()).json.refresh_token))
    : []

const cpuBefore = await serverCpu()
const started = performance.now()
await Promise.all(
  Array.from({ length: s.concurrency }, async (_, i) => {
    let token = families[i]
    while (performance.now() - started < s.durationMs) {
      if (s.kind === "reauth") {
        await timed(reauth)
        continue
      }
      if (token === undefined) return
      const result = await timed(() => post(refresh(s, token!)))
      token = result.json.refresh_token
    }
  }),
)
const elapsedMs = performance.now() - started
const cpuAfter = await serverCpu()
const cpuMicros = cpuAfter.cpu - cpuBefore.cpu
// The server's main thread alone (its JavaScript, and what runs on it): the rest is libuv's pool, GC helpers, the JIT.
const threadMicros = cpuAfter.thread - cpuBefore.thread
latencies.sort((a, b) => a - b)
const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0
process.stdout.write(
  JSON.stringify({ ok, failed, firstFailure, elapsedMs, cpuMicros, threadMicros, p50: at(0.5), p99: at(0.99) }),
)
