/**
 * Client benchmark: the cold flow (first request to the first 2xx, through discovery, registration, login, consent
 * and the token request) of Keyway's client and of the official MCP SDK's client, and Keyway's warm start (tokens
 * kept in the file store by an earlier process, access token expired, refresh token valid), against the same real
 * Keyway authorization server and protected MCP server (apps/authorization-server on SQLite, apps/mcp-server; see
 * stack.ts) on loopback. Every flow runs in a fresh Node process; scenarios are interleaved round by round and
 * each figure is the median over the rounds.
 *
 *   node bench/run.ts [--rounds 7] [--no-write] [--previous <dir>/node/index.js --previous-name <name>]
 *
 * (in packages/client, after `npm run build`). `--previous` adds Keyway's cold (file store) and warm rows for another
 * build of this package: its `dist` copied inside this package so that its imports resolve (`bench/previous/dist`,
 * which git ignores as every `dist/`), e.g. `git archive <commit> tsconfig.base.json packages/client packages/core`
 * unpacked elsewhere, its node_modules linked to this checkout's, `tsc -b packages/client/tsconfig.json` there.
 *
 * Writes its section of docs/benchmarks.md unless `--no-write`.
 */
import { execFile } from "node:child_process"
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { startStack } from "./stack.ts"
import type { Figures } from "./wire.ts"

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, "../../..")
const args = process.argv.slice(2)
const option = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? fallback : (args[i + 1] ?? fallback)
}
const rounds = Number(option("rounds", "7"))
const previous = option("previous", "")
const previousName = option("previous-name", "previous")
const write = !args.includes("--no-write")

type Result = Figures & { readonly scenario: string; readonly loadMs: number }

const flow = (scenario: string, setup: object): Promise<Result> =>
  new Promise((done, fail) => {
    execFile(
      process.execPath,
      [join(here, "flow.ts"), scenario, JSON.stringify(setup)],
      { cwd: join(here, ".."), timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error !== null) fail(new Error(`${scenario}: ${error.message}\n${stderr}`))
        else done(JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as Result)
      },
    )
  })

/** Marks the access token in a file store expired, as time would (the refresh token stays valid). */
const expire = async (file: string): Promise<void> => {
  const shape = JSON.parse(await readFile(file, "utf8")) as { entries: Record<string, Record<string, unknown>> }
  let found = 0
  for (const [key, value] of Object.entries(shape.entries)) {
    if (!key.startsWith("tokens:")) continue
    if (typeof value.refresh_token !== "string") throw new Error("the stored tokens carry no refresh token")
    value.expires_at = Date.now() - 1000
    found++
  }
  if (found !== 1) throw new Error(`expected one set of tokens in ${file}, found ${found}`)
  await writeFile(file, JSON.stringify(shape))
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

const loadBefore = loadavg()[0] as number
const stack = await startStack(root)
const dir = await mkdtemp(join(tmpdir(), "keyway-client-bench-"))
const { user, mcpUrl } = stack
const rows = new Map<string, Array<Result>>()
const record = (name: string, result: Result) => {
  rows.set(name, [...(rows.get(name) ?? []), result])
  process.stderr.write(
    `${name}: ${result.requests} requests, ${result.wallMs.toFixed(1)} ms, ${result.outsideMs.toFixed(1)} ms outside HTTP, ${result.cpuMs.toFixed(1)} ms CPU\n`,
  )
}
/** A cold Keyway flow on a file store, then a warm start on what it left, for one build of the client. */
const coldThenWarm = async (prefix: string, round: number, module: string | undefined) => {
  const file = join(dir, `${prefix}-${round}`, "auth.json")
  const build = module === undefined ? {} : { module }
  record(`${prefix}file`, await flow("keyway", { mcpUrl, user, file, ...build }))
  await expire(file)
  record(`${prefix}warm`, await flow("warm", { mcpUrl, user, file, ...build }))
}
try {
  // One unmeasured flow of each kind first: the servers' own first-request costs (JIT, SQLite pages) are not the
  // clients'.
  await flow("sdk", { mcpUrl, user })
  await flow("keyway", { mcpUrl, user })
  for (let round = 0; round < rounds; round++) {
    const steps: Array<() => Promise<void>> = [
      () => coldThenWarm("", round, undefined),
      async () => record("sdk", await flow("sdk", { mcpUrl, user })),
      async () => record("memory", await flow("keyway", { mcpUrl, user })),
      ...(previous === "" ? [] : [() => coldThenWarm("previous-", round, resolve(previous))]),
    ]
    // Interleaved, in a different order each round.
    for (let i = 0; i < steps.length; i++) await steps[(i + round) % steps.length]?.()
  }
} finally {
  await stack.close()
  await rm(dir, { recursive: true, force: true })
}
const loadAfter = loadavg()[0] as number

const LABELS: ReadonlyArray<readonly [string, string]> = [
  ["file", "Keyway, cold, file store (`store: { file }`)"],
  ["memory", "Keyway, cold, memory store"],
  ["sdk", "official SDK (`@modelcontextprotocol/client` 2.4.0, `authProvider` in memory), cold"],
  ["warm", "Keyway, warm start: file store from an earlier process, access token expired"],
  ["previous-file", `previous build (${previousName}), cold, file store`],
  ["previous-warm", `previous build (${previousName}), warm start`],
]
const table = [
  "| Flow | requests | wall (ms) | in HTTP (ms) | outside HTTP (ms) | CPU (ms) | module load (ms) | process start to 2xx (ms) | process CPU to 2xx (ms) |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...LABELS.filter(([name]) => rows.has(name)).map(([name, label]) => {
    const results = rows.get(name) ?? []
    const pick = (f: (r: Result) => number) => median(results.map(f)).toFixed(1)
    const counts = [...new Set(results.map((r) => r.requests))].join(", ")
    return `| ${label} | ${counts} | ${pick((r) => r.wallMs)} | ${pick((r) => r.httpMs)} | ${pick((r) => r.outsideMs)} | ${pick((r) => r.cpuMs)} | ${pick((r) => r.loadMs)} | ${pick((r) => r.fromProcessStartMs)} | ${pick((r) => r.processCpuMs)} |`
  }),
].join("\n")
const traces = ["file", "sdk", "warm"]
  .map((name) => `- ${name}: ${rows.get(name)?.[0]?.trace.join(", ") ?? ""}`)
  .join("\n")
