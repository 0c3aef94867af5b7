/**
 * Soak benchmark of the two runnable servers: does resident memory stay bounded under a long mixed load?
 *
 *   node bench/soak.ts [--requests 200000] [--every 20000] [--sample 5000] [--idle 30] [--concurrency 8]
 *                      [--seed 1] [--write] [--keep] [--snapshots] [--trace-gc]
 *
 * (in apps/demo, after `npm run build`; on Linux, since memory is read from /proc). It starts the authorization
 * server app (apps/authorization-server/dist/main.js: SQLite in a temporary data directory, its default) and the notes
 * MCP server app (apps/mcp-server/dist/main.js) as child processes on loopback, exactly as users run them (plain
 * `node`, no extra flags), then the load generator (bench/soak-traffic.ts) as a third process, and prints each server's
 * resident memory (VmRSS) against the number of requests: as it is while the load runs, and after each `--every`
 * requests once everything in flight has been answered and the servers have idled `--idle` seconds.
 *
 * The rule: each server's resident memory after all the requests is at most 20% above what it was after the first
 * `--every`, as it is when that many requests have been sent (the figure after the idle pause is printed beside it).
 *
 * `--write` replaces the soak section of docs/benchmarks.md (its notes kept). `--keep` keeps the temporary directory
 * (the servers' logs and database). To find what grows (the figures of such runs are not the benchmark's):
 * `--snapshots` has each server write a heap snapshot into that directory at every pause, once what was sent has
 * been answered (Node's `--heapsnapshot-signal`; a snapshot collects garbage first and costs memory); `--trace-gc` has
 * them write V8's line for each collection (`--trace-gc --trace-gc-nvp`: the live size after each full collection,
 * and what V8 has committed for its heap) to `<server>.gc.log` there.
 *
 * The authorization server's configuration for the run: eight users, one pre-registered public client, the notes
 * server as its resource, dynamic registration on, its abuse limits on with the registration limit raised to
 * 1,000,000 per hour (the load registers thousands of clients from one address), and `clientAddressHeader` set to
 * `X-Real-IP` so that the wrong passwords of the load come from made-up addresses while its good sign-ins come from
 * 200 addresses that never fail.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createWriteStream } from "node:fs"
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { freePort } from "@keyway/testing"
import type { Plan } from "./soak-traffic.ts"

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, "../../..")
const args = process.argv.slice(2)
const option = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`)
  const value = i === -1 ? fallback : Number(args[i + 1])
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive whole number`)
  return value
}
const total = option("requests", 200_000)
const every = option("every", 20_000)
const sampleEvery = option("sample", 5_000)
const idleSeconds = option("idle", 30)
const concurrency = option("concurrency", 8)
const seed = option("seed", 1)
const write = args.includes("--write")
const snapshots = args.includes("--snapshots")
const traceGc = args.includes("--trace-gc")
const keep = args.includes("--keep") || snapshots || traceGc

const NOTE_SCOPES = { "notes:read": "Read your notes", "notes:write": "Create, change and delete your notes" }
// Eight users, so that concurrent sign-ins seldom meet on one account: the per-account login limit counts an attempt
// when it starts and gives it back when it succeeds, so five at once on one account would lock it.
const USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"].map((username) => ({
  username,
  password: `${username}'s long password for the soak`,
}))
const CLIENT_ID = "soak-cli"
const REDIRECT_URI = "http://127.0.0.1/callback"

interface Server {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  /** With --trace-gc: MB of V8's heap live after the last full collection so far. */
  readonly gc: { readonly live: number | undefined }
}

/** `node <main> ...args`, its stderr copied to `log`; resolves once a line matches `ready`. */
const start = async (main: string, argv: ReadonlyArray<string>, log: string, ready: RegExp) => {
  const child = spawn(
    process.execPath,
    [
      ...(snapshots ? ["--heapsnapshot-signal=SIGUSR2"] : []),
      ...(traceGc ? ["--trace-gc", "--trace-gc-nvp"] : []),
      join(root, main),
      ...argv,
    ],
    { stdio: ["ignore", traceGc ? "pipe" : "ignore", "pipe"], cwd: dir },
  )
  // With --trace-gc: each full collection's line (gc=mc) gives what was live after it (end_object_size).
  const gc = { live: undefined as number | undefined }
  if (child.stdout !== null) {
    child.stdout.pipe(createWriteStream(log.replace(/\.log$/, ".gc.log")))
    let partial = ""
    child.stdout.on("data", (chunk: Buffer) => {
      const lines = (partial + chunk.toString("utf8")).split("\n")
      partial = lines.pop() ?? ""
      for (const line of lines) {
        const live = / gc=mc .* end_object_size=(\d+)/.exec(line)?.[1]
        if (live !== undefined) gc.live = Number(live) / 1024 / 1024
      }
    })
  }
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
  const file = createWriteStream(log)
  let seen = ""
  const match = await new Promise<RegExpExecArray>((done, fail) => {
    const onData = (chunk: Buffer) => {
      seen += chunk.toString("utf8")
      const m = ready.exec(seen)
      if (m !== null) {
        child.stderr?.off("data", onData)
        done(m)
      }
    }
    child.stderr?.on("data", onData)
    void exited.then((code) => fail(new Error(`${main} exited with ${code} before it was ready:\n${seen}`)))
  })
  file.write(seen)
  child.stderr?.pipe(file)
  return { server: { child, exited, gc } satisfies Server, match }
}

