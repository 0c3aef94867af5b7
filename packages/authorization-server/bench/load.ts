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

interface Scenario {
  readonly kind: "reauth" | "refresh"
  readonly authorization: string
  readonly token: string
  readonly cpu: string
  readonly cookie: string
  readonly clientId: string
  readonly redirectUri: string
  readonly resource: string
  readonly scope: string
  readonly verifier: string
  readonly challenge: string
  readonly concurrency: number
  readonly durationMs: number
}

let input = ""
for await (const chunk of process.stdin) input += (chunk as Buffer).toString("utf8")
const s = JSON.parse(input) as Scenario

const serverCpu = async () => (await (await fetch(s.cpu)).json()) as { cpu: number; thread: number }

const post = async (body: Record<string, string>) => {
  const response = await fetch(s.token, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(body).toString(),
  })
  const json = (await response.json()) as { access_token?: string; refresh_token?: string; error?: string }
  return { ok: response.status === 200 && typeof json.access_token === "string", json, status: response.status }
}

let n = 0
/** One warm re-authorization: the code from the redirect, redeemed. */
const reauth = async () => {
  const query = new URLSearchParams({
    response_type: "code",
    client_id: s.clientId,
    redirect_uri: s.redirectUri,
    scope: s.scope,
    state: `s${++n}`,
    code_challenge: s.challenge,
    code_challenge_method: "S256",
    resource: s.resource,
  })
  const answer = await fetch(`${s.authorization}?${query}`, { headers: { cookie: s.cookie }, redirect: "manual" })
  await answer.arrayBuffer()
  const location = answer.headers.get("location")
  const code = location === null ? null : new URL(location, s.authorization).searchParams.get("code")
  if (code === null) return { ok: false, status: answer.status, json: { location } as { refresh_token?: string } }
  return post({
    grant_type: "authorization_code",
    code,
    code_verifier: s.verifier,
    redirect_uri: s.redirectUri,
    client_id: s.clientId,
    resource: s.resource,
  })
}

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
      const result = await timed(() =>
        post({ grant_type: "refresh_token", refresh_token: token!, client_id: s.clientId, resource: s.resource }),
      )
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