process.stdout.write(`${table}\n\n${traces}\n`)

if (write) {
  const cpu = cpus()[0]?.model.trim() ?? "unknown CPU"
  const date = new Date().toISOString().slice(0, 10)
  const section = `<!-- client:start -->
## @keyway/client: cold and warm start

Run: \`${["node bench/run.ts", ...args].join(" ")}\` in \`packages/client\` (after \`npm run build\`), ${date}.

A real Keyway authorization server and a protected MCP server (apps/authorization-server on SQLite, abuse limits
off, and apps/mcp-server) on loopback, in the bench's process; every flow in a fresh Node process. The application
connects (MCP \`initialize\`) through the official SDK's \`Client\` and Streamable HTTP transport, with Keyway's
drop-in fetch or with the SDK's own OAuth; the same scripted user (plain code, bench/user.ts) signs in and approves
for both. Cold: no stored state, so the first request gets a 401, then protected resource metadata, authorization
server metadata, dynamic registration, the authorization request with login and consent (four requests), the token
request and the retried request. Warm: a new process on the file store a cold Keyway flow left, its access token
marked expired (the refresh token valid).

Measured from the application's \`connect\` call (modules already loaded; their load time is the module load column)
to the arrival of the first 2xx answer to an MCP request. Every request of both clients and of the scripted user goes
through one metering fetch (bench/wire.ts); **in HTTP** is the time during which at least one request was waiting for
its answer (fetch called, status and headers not yet in), **outside HTTP** is the wall time minus that: the
clients' own work (and the scripted user's, the same for both). **CPU** is the client process's CPU time (user and
system) over the same span, which other load on the machine disturbs less than wall time. The last two columns
take the whole process into account, from its start (Node's own start-up and every module load included) to the same
answer. Median of ${rounds} rounds, scenarios interleaved in a different order each round.${
    previous === ""
      ? ""
      : `
The "previous build" rows run ${previousName}'s build of this package (its \`dist\` under \`bench/previous\`) in the
same rounds.`
  }

${table}

Requests, in order (first round):

${traces}

Machine: ${availableParallelism()} CPUs (${cpu}), Node ${process.version}, ${process.platform}/${process.arch}; 1-minute load
average ${loadBefore.toFixed(2)} when the run started and ${loadAfter.toFixed(2)} when it ended.
<!-- client:end -->`
  const path = join(root, "docs/benchmarks.md")
  const doc = await readFile(path, "utf8")
  const pattern = /<!-- client:start -->[\s\S]*?<!-- client:end -->/u
  // Written notes (analysis, before/after figures) sit between their own markers and survive a new run.
  const notes = /<!-- client:notes:start -->[\s\S]*?<!-- client:notes:end -->/u.exec(doc)?.[0]
  const full = notes === undefined ? section : section.replace("<!-- client:end -->", `${notes}\n<!-- client:end -->`)
  await writeFile(path, pattern.test(doc) ? doc.replace(pattern, full) : `${doc.trimEnd()}\n\n${full}\n`)
}
