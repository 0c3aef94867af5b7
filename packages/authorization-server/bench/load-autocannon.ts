/**
 * The second load generator of bench/token-endpoint.ts (`--generator=autocannon`): autocannon 9 (HTTP/1.1 written by
 * hand on raw sockets, no fetch), one connection per family, the same scenario and the same output as bench/load.ts.
 *
 * - `refresh`: the connections rotate the families' refresh tokens: a request takes a family's current token from the
 *   pool, its answer puts the successor back (autocannon resets a connection's context at the end of each sequence, so
 *   the tokens live in the pool; one token per connection, so no family ever has two requests in flight).
 * - `reauth`: each connection sends the authorization request with the session's cookie, takes the code from the
 *   redirect and redeems it. One operation = both requests; an operation counts when the redemption answers 200.
 *
 * Latencies are autocannon's, per request (not per operation).
 */
import autocannon from "autocannon"
import { authorizationQuery, type LoadResult, readScenario, redemption, refresh, requests } from "./requests.ts"

const s = await readScenario()
const { serverCpu, reauth } = requests(s)
const token = new URL(s.token)
const authorization = new URL(s.authorization)
const form = { "content-type": "application/x-www-form-urlencoded" }

interface Context {
  code?: string | undefined
}
type Requests = NonNullable<Parameters<typeof autocannon>[0]["requests"]>

// Every connection's own refresh family, before the clock starts.
const families =
  s.kind === "refresh"
    ? await Promise.all(Array.from({ length: s.concurrency }, async () => (await reauth()).json.refresh_token))
    : []
if (families.some((f) => f === undefined)) throw new Error("a refresh family could not be opened")

let failed = 0
let sent = 0
let firstFailure: string | undefined
const failure = (status: number, body: string) => {
  failed++
  firstFailure ??= `${status} ${body.slice(0, 200)}`
}

const refreshRequests: Requests = [
  {
    method: "POST",
    path: token.pathname,
    headers: form,
    setupRequest: (request) => ({
      ...request,
      body: new URLSearchParams(refresh(s, families.pop() ?? "the pool is empty: a family was lost")).toString(),
    }),
    onResponse: (status, body) => {
      if (status !== 200) return failure(status, body)
      families.push((JSON.parse(body) as { refresh_token: string }).refresh_token)
    },
  },
]

const reauthRequests: Requests = [
  {
    method: "GET",
    setupRequest: (request) => ({
      ...request,
      path: `${authorization.pathname}?${authorizationQuery(s, `s${++sent}`)}`,
    }),
    headers: { cookie: s.cookie },
    onResponse: (status, body, context: Context, headers) => {
      const location = Object.entries(headers).find(([name]) => name.toLowerCase() === "location")?.[1]
      context.code =
        typeof location !== "string" ? undefined : (new URL(location).searchParams.get("code") ?? undefined)
      // Keyway answers 302, oidc-provider 303; either carries the code.
      if ((status !== 302 && status !== 303) || context.code === undefined) failure(status, body)
    },
  },
  {
    method: "POST",
    path: token.pathname,
    headers: form,
    setupRequest: (request, context: Context) => ({
      ...request,
      body: new URLSearchParams(redemption(s, context.code ?? "none")).toString(),
    }),
    onResponse: (status, body) => {
      if (status !== 200) failure(status, body)
    },
  },
]

const cpuBefore = await serverCpu()
const started = performance.now()
const result = await autocannon({
  url: token.origin,
  connections: s.concurrency,
  duration: s.durationMs / 1000,
  requests: s.kind === "refresh" ? refreshRequests : reauthRequests,
})
const elapsedMs = performance.now() - started
const cpuAfter = await serverCpu()
const answered200 = result.statusCodeStats["200" as keyof typeof result.statusCodeStats]?.count ?? 0
const output: LoadResult = {
  ok: answered200,
  failed: failed + result.errors + result.timeouts,
  ...(firstFailure === undefined ? {} : { firstFailure }),
  elapsedMs,
  cpuMicros: cpuAfter.cpu - cpuBefore.cpu,
  threadMicros: cpuAfter.thread - cpuBefore.thread,
  p50: result.latency.p50,
  p99: result.latency.p99,
}
process.stdout.write(JSON.stringify(output))
