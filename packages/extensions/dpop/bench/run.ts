/**
 * DPoP at the resource server: throughput of one protected endpoint with the same access token presented as Bearer
 * (unbound) and with DPoP (bound, a fresh proof on every request: the verified-token cache answers for the token,
 * the proof is checked every time). Server and load generator are separate processes on loopback; the two scenarios
 * run interleaved for several rounds and each row is the round with the median throughput. Records the table in
 * docs/benchmarks.md.
 *
 *   node bench/run.ts [--duration 10] [--connections 32] [--rounds 3] [--proofs 100000] [--no-write]
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus, loadavg } from "node:os"
import { dirname, join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { writeSetup } from "./setup.ts"

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const option = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? fallback : (args[i + 1] ?? fallback)
}
const duration = option("duration", "10")
const connections = option("connections", "32")
const rounds = Number(option("rounds", "3"))
const proofCount = option("proofs", "100000")

interface Figures {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly total: number
  readonly non2xx: number
  readonly proofsUsed: number
  readonly proofs: number
  readonly cpuPerRequest: number
}

const lineReader = (child: ChildProcess): (() => Promise<string>) => {
  const queue: Array<string> = []
  const waiting: Array<(line: string) => void> = []
  let failure: Error | undefined
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const next = waiting.shift()
    if (next === undefined) queue.push(line)
    else next(line)
  })
  child.once("exit", (code) => {
    failure = new Error(`process exited with ${code}`)
  })
  return () =>
    new Promise((resolve, reject) => {
      const line = queue.shift()
      if (line !== undefined) resolve(line)
      else if (failure !== undefined) reject(failure)
      else waiting.push(resolve)
    })
}

const runScenario = async (setupFile: string, mode: "bearer" | "dpop"): Promise<Figures> => {
  const server = spawn(process.execPath, [join(here, "server.ts"), setupFile], { stdio: ["pipe", "pipe", "inherit"] })
  const serverLine = lineReader(server)
  const cpu = async (): Promise<number> => {
    server.stdin!.write("cpu\n")
    return (JSON.parse(await serverLine()) as { cpu: number }).cpu
  }
  try {
    const { port } = JSON.parse(await serverLine()) as { port: number }
    const url = `http://127.0.0.1:${port}/mcp`
    const load = (seconds: string, proofs: string) =>
      lineReader(
        spawn(process.execPath, [join(here, "load.ts"), url, setupFile, mode, seconds, connections, proofs], {
          stdio: ["ignore", "pipe", "inherit"],
        }),
      )()
    await load("2", "20000") // warm-up: JIT, JWKS fetch, the token in the cache
    // The CPU window opens when the load generator starts sending: proofs are signed before that.
    const measured = load(duration, proofCount)
    const before = await cpu()
    const figures = JSON.parse(await measured) as Omit<Figures, "cpuPerRequest">
    const after = await cpu()
    return { ...figures, cpuPerRequest: (after - before) / figures.total }
  } finally {
    server.kill()
  }
}

const scenarios = [
  { label: "Bearer, same token (cache)", mode: "bearer" },
  { label: "DPoP, same token (cache), a fresh proof per request", mode: "dpop" },
] as const

const load = loadavg()[0] ?? 0
const setupFile = await writeSetup()
const samples = scenarios.map(() => [] as Array<Figures>)
for (let round = 1; round <= rounds; round++) {
  for (const [i, scenario] of scenarios.entries()) {
    const figures = await runScenario(setupFile, scenario.mode)
    samples[i]!.push(figures)
    console.log(
      `round ${round} ${scenario.label}: ${Math.round(figures.rps)} req/s, p50 ${figures.p50} ms, p99 ${figures.p99} ms, CPU ${figures.cpuPerRequest.toFixed(1)} µs/request, non-2xx ${figures.non2xx}`,
    )
  }
}
rmSync(setupFile, { force: true })
const results = scenarios.map((scenario, i) => {
  const sorted = [...samples[i]!].sort((a, b) => a.rps - b.rps)
  return { label: scenario.label, figures: sorted[Math.floor(sorted.length / 2)]! }
})
const cpuModel =
  /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model ?? "unknown"
const [bearer, dpop] = results.map((r) => r.figures) as [Figures, Figures]
const table = [
  "| Scenario | req/s | % of Bearer | p50 latency (ms) | p99 latency (ms) | server CPU per request (µs) | non-2xx |",
  "|---|---:|---:|---:|---:|---:|---:|",
  ...results.map(
    ({ label, figures }) =>
      `| ${label} | ${Math.round(figures.rps)} | ${Math.round((figures.rps / bearer.rps) * 100)}% | ${figures.p50} | ${figures.p99} | ${figures.cpuPerRequest.toFixed(1)} | ${figures.non2xx} |`,
  ),
].join("\n")
const section = `<!-- dpop:start -->
## @keyway/ext-dpop: DPoP at the resource server

One protected endpoint (\`GET /mcp\`, a small JSON answer) of \`@keyway/resource-server\` on \`node:http\`
(\`toNodeListener\`), verifying ES256 JWT access tokens, with \`dpopScheme()\` registered. Bearer: an unbound token,
the same on every request (answered from the verified-token cache). DPoP: a token bound to the client's key
(\`cnf.jkt\`), the same on every request, each request with its own proof (ES256, \`jti\`, \`htm\`, \`htu\`, \`iat\`,
\`ath\`), pre-signed by the load generator before the clock starts, so the figures are the server's: the token comes
from the cache, the proof is checked every time (signature, claims, \`ath\`, thumbprint, replay cache). Load:
autocannon in a separate process, ${connections} connections, ${duration} s after a 2 s warm-up, loopback; the two
scenarios ran interleaved for ${rounds} rounds and each row is the round with the median throughput.

Run: \`node bench/run.ts\` in \`packages/extensions/dpop\` (after \`tsc -b\`).

Machine: ${availableParallelism()} CPUs (${cpuModel}), Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
Shared with other work while measuring (load average ${load.toFixed(1)} at the start, on ${availableParallelism()} CPUs),
so throughput and latency vary between runs; server CPU time per request is the steadier figure.

${table}

A proof costs ${(dpop.cpuPerRequest - bearer.cpuPerRequest).toFixed(1)} µs of server CPU per request over a cached Bearer
token in this run (not profiled: what it adds is parsing the proof, one ES256 signature verification, the SHA-256 of the token and a replay-cache entry).
<!-- dpop:end -->`
console.log(`\n${table}`)
if (!args.includes("--no-write")) {
  const file = join(here, "../../../../docs/benchmarks.md")
  const current = readFileSync(file, "utf8")
  const start = current.indexOf("<!-- dpop:start -->")
  const end = current.indexOf("<!-- dpop:end -->")
  const next =
    start !== -1 && end !== -1
      ? `${current.slice(0, start)}${section}${current.slice(end + "<!-- dpop:end -->".length)}`
      : `${current.trimEnd()}\n\n${section}\n`
  writeFileSync(file, next)
}
