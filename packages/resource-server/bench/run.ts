/**
 * Resource-server benchmark: the same Node http endpoint with (a) no authentication, (b) Keyway with ES256 JWTs,
 * same token repeated (verified-token cache) and distinct tokens (signature verification every time), (c) the MCP
 * SDK v2 requireBearerAuth gate with an equivalent jose verifier. Server and load generator run in separate
 * processes on loopback. Prints a table and records it in docs/benchmarks.md.
 *
 * Scenarios run interleaved for several rounds; each row reports the round with the median throughput.
 *
 *   node bench/run.ts [--duration 10] [--connections 32] [--rounds 3] [--tokens 60000] [--no-write]
 *                     [--previous <dir>/index.js]
 *
 * `--previous` adds the two Keyway rows for an older build of this package (e.g. `dist` of another commit copied
 * next to this package's node_modules, so its imports resolve), interleaved with the others: a before/after
 * comparison on the same machine in the same run.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus } from "node:os"
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
const distinctTokens = Number(option("tokens", "60000"))
const rounds = Number(option("rounds", "3"))
const previous = option("previous", "")

interface Figures {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly total: number
  readonly ok: number
  readonly non2xx: number
  readonly errors: number
  /** Server CPU time (user + system) per request, microseconds: robust to other load on the machine. */
  readonly cpuPerRequest: number
}

/** Reads a child's stdout line by line. */
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

const runScenario = async (setupFile: string, mode: string, tokens: "same" | "distinct"): Promise<Figures> => {
  const server = spawn(process.execPath, [join(here, "server.ts"), mode, setupFile, previous], {
    stdio: ["pipe", "pipe", "inherit"],
  })
  const serverLine = lineReader(server)
  const cpu = async (): Promise<number> => {
    server.stdin!.write("cpu\n")
    return (JSON.parse(await serverLine()) as { cpu: number }).cpu
  }
  try {
    const { port } = JSON.parse(await serverLine()) as { port: number }
    const url = `http://127.0.0.1:${port}/mcp`
    const load = (seconds: string) =>
      lineReader(
        spawn(process.execPath, [join(here, "load.ts"), url, setupFile, tokens, seconds, connections], {
          stdio: ["ignore", "pipe", "inherit"],
        }),
      )()
    await load("2") // warm-up: JIT, JWKS fetch
    const before = await cpu()
    const figures = JSON.parse(await load(duration)) as Omit<Figures, "cpuPerRequest">
    const after = await cpu()
    return { ...figures, cpuPerRequest: (after - before) / figures.total }
  } finally {
    server.kill()
  }
}

const scenarios: Array<{
  readonly label: string
  readonly mode: string
  readonly tokens: "same" | "distinct"
}> = [
  { label: "(a) no authentication (same request, header ignored)", mode: "none", tokens: "same" },
  { label: "(b) Keyway, ES256 JWT, same token (cache)", mode: "keyway", tokens: "same" },
  { label: "(b) Keyway, ES256 JWT, distinct tokens", mode: "keyway", tokens: "distinct" },
  { label: "(c) MCP SDK requireBearerAuth + jose, same token", mode: "sdk", tokens: "same" },
  { label: "(c) MCP SDK requireBearerAuth + jose, distinct tokens", mode: "sdk", tokens: "distinct" },
]
if (previous !== "") {
  scenarios.push(
    { label: "(b) previous build, ES256 JWT, same token (cache)", mode: "keyway-previous", tokens: "same" },
    { label: "(b) previous build, ES256 JWT, distinct tokens", mode: "keyway-previous", tokens: "distinct" },
  )
}

