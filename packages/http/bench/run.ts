/**
 * Bridge benchmark: the same node:http endpoint bare (no Web objects) and through the node:http bridge, GET and a
 * 0.5 KB JSON POST read by the handler; with `--previous <module>`, also through another build's `toNodeListener`
 * (before/after). Server and load generator run in separate processes on loopback; scenarios are interleaved for
 * several rounds and each row is the round with the median throughput. Not a test.
 *
 *   node bench/run.ts [--previous path/to/node.js [--previous-label text]] [--duration 8] [--connections 32] [--rounds 3] [--write]
 *
 * `--write` records the table, the machine and the load in docs/benchmarks.md.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus, loadavg } from "node:os"
import { dirname, join, resolve } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const option = (name: string, fallback?: string): string | undefined => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? fallback : (args[i + 1] ?? fallback)
}
const duration = option("duration", "8")!
const connections = option("connections", "32")!
const rounds = Number(option("rounds", "3"))
const previous = option("previous")

interface Figures {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly total: number
  readonly non2xx: number
  readonly errors: number
  readonly cpuPerRequest: number
}

const lines = (child: ChildProcess): (() => Promise<string>) => {
  const queue: Array<string> = []
  const waiting: Array<(line: string) => void> = []
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const next = waiting.shift()
    if (next === undefined) queue.push(line)
    else next(line)
  })
  return () =>
    new Promise((done) => {
      const line = queue.shift()
      if (line !== undefined) done(line)
      else waiting.push(done)
    })
}

const runScenario = async (mode: string, method: string): Promise<Figures> => {
  const server = spawn(
    process.execPath,
    [join(here, "server.ts"), mode, ...(previous === undefined ? [] : [resolve(previous)])],
    { stdio: ["pipe", "pipe", "inherit"] },
  )
  const next = lines(server)
  const cpu = async () => {
    server.stdin!.write("cpu\n")
    return (JSON.parse(await next()) as { cpu: number }).cpu
  }
  try {
    const { port } = JSON.parse(await next()) as { port: number }
    const load = async (seconds: string) => {
      const child = spawn(
        process.execPath,
        [join(here, "load.ts"), `http://127.0.0.1:${port}/mcp`, method, seconds, connections],
        { stdio: ["ignore", "pipe", "inherit"] },
      )
      return JSON.parse(await lines(child)()) as Omit<Figures, "cpuPerRequest">
    }
    await load("2")
    const before = await cpu()
    const figures = await load(duration)
    const after = await cpu()
    return { ...figures, cpuPerRequest: (after - before) / figures.total }
  } finally {
    server.kill()
  }
}

const modes = [
  { mode: "bare", label: "bare node:http (no Web objects)" },
  ...(previous === undefined
    ? []
    : [{ mode: "previous", label: `previous bridge (${option("previous-label", "`--previous`")})` }]),
  { mode: "bridge", label: "@keyway/http/node bridge" },
]
const scenarios = ["GET", "POST"].flatMap((method) => modes.map((m) => ({ ...m, method })))
const loadBefore = loadavg()[0] ?? 0
const samples = scenarios.map(() => [] as Array<Figures>)
for (let round = 1; round <= rounds; round++) {
  for (const [i, s] of scenarios.entries()) {
    const figures = await runScenario(s.mode, s.method)
    samples[i]!.push(figures)
    console.log(
      `round ${round} ${s.method} ${s.label}: ${Math.round(figures.rps)} req/s, ${figures.cpuPerRequest.toFixed(1)} µs CPU`,
    )
  }
}
const loadAfter = loadavg()[0] ?? 0
const median = (list: Array<Figures>): Figures => {
  const byRps = [...list].sort((a, b) => a.rps - b.rps)[Math.floor(list.length / 2)]!
  const cpu = list.map((f) => f.cpuPerRequest).sort((a, b) => a - b)[Math.floor(list.length / 2)]!
  return { ...byRps, cpuPerRequest: cpu }
}
const results = scenarios.map((s, i) => ({ ...s, figures: median(samples[i]!) }))
const bareOf = (method: string) => results.find((r) => r.method === method && r.mode === "bare")!.figures
const table = [
  "| Request | Server | req/s | % of bare | p50 (ms) | p99 (ms) | server CPU per request (µs) | % of bare by CPU | non-2xx |",
  "|---|---|---:|---:|---:|---:|---:|---:|---:|",
  ...results.map(
    ({ method, label, figures }) =>
      `| ${method === "GET" ? "GET" : "POST 0.5 KB JSON"} | ${label} | ${Math.round(figures.rps)} | ${Math.round((figures.rps / bareOf(method).rps) * 100)}% | ${figures.p50} | ${figures.p99} | ${figures.cpuPerRequest.toFixed(1)} | ${Math.round((bareOf(method).cpuPerRequest / figures.cpuPerRequest) * 100)}% | ${figures.non2xx} |`,
  ),
].join("\n")
console.log(`\n${table}`)

if (args.includes("--write")) {
  const cpuModel =
    /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model ?? "unknown"
  const section = `<!-- http-bridge:start -->
## @keyway/http: the node:http bridge

One endpoint answering \`{"ok":true}\` on node:http: bare (a plain listener, no Web \`Request\`/\`Response\`) and through
the bridge every Keyway server uses (\`toNodeListener\`: Host, request-target, method and body-limit checks, a Web
\`Request\` whose body of up to 64 KiB is read whole first, and a \`Response\` complete at once written in one write)${previous === undefined ? "" : ", and through the previous bridge for a before/after comparison"}. GET, and a 0.5 KB JSON POST whose
body the handler reads. Load: autocannon in a separate process, ${connections} connections, ${duration} s after a 2 s
warm-up, loopback; scenarios interleaved for ${rounds} rounds, each row the round with the median throughput and the
median server CPU time per request over the rounds ("% of bare by CPU" is bare's CPU per request over the row's).

Run: \`${["node bench/run.ts", ...args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a))].join(" ")}\` in \`packages/http\` (after \`tsc -b\`); for before/after rows,
\`--previous\` takes an older build of the bridge (its \`node.js\`, e.g. compiled from \`git archive <commit> packages/http/src\`).

Machine: ${availableParallelism()} CPUs (${cpuModel}), Node ${process.version}, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC;
1-minute load average ${loadBefore.toFixed(2)} when the run started and ${loadAfter.toFixed(2)} when it ended. Server CPU time per
request is the steadier figure.

${table}
<!-- http-bridge:end -->`
  const file = join(here, "../../../docs/benchmarks.md")
  const current = readFileSync(file, "utf8")
  const start = current.indexOf("<!-- http-bridge:start -->")
  const end = current.indexOf("<!-- http-bridge:end -->")
  // Notes written by hand below the marker are kept.
  const marker = "<!-- http-bridge:notes -->"
  const notesAt = start === -1 || end === -1 ? -1 : current.indexOf(marker, start)
  const notes = notesAt !== -1 && notesAt < end ? `\n${current.slice(notesAt, end)}` : "\n"
  const whole = `${section.slice(0, -"<!-- http-bridge:end -->".length).trimEnd()}\n${notes}<!-- http-bridge:end -->`
  writeFileSync(
    file,
    start !== -1 && end !== -1
      ? `${current.slice(0, start)}${whole}${current.slice(end + "<!-- http-bridge:end -->".length)}`
      : `${current.trimEnd()}\n\n${whole}\n`,
  )
}
