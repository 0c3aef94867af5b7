/**
 * Load generator for bench/token-endpoint.ts, run as a separate process so the server's event loop is not shared
 * with the client's. Input (stdin, JSON): the scenario. Output (stdout, JSON): counts and latencies.
 */

interface Scenario {
  readonly kind: "redeem" | "refresh"
  readonly tokenEndpoint: string
  readonly clientId: string
  readonly redirectUri: string
  readonly resource: string
  readonly verifier: string
  /** redeem: every code once; refresh: one code per worker, redeemed first to open its refresh family. */
  readonly codes: ReadonlyArray<string>
  readonly concurrency: number
  /** refresh: how long each worker keeps rotating its own family. */
  readonly durationMs: number
}

let input = ""
for await (const chunk of process.stdin) input += (chunk as Buffer).toString("utf8")
const scenario = JSON.parse(input) as Scenario

const post = async (body: Record<string, string>) => {
  const started = performance.now()
  const response = await fetch(scenario.tokenEndpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(body).toString(),
  })
  const json = (await response.json()) as { refresh_token?: string }
  return { status: response.status, json, ms: performance.now() - started }
}

const redeem = (code: string) =>
  post({
    grant_type: "authorization_code",
    code,
    code_verifier: scenario.verifier,
    redirect_uri: scenario.redirectUri,
    client_id: scenario.clientId,
    resource: scenario.resource,
  })

const latencies: Array<number> = []
let ok = 0
let failed = 0
const record = (result: { status: number; ms: number }) => {
  latencies.push(result.ms)
  if (result.status === 200) ok++
  else failed++
}

const started = performance.now()
if (scenario.kind === "redeem") {
  let next = 0
  await Promise.all(
    Array.from({ length: scenario.concurrency }, async () => {
      while (next < scenario.codes.length) {
        const code = scenario.codes[next++]!
        record(await redeem(code))
      }
    }),
  )
} else {
  const families = await Promise.all(scenario.codes.map(async (code) => (await redeem(code)).json.refresh_token!))
  const measureFrom = performance.now()
  latencies.length = 0
  await Promise.all(
    families.map(async (first) => {
      let token = first
      while (performance.now() - measureFrom < scenario.durationMs) {
        const result = await post({ grant_type: "refresh_token", refresh_token: token, client_id: scenario.clientId })
        record(result)
        if (result.status !== 200 || result.json.refresh_token === undefined) break
        token = result.json.refresh_token
      }
    }),
  )
}
const elapsed = performance.now() - started
latencies.sort((a, b) => a - b)
const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0
process.stdout.write(
  JSON.stringify({
    ok,
    failed,
    elapsedMs: scenario.kind === "redeem" ? elapsed : scenario.durationMs,
    p50: at(0.5),
    p99: at(0.99),
    max: latencies.at(-1) ?? 0,
  }),
)