const setupFile = await writeSetup(distinctTokens)
const samples = scenarios.map(() => [] as Array<Figures>)
for (let round = 1; round <= rounds; round++) {
  for (const [i, scenario] of scenarios.entries()) {
    const figures = await runScenario(setupFile, scenario.mode, scenario.tokens)
    samples[i]!.push(figures)
    console.log(
      `round ${round} ${scenario.label}: ${Math.round(figures.rps)} req/s, p50 ${figures.p50} ms, p99 ${figures.p99} ms, non-2xx ${figures.non2xx}`,
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
const base = results[0]!.figures.rps
const table = [
  "| Scenario | req/s | % of (a) | p50 latency (ms) | p99 latency (ms) | server CPU per request (µs) | non-2xx |",
  "|---|---:|---:|---:|---:|---:|---:|",
  ...results.map(
    ({ label, figures }) =>
      `| ${label} | ${Math.round(figures.rps)} | ${Math.round((figures.rps / base) * 100)}% | ${figures.p50} | ${figures.p99} | ${figures.cpuPerRequest.toFixed(1)} | ${figures.non2xx} |`,
  ),
].join("\n")
const [a, bSame, bDistinct, cSame, cDistinct] = results.map((r) => r.figures) as [
  Figures,
  Figures,
  Figures,
  Figures,
  Figures,
]
const verdict = (ok: boolean) => (ok ? "met" : "not met")
const compare = (label: string, b: Figures, c: Figures) =>
  `- (b) against (c), ${label}: ${Math.round(b.rps)} vs ${Math.round(c.rps)} req/s (${verdict(b.rps >= c.rps)}), ` +
  `p50 ${b.p50} vs ${c.p50} ms (${verdict(b.p50 <= c.p50)}), p99 ${b.p99} vs ${c.p99} ms (${verdict(b.p99 <= c.p99)}), ` +
  `server CPU ${b.cpuPerRequest.toFixed(1)} vs ${c.cpuPerRequest.toFixed(1)} µs per request (${verdict(b.cpuPerRequest <= c.cpuPerRequest)}).`
const aims = [
  `- (b) with cache at ${Math.round((bSame.rps / a.rps) * 100)}% of the throughput of (a) (aim: at least 90%, ${verdict(bSame.rps >= 0.9 * a.rps)}); ` +
    `by server CPU per request, (a) costs ${Math.round((a.cpuPerRequest / bSame.cpuPerRequest) * 100)}% of (b) with cache, i.e. authentication adds ${(bSame.cpuPerRequest - a.cpuPerRequest).toFixed(1)} µs per request.`,
  compare("same token", bSame, cSame),
  compare("distinct tokens", bDistinct, cDistinct),
].join("\n")

const section = `<!-- resource-server:start -->
## @keyway/resource-server

One protected endpoint (\`GET /mcp\`, a small JSON answer) on \`node:http\` through the same Web Request/Response
adapter (\`toNodeListener\`) in every scenario, and (a) receives the same \`Authorization\` header (ignored), so
the columns differ only by authentication. Load: autocannon in a
separate process, ${connections} connections, ${duration} s after a 2 s warm-up, loopback; the scenarios ran
interleaved for ${rounds} rounds and each row is the round with the median throughput. Distinct tokens: ${distinctTokens}
pre-minted ES256 JWTs cycled (more than the verified-token cache holds, so every request verifies a signature).
(c) is \`requireBearerAuth\` of \`@modelcontextprotocol/server\` 2.4.0 with a jose verifier making the same checks
(issuer, audience, \`typ\`, algorithm, expiry) and no cache, since the SDK has none.

Run: \`node bench/run.ts\` in \`packages/resource-server\` (after \`tsc -b\`).

Machine: ${availableParallelism()} CPUs (${cpuModel}), Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
The machine was shared with other work while measuring (load average above the core count), so throughput and
latency vary between runs; server CPU time per request is the steadier figure.

${table}

Against the aims of the issue (this run):

${aims}
<!-- resource-server:end -->`
console.log(`\n${table}`)

if (!args.includes("--no-write")) {
  const file = join(here, "../../../docs/benchmarks.md")
  const current = readFileSync(file, "utf8")
  const start = current.indexOf("<!-- resource-server:start -->")
  const end = current.indexOf("<!-- resource-server:end -->")
  const next =
    start !== -1 && end !== -1
      ? `${current.slice(0, start)}${section}${current.slice(end + "<!-- resource-server:end -->".length)}`
      : `${current.trimEnd()}\n\n${section}\n`
  writeFileSync(file, next)
}
