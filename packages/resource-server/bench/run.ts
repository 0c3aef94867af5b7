/**
 * Resource-server benchmark: the same Node http endpoint with (a) no authentication, (b) Keyway with ES256 JWTs,
 * same token repeated (verified-token cache) and distinct tokens (signature verification every time), (c) the MCP
 * SDK v2 requireBearerAuth gate with an equivalent jose verifier; and the anchors they are judged against in the same
 * run: bare node:http (no adapter), jose's `jwtVerify` alone and Keyway's `check()` on bare node:http with distinct
 * tokens. Server and load generator run in separate processes on loopback. Prints a table and records it in
 * docs/benchmarks.md, keeping the notes below its `<!-- resource-server:notes -->` marker.
 *
 * Scenarios run interleaved for several rounds; each row reports the round with the median throughput, and the median
 * server CPU time per request over the rounds.
 *
 *   node bench/run.ts [--duration 10] [--connections 32] [--rounds 3] [--tokens 60000] [--no-write]
 *                     [--previous <dir>/index.js]
 *
 * `--previous` adds the four Keyway rows (protect() twice, protectNode() and check()) for an older build of this package (e.g. `dist` of another commit copied
 * next to this package's node_modules, so its imports resolve), interleaved with the others: a before/after
 * comparison on the same machine in the same run.
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

interface Scenario {
  readonly id: string
  readonly label: string
  readonly mode: string
  readonly tokens: "same" | "distinct"
}
const scenarios: Array<Scenario> = [
  { id: "bare", label: "bare node:http (no adapter, no authentication)", mode: "bare", tokens: "same" },
  { id: "none", label: "(a) no authentication, through the adapter", mode: "none", tokens: "same" },
  {
    id: "nodeCached",
    label: "Keyway `protectNode()`, the plain-Node form, ES256 JWT, same token (cache)",
    mode: "keyway-node",
    tokens: "same",
  },
  { id: "cached", label: "(b) Keyway `protect()`, ES256 JWT, same token (cache)", mode: "keyway", tokens: "same" },
  { id: "distinct", label: "(b) Keyway `protect()`, ES256 JWT, distinct tokens", mode: "keyway", tokens: "distinct" },
  { id: "check", label: "Keyway `check()` on bare node:http, distinct tokens", mode: "check", tokens: "distinct" },
  { id: "jose", label: "jose `jwtVerify` alone on bare node:http, distinct tokens", mode: "jose", tokens: "distinct" },
  {
    id: "floor",
    label: "floor: one `node:crypto` ES256 verification and the claims, thread pool, distinct tokens",
    mode: "floor",
    tokens: "distinct",
  },
  {
    id: "floorSync",
    label: "floor: the same on the event loop, distinct tokens",
    mode: "floor-sync",
    tokens: "distinct",
  },
  { id: "sdkSame", label: "(c) MCP SDK requireBearerAuth + jose, same token", mode: "sdk", tokens: "same" },
  {
    id: "sdkDistinct",
    label: "(c) MCP SDK requireBearerAuth + jose, distinct tokens",
    mode: "sdk",
    tokens: "distinct",
  },
]
if (previous !== "") {
  scenarios.push(
    { id: "prevSame", label: "(b) previous build, same token (cache)", mode: "keyway-previous", tokens: "same" },
    { id: "prevDistinct", label: "(b) previous build, distinct tokens", mode: "keyway-previous", tokens: "distinct" },
    {
      id: "prevNodeCached",
      label: "previous build, `protectNode()`, same token (cache)",
      mode: "keyway-node-previous",
      tokens: "same",
    },
    {
      id: "prevCheck",
      label: "previous build, `check()`, distinct tokens",
      mode: "check-previous",
      tokens: "distinct",
    },
  )
}

// `--only id,id` runs a subset of the scenarios (for quick comparisons; the section is not written then).
const only = option("only", "")
if (only !== "") {
  const wanted = new Set(only.split(","))
  scenarios.splice(0, scenarios.length, ...scenarios.filter((s) => wanted.has(s.id)))
}

const loadAtStart = loadavg()[0] ?? 0
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
const median = (values: ReadonlyArray<number>): number => [...values].sort((a, b) => a - b)[values.length >> 1]!
const results = scenarios.map((scenario, i) => {
  const sorted = [...samples[i]!].sort((a, b) => a.rps - b.rps)
  const figures = { ...sorted[sorted.length >> 1]!, cpuPerRequest: median(samples[i]!.map((f) => f.cpuPerRequest)) }
  return { ...scenario, figures }
})
const loadAtEnd = loadavg()[0] ?? 0
if (only !== "") {
  for (const { label, figures } of results) {
    console.log(`${label}: ${Math.round(figures.rps)} req/s, ${figures.cpuPerRequest.toFixed(1)} µs CPU per request`)
  }
  process.exit(0)
}
const of = (id: string): Figures => results.find((r) => r.id === id)!.figures

const cpuModel =
  /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model ?? "unknown"
const bare = of("bare")
const table = [
  "| Scenario | req/s | % of bare node:http | p50 latency (ms) | p99 latency (ms) | server CPU per request (µs) | non-2xx |",
  "|---|---:|---:|---:|---:|---:|---:|",
  ...results.map(
    ({ label, figures }) =>
      `| ${label} | ${Math.round(figures.rps)} | ${Math.round((figures.rps / bare.rps) * 100)}% | ${figures.p50} | ${figures.p99} | ${figures.cpuPerRequest.toFixed(1)} | ${figures.non2xx} |`,
  ),
].join("\n")
const verdict = (ok: boolean) => (ok ? "met" : "not met")
const percent = (value: number) => `${Math.round(value * 100)}%`
/** `subject` against `anchor`: throughput ratio, and CPU ratio (anchor's CPU over subject's: above 1 is cheaper). */
const ratio = (subject: Figures, anchor: Figures) => ({
  rps: subject.rps / anchor.rps,
  cpu: anchor.cpuPerRequest / subject.cpuPerRequest,
})
const aim = (label: string, subject: string, anchor: string, least: number, asTimes: boolean): string => {
  const s = of(subject)
  const a = of(anchor)
  const r = ratio(s, a)
  const show = (value: number) => (asTimes ? `${value.toFixed(2)}x` : percent(value))
  return (
    `- ${label}: ${Math.round(s.rps)} vs ${Math.round(a.rps)} req/s, ${show(r.rps)} (aim: at least ${show(least)}, ` +
    `${verdict(r.rps >= least)}); server CPU ${s.cpuPerRequest.toFixed(1)} vs ${a.cpuPerRequest.toFixed(1)} µs per ` +
    `request, ${show(r.cpu)} (${verdict(r.cpu >= least)}).`
  )
}
const compare = (label: string, b: Figures, c: Figures) =>
  `- (b) against (c), ${label}: ${Math.round(b.rps)} vs ${Math.round(c.rps)} req/s (${verdict(b.rps >= c.rps)}), ` +
  `p50 ${b.p50} vs ${c.p50} ms (${verdict(b.p50 <= c.p50)}), p99 ${b.p99} vs ${c.p99} ms (${verdict(b.p99 <= c.p99)}), ` +
  `server CPU ${b.cpuPerRequest.toFixed(1)} vs ${c.cpuPerRequest.toFixed(1)} µs per request (${verdict(b.cpuPerRequest <= c.cpuPerRequest)}).`