const stop = async (server: Server): Promise<void> => {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGTERM")
  await server.exited
}

interface Parts {
  readonly brk: number
  readonly files: number
  readonly anonymous: number
}
interface Sample {
  readonly kind: "running" | "drained" | "idle"
  readonly requests: number
  readonly seconds: number
  readonly as: number
  readonly mcp: number
  readonly asParts: Parts
  readonly mcpParts: Parts
  /** With --trace-gc: V8's live heap after the last full collection (MB). */
  readonly asLive?: number | undefined
  readonly mcpLive?: number | undefined
}
interface Done {
  readonly requests: number
  readonly seconds: number
  readonly statuses: Record<string, number>
  readonly unexpected: Record<string, { readonly count: number; readonly example: string }>
}

const parts = (p: Parts) => `brk ${p.brk.toFixed(0)}, anonymous ${p.anonymous.toFixed(0)}, files ${p.files.toFixed(0)}`
const machine = () =>
  `${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? "unknown"}), Node ${process.version}, ${process.platform}/${process.arch}`
const loads = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" / ")

const dir = await mkdtemp(join(tmpdir(), "keyway-soak-"))
const servers: Array<Server> = []
let generator: ChildProcess | undefined
// Interrupted: the servers and the load generator stop too.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    generator?.kill("SIGKILL")
    for (const s of servers) s.child.kill("SIGKILL")
    process.exit(130)
  })
}
try {
  const asPort = await freePort()
  const mcpPort = await freePort()
  const resource = `http://127.0.0.1:${mcpPort}/mcp`
  const config = join(dir, "keyway.json")
  await writeFile(
    config,
    JSON.stringify({
      users: USERS,
      clients: [
        { clientId: CLIENT_ID, clientName: "Soak CLI", redirectUris: [REDIRECT_URI], tokenEndpointAuthMethod: "none" },
      ],
      resources: [{ uri: resource, name: "Keyway notes", scopes: NOTE_SCOPES }],
      registration: true,
      rateLimits: { registration: { max: 1_000_000 }, clientAddressHeader: "X-Real-IP" },
    }),
  )
  const as = await start(
    "apps/authorization-server/dist/main.js",
    ["--config", config, "--port", String(asPort), "--data-dir", join(dir, "data")],
    join(dir, "authorization-server.log"),
    /listening on \S+, issuer (\S+);/,
  )
  servers.push(as.server)
  const issuer = as.match[1]!
  const mcp = await start(
    "apps/mcp-server/dist/main.js",
    ["--authorization-server", issuer, "--port", String(mcpPort)],
    join(dir, "mcp-server.log"),
    /listening on /,
  )
  servers.push(mcp.server)

  const plan: Plan = {
    issuer,
    mcp: resource,
    asPid: as.server.child.pid!,
    mcpPid: mcp.server.child.pid!,
    total,
    sampleEvery,
    pauseEvery: every,
    idleMs: idleSeconds * 1000,
    concurrency,
    seed,
    users: USERS,
    clientId: CLIENT_ID,
    redirectUri: REDIRECT_URI,
    goodAddresses: "192.0.2",
  }
  const startedAt = new Date()
  const loadAtStart = loads()
  process.stdout.write(
    `soak: ${total} requests, ${concurrency} at a time; authorization server pid ${plan.asPid}, MCP server pid ${plan.mcpPid}; logs in ${dir}\n`,
  )
  const samples: Array<Sample> = []
  let done: Done | undefined
  // The plan goes on standard input, so that the command line stays short.
  const load = spawn(process.execPath, [join(here, "soak-traffic.ts")], {
    cwd: join(here, ".."),
    stdio: ["pipe", "pipe", "inherit"],
  })
  load.stdin.end(JSON.stringify(plan))
  let pending = ""
  generator = load
  load.stdout.on("data", (chunk: Buffer) => {
    pending += chunk.toString("utf8")
    let nl = pending.indexOf("\n")
    while (nl !== -1) {
      const event = JSON.parse(pending.slice(0, nl)) as { type: string } & Sample & Done
      pending = pending.slice(nl + 1)
      nl = pending.indexOf("\n")
      if (event.type === "sample") {
        samples.push({ ...event, asLive: as.server.gc.live, mcpLive: mcp.server.gc.live })
        if (snapshots && event.kind === "drained") for (const s of servers) s.child.kill("SIGUSR2")
        const live = (v: number | undefined) => (v === undefined ? "" : `, live ${v.toFixed(0)}`)
        process.stdout.write(
          `${String(event.requests).padStart(7)} requests  ${event.seconds.toFixed(0).padStart(5)} s  ${event.kind.padEnd(7)}  authorization server ${event.as.toFixed(1).padStart(6)} MB (${parts(event.asParts)}${live(as.server.gc.live)})  MCP server ${event.mcp.toFixed(1).padStart(6)} MB (${parts(event.mcpParts)}${live(mcp.server.gc.live)})  (load ${loads()})\n`,
        )
      } else if (event.type === "done") done = event
    }
  })
  const [code, signal] = await new Promise<[number | null, string | null]>((finish) =>
    load.on("exit", (c, s) => finish([c, s])),
  )
  if (code !== 0 || done === undefined) throw new Error(`the load generator exited with ${code ?? signal}`)
  const loadAtEnd = loads()
  for (const s of servers) {
    if (s.child.exitCode !== null || s.child.signalCode !== null) throw new Error("a server stopped during the run")
  }

  // The curve: every `every` requests, after the idle pause, with the sample taken as it ran.
  const at = (requests: number, kind: Sample["kind"]) => samples.find((s) => s.requests === requests && s.kind === kind)
  const points = [0, ...Array.from({ length: Math.floor(total / every) }, (_, i) => (i + 1) * every)]
  const rows = points.map((n) => ({ n, running: at(n, "running"), idle: at(n, "idle") }))
  const first = rows.find((r) => r.n === every)
  const last = rows.at(-1)
  const growth = (server: "as" | "mcp", kind: "running" | "idle") => {
    const a = first?.[kind]?.[server]
    const b = last?.[kind]?.[server]
    return a === undefined || b === undefined ? undefined : (b - a) / a
  }
  const verdicts = (["as", "mcp"] as const).map((server) => {
    const idle = growth(server, "idle")
    const running = growth(server, "running")
    // Judged on the figure as it is when the count is reached: the one after the idle pause depends on whether V8's
    // memory reducer happened to run in it. Less memory is never a failure.
    const held = running !== undefined && running <= 0.2
    return { server, idle, running, held }
  })
  const pct = (g: number | undefined) => (g === undefined ? "n/a" : `${g >= 0 ? "+" : ""}${(g * 100).toFixed(1)}%`)
  const name = { as: "authorization server", mcp: "MCP server" }
  const mb = (v: number | undefined) => (v === undefined ? "" : v.toFixed(1))
  const count = (n: number | undefined) => (n ?? 0).toLocaleString("en-US")
  // With --trace-gc, beside each server's resident memory: what V8 found live at its last full collection.
  const liveColumns = traceGc
    ? (server: string) => ` ${server}: V8 heap live after the last full collection (MB) |`
    : () => ""
  const liveCell = (v: number | undefined) => (traceGc ? ` ${mb(v)} |` : "")
  const table = [
    `| requests | authorization server (MB) | authorization server, after the idle pause (MB) |${liveColumns("authorization server")} MCP server (MB) | MCP server, after the idle pause (MB) |${liveColumns("MCP server")}`,
    `|---:|---:|---:|${traceGc ? "---:|" : ""}---:|---:|${traceGc ? "---:|" : ""}`,
    ...rows.map(
      (r) =>
        `| ${count(r.n)} | ${mb(r.running?.as)} | ${mb(r.idle?.as)} |${liveCell(r.running?.asLive)} ${mb(r.running?.mcp)} | ${mb(r.idle?.mcp)} |${liveCell(r.running?.mcpLive)}`,
    ),
  ]
  // Where the memory is, at the first and the last point of the curve (as it is when the count is reached).
  const whereRows = [first, last].flatMap((r) =>
    r?.running === undefined
      ? []
      : (["as", "mcp"] as const).map((server) => {
          const p = r.running?.[server === "as" ? "asParts" : "mcpParts"]
          return `| ${name[server]} | ${count(r.n)} | ${mb(p?.brk)} | ${mb(p?.anonymous)} | ${mb(p?.files)} |`
        }),
  )
  const where = [
    "| server | requests | `[heap]`: malloc's main arena (MB) | other anonymous memory: V8's heap, other threads' arenas, stacks (MB) | files: node, libraries, SQLite's shared memory (MB) |",
    "|---|---:|---:|---:|---:|",
    ...whereRows,
  ]
  const verdictLines = verdicts.map(
    (v) =>
      `- ${name[v.server]}: ${pct(v.running)} from ${count(every)} to ${count(last?.n)} requests: ${v.held ? "within 20%, held" : "NOT within 20%"} (after the idle pauses: ${pct(v.idle)})`,
  )
  const statusLine = (["as", "mcp"] as const)
    .map((server) => {
      const answers = Object.entries(done?.statuses ?? {})
        .filter(([k]) => k.startsWith(`${server} `))
        .map(([k, v]) => `${k.slice(server.length + 1)} × ${count(v)}`)
      return `${name[server]} ${answers.join(", ")}`
    })
    .join("; ")
  const serverErrors = Object.entries(done.statuses)
    .filter(([k]) => /^\w+ 5\d\d$/.test(k) && !k.endsWith(" 501"))
    .reduce((sum, [, v]) => sum + v, 0)
  const unexpected = Object.entries(done.unexpected)
  process.stdout.write(`\n${table.join("\n")}\n\n${verdictLines.join("\n")}\n\nanswers: ${statusLine}\n`)
  if (unexpected.length > 0) {
    process.stdout.write(
      `unexpected answers:\n${unexpected.map(([k, v]) => `  ${v.count} x ${k}${v.example === k ? "" : `\n    ${v.example}`}`).join("\n")}\n`,
    )
  }
  process.stdout.write(
    `${done.requests} requests in ${done.seconds.toFixed(0)} s (${(done.requests / done.seconds).toFixed(0)}/s); load average ${loadAtStart} at the start, ${loadAtEnd} at the end\n`,
  )

  if (write) {
    const file = join(root, "docs/benchmarks.md")
    const docs = await readFile(file, "utf8")
    const begin = "<!-- soak:start -->"
    const notes = "<!-- soak:notes -->"
    const end = "<!-- soak:end -->"
    const kept = docs.includes(notes) ? docs.slice(docs.indexOf(notes), docs.indexOf(end)) : `${notes}\n`
    const section = [
      begin,
      "## Soak: resident memory of the runnable servers under 200,000 mixed requests",
      "",
      `\`node bench/soak.ts --write\` in \`apps/demo\` (after \`npm run build\`), ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC:`,
      `${count(done.requests)} requests in ${done.seconds.toFixed(0)} s (${(done.requests / done.seconds).toFixed(0)} per second), ${concurrency} at a time, seed ${seed}.`,
      "The authorization server app (SQLite file in a temporary data directory) and the notes MCP server app run as",
      traceGc
        ? "child processes on loopback as users run them (`node` with only `--trace-gc --trace-gc-nvp`, which print a line per collection); the load comes from a third process."
        : "child processes on loopback as users run them (plain `node`, no flags added); the load comes from a third process.",
      `Resident memory is \`VmRSS\` of \`/proc/<pid>/status\`: "running" as it was when the ${count(every)}th, ${count(every * 2)}th, ... request was sent,`,
      `"idle" once every request sent so far had been answered and the servers had then received nothing for ${idleSeconds} s`,
      `(nothing forces a garbage collection).${traceGc ? " The live heap is `end_object_size` of the last `gc=mc` line V8 printed before the sample." : ""}`,
      "",
      `Machine: ${machine()}; load average (1 / 5 / 15 min) ${loadAtStart} at the start and ${loadAtEnd} at the end`,
      "(the machine is shared with other work: throughput moves with it, resident memory much less).",
      "",
      ...table,
      "",
      "Where it is (`Rss` of each mapping in `/proc/<pid>/smaps`):",
      "",
      ...where,
      "",
      `The rule: resident memory after ${count(last?.n)} requests within 20% of its value after ${count(every)}, for each server, as it is when that many requests have been sent.`,
      "",
      ...verdictLines,
      "",
      `Answers by status: ${statusLine}. ${unexpected.length === 0 ? "Each was one its request expects" : `Unexpected: ${unexpected.map(([k, v]) => `${v.count} × ${k}`).join("; ")}`}; ${serverErrors === 0 ? "no 5xx but the 501 of a method no server implements (`PROPFIND`)" : `${serverErrors} answers 5xx other than 501`}.`,
      "",
      kept.trimEnd(),
      end,
    ].join("\n")
    const next = docs.includes(begin)
      ? `${docs.slice(0, docs.indexOf(begin))}${section}${docs.slice(docs.indexOf(end) + end.length)}`
      : `${docs.trimEnd()}\n\n${section}\n`
    await writeFile(file, next)
    process.stdout.write(`wrote ${file}\n`)
  }
} finally {
  await Promise.all(servers.map(stop))
  if (!keep) await rm(dir, { recursive: true, force: true })
}