const adapter = ratio(of("none"), bare)
const aims = [
  aim("Cache misses: Keyway `check()` against jose `jwtVerify` alone", "check", "jose", 1.3, true),
  aim(
    "The plain-Node form (`protectNode()`) with a cached token against bare node:http",
    "nodeCached",
    "bare",
    0.8,
    false,
  ),
  aim(
    "The Web-handler form (`protect()`, (b)) with a cached token against (a), the same adapter without authentication",
    "cached",
    "none",
    0.9,
    false,
  ),
  `- The Web-handler form against bare node:http, for comparison: ${percent(ratio(of("cached"), bare).rps)} of the throughput, ${percent(ratio(of("cached"), bare).cpu)} by server CPU.`,
  `- The adapter alone, (a) against bare node:http: ${percent(adapter.rps)} of the throughput, ${percent(adapter.cpu)} by server CPU (${(of("none").cpuPerRequest - bare.cpuPerRequest).toFixed(1)} µs per request).`,
  compare("same token", of("cached"), of("sdkSame")),
  compare("distinct tokens", of("distinct"), of("sdkDistinct")),
].join("\n")
const command = ["node bench/run.ts", ...args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a))].join(" ")

const NOTES = "<!-- resource-server:notes -->"
const generated = `<!-- resource-server:start -->
## @keyway/resource-server

One protected endpoint (\`GET /mcp\`, a small JSON answer) on \`node:http\`. The README's plain-Node form is
\`protectNode()\`: a node:http handler behind the bridge's checks (\`toNodeListener\`) and Keyway's authentication,
with no Web objects. (a), (b) and (c) go through the bridge's Web Request/Response adapter (\`toNodeListener\` around a
Web handler, \`protect()\` for Keyway), and (a) receives the same \`Authorization\` header (ignored), so those rows
differ only by authentication. The anchors in the same run: bare
node:http (a plain listener, no Web objects, no authentication), jose's \`jwtVerify\` alone in a plain listener with
the checks Keyway makes (algorithm, issuer, audience, \`typ\`, expiry, scope) and no cache, and Keyway's
framework-neutral \`check()\` in a plain listener. Load: autocannon in a separate process, ${connections} connections,
${duration} s after a 2 s warm-up, loopback; the scenarios ran interleaved for ${rounds} rounds; each row is the round
with the median throughput, with the median server CPU time per request over the rounds. Distinct tokens:
${distinctTokens} pre-minted ES256 JWTs cycled (more than the verified-token cache holds, so every request verifies a
signature). (c) is \`requireBearerAuth\` of \`@modelcontextprotocol/server\` 2.4.0 with the jose verifier of the
anchor, since the SDK has no cache.

Run: \`${command}\` in \`packages/resource-server\` (after \`tsc -b\`), unattended; \`--previous <dir>/index.js\` adds the
four Keyway rows of another build.

Machine: ${availableParallelism()} CPUs (${cpuModel}), Node ${process.version}, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC;
1-minute load average ${loadAtStart.toFixed(2)} when the run started and ${loadAtEnd.toFixed(2)} when it ended. Server CPU time
per request is the steadier figure; compare rows within one run, not across dates.

${table}

Against the aims (this run; a ratio by server CPU is the anchor's CPU per request over the subject's):

${aims}
`
console.log(`\n${table}\n\n${aims}`)

if (!args.includes("--no-write")) {
  const file = join(here, "../../../docs/benchmarks.md")
  const current = readFileSync(file, "utf8")
  const start = current.indexOf("<!-- resource-server:start -->")
  const end = current.indexOf("<!-- resource-server:end -->")
  const notesAt = start === -1 || end === -1 ? -1 : current.indexOf(NOTES, start)
  const notes = notesAt !== -1 && notesAt < end ? current.slice(notesAt, end) : `${NOTES}\n`
  const section = `${generated}\n${notes}<!-- resource-server:end -->`
  const next =
    start !== -1 && end !== -1
      ? `${current.slice(0, start)}${section}${current.slice(end + "<!-- resource-server:end -->".length)}`
      : `${current.trimEnd()}\n\n${section}\n`
  writeFileSync(file, next)
}
