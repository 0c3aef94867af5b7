/**
 * Where the CPU time of a token request goes: runs bench/token-endpoint.ts once per server and scenario with V8's CPU
 * profiler on the server process (`--cpu-prof`), and splits the profile's busy time on the server's JavaScript thread
 * by component (self time of each sampled frame, start-up and idle left out). Not a test. After building:
 *
 *     node packages/authorization-server/bench/profile.ts [--write] [--seconds=10] [--only=sqlite,oidc-provider]
 *
 * `--write` replaces this script's section of docs/benchmarks.md (between its markers). The profiler slows the
 * server down (so no throughput here: the bench without it gives that); the shares are what it is for.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const SECONDS = Number(arg("seconds") ?? 10)
const TARGETS = arg("only")?.split(",") ?? ["sqlite", "oidc-provider"]
const KINDS = ["refresh", "reauth"] as const
const LABELS: Readonly<Record<string, string>> = {
  sqlite: "Keyway, SQLite file",
  memory: "Keyway, memory",
  postgres: "Keyway, PostgreSQL",
  "oidc-provider": "oidc-provider 9.13.3",
}

interface Frame {
  readonly functionName: string
  readonly url: string
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: Frame
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** The components of a token request, in the order of the table. */
const COMPONENTS = [
  "HTTP: node:http (parsing, socket writes)",
  "HTTP framework: Keyway's bridge and Web Request/Response; oidc-provider's Koa",
  "form parsing",
  "client authentication",
  "endpoint and grant logic (Keyway's token endpoint, authorization endpoint, grants; oidc-provider's own code)",
  "Effect runtime",
  "store: statements and transactions (node:sqlite, pg; oidc-provider's memory adapter)",
  "store: the store's JavaScript (rows, SQL, hashing of secrets)",
  "WAL flush (fdatasync; the flush itself runs on libuv's pool)",
  "JWT signing (node:crypto key objects; Web Crypto jobs for oidc-provider)",
  "hashing and random values (node:crypto)",
  "JSON (parse, stringify)",
  "garbage collection",
  "other (microtasks, timers, Node internals)",
] as const
type Component = (typeof COMPONENTS)[number] | "start-up" | "idle"

const component = ({ functionName: f, url: u }: Frame): Component => {
  if (f === "(idle)") return "idle"
  if (f === "(garbage collector)") return "garbage collection"
  if (
    u.startsWith("node:internal/modules") ||
    u.includes("node:internal/deps/amaro") ||
    u.includes("/bootstrap/") ||
    f === "internalModuleStat" ||
    f === "compileSourceTextModule" ||
    f === "Module"
  )
    return "start-up"
  if (f === "fdatasync") return "WAL flush (fdatasync; the flush itself runs on libuv's pool)"
  if (u === "" && (f === "parse" || f === "stringify")) return "JSON (parse, stringify)"
  if (u.includes("/effect/dist/")) return "Effect runtime"
  if (
    u.includes("/jose/") ||
    f === "jobPromise" ||
    /^node:internal\/crypto\/(sig|keys|ec|webcrypto|util|cfrg|rsa)/.test(u) ||
    u.endsWith("authorization-server/dist/Signing.js")
  )
    return "JWT signing (node:crypto key objects; Web Crypto jobs for oidc-provider)"
  if (/^node:internal\/crypto\/(hash|random|keygen)/.test(u) || u === "node:crypto")
    return "hashing and random values (node:crypto)"
  if (u.includes("authorization-server/dist/storage/internal/sqlite.js") || u.includes("/storage/internal/postgres.js"))
    return "store: statements and transactions (node:sqlite, pg; oidc-provider's memory adapter)"
  if (
    u.includes("/pg/") ||
    u.includes("/pg-protocol/") ||
    u.includes("/adapters/memory_adapter.js") ||
    u.includes("/quick-lru/")
  )
    return "store: statements and transactions (node:sqlite, pg; oidc-provider's memory adapter)"
  if (u.includes("authorization-server/dist/storage/"))
    return "store: the store's JavaScript (rows, SQL, hashing of secrets)"
  if (
    u.includes("authorization-server/dist/internal/clientAuth.js") ||
    u.includes("authorization-server/dist/internal/clients.js") ||
    u.includes("authorization-server/dist/internal/limits.js") ||
    u.includes("/oidc-provider/lib/shared/client_auth.js")
  )
    return "client authentication"
  if (
    u.includes("authorization-server/dist/internal/http.js") ||
    u.includes("authorization-server/dist/internal/formEndpoint.js") ||
    u === "node:querystring" ||
    u.includes("/oidc-provider/lib/shared/selective_body.js") ||
    u.includes("/raw-body/")
  )
    return "form parsing"
  if (
    u.includes("/packages/http/dist/") ||
    u.includes("internal/deps/undici") ||
    u.includes("internal/webstreams") ||
    u.includes("node:internal/url") ||
    u.includes("/koa") ||
    u.includes("/@koa/") ||
    u.includes("/delegates/") ||
    u.includes("/on-finished/") ||
    u.includes("/type-is/") ||
    u.includes("/statuses/") ||
    u.includes("/http-errors/")
  )
    return "HTTP framework: Keyway's bridge and Web Request/Response; oidc-provider's Koa"
  if (
    u.startsWith("node:_http") ||
    u === "node:http" ||
    u.startsWith("node:internal/http") ||
    u === "node:net" ||
    u.includes("node:internal/streams") ||
    u === "node:stream" ||
    f === "writeLatin1String" ||
    f === "writeUtf8String" ||
    f === "writev" ||
    f === "writeBuffer"
  )
    return "HTTP: node:http (parsing, socket writes)"
  if (u.includes("authorization-server/dist/") || u.includes("/packages/core/dist/") || u.includes("/oidc-provider/"))
    return "endpoint and grant logic (Keyway's token endpoint, authorization endpoint, grants; oidc-provider's own code)"
  return "other (microtasks, timers, Node internals)"
}

const summarize = (file: string): Map<Component, number> => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const totals = new Map<Component, number>()
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]!)
    if (node === undefined) continue
    const c = component(node.callFrame)
    totals.set(c, (totals.get(c) ?? 0) + (profile.timeDeltas[i] ?? 0))
  }
  return totals
}

const dir = mkdtempSync(join(tmpdir(), "keyway-profile-"))
const shares = new Map<string, Map<Component, number>>()
try {
  for (const target of TARGETS) {
    for (const kind of KINDS) {
      const out = join(dir, `${target}-${kind}`)
      const run = spawnSync(
        process.execPath,
        [
          join(here, "token-endpoint.ts"),
          `--only=${target}`,
          `--scenarios=${kind}`,
          "--rounds=1",
          `--seconds=${SECONDS}`,
        ],
        {
          env: { ...process.env, KEYWAY_BENCH_NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${out}` },
          stdio: ["ignore", "ignore", "inherit"],
        },
      )
      if (run.status !== 0) throw new Error(`the bench for ${target} ${kind} exited ${run.status}`)
      const files = readdirSync(out).filter((f) => f.endsWith(".cpuprofile"))
      if (files.length !== 1)
        throw new Error(`expected one profile of the server for ${target} ${kind}, got ${files.length}`)
      shares.set(`${target}/${kind}`, summarize(join(out, files[0]!)))
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}

const cpuModel =
  readFileSync("/proc/cpuinfo", "utf8")
    .split("\n")
    .find((l) => l.startsWith("model name"))
    ?.split(":")[1]
    ?.trim() ?? "unknown"
const nproc = execFileSync("nproc").toString().trim()
const columns = TARGETS.flatMap((t) => KINDS.map((k) => `${t}/${k}`))
const busy = (key: string) =>
  [...(shares.get(key) ?? new Map<Component, number>())].reduce(
    (n, [c, t]) => (c === "idle" || c === "start-up" ? n : n + t),
    0,
  )
const cell = (key: string, c: Component) => {
  const total = busy(key)
  const t = shares.get(key)?.get(c) ?? 0
  return total === 0 ? "n/a" : `${((100 * t) / total).toFixed(1)}%`
}
const heading = columns.map((k) => {
  const [t, kind] = k.split("/")
  return `${LABELS[t!] ?? t}, ${kind === "refresh" ? "refresh" : "warm re-authorization"}`
})
const table = `| Component (share of the busy time of the server's JavaScript thread) | ${heading.join(" | ")} |
|---|${columns.map(() => "---:").join("|")}|
${COMPONENTS.map((c) => `| ${c} | ${columns.map((k) => cell(k, c)).join(" | ")} |`).join("\n")}`

const date = new Date().toISOString().slice(0, 10)
const output = `
### Where the time goes: CPU profiles by component

\`node packages/authorization-server/bench/profile.ts --write${arg("seconds") === undefined ? "" : ` --seconds=${SECONDS}`}\` (${date}, after \`npm run build\`): the
bench above, one server and one scenario at a time (1 round of ${SECONDS} s after the warm-up), with V8's sampling profiler
on the server process; each column is that profile's self time on the server's JavaScript thread, by the component of
the sampled frame, as a share of the busy time (start-up and idle left out). The profile sees only the JavaScript thread:
what runs on libuv's pool (the WAL flush, Web Crypto jobs) and V8's helper threads is in the process CPU of the bench's
tables, not here.

${table}

Machine: ${nproc} CPUs (nproc), ${cpuModel}, Node ${process.version}; load average (1 / 5 / 15 min) at the end
${loadavg()
  .map((v) => v.toFixed(2))
  .join(" / ")}.
`
process.stdout.write(output)
if (process.argv.includes("--write")) {
  const file = join(here, "..", "..", "..", "docs", "benchmarks.md")
  const current = readFileSync(file, "utf8")
  const open = "<!-- authorization-server:profile:start -->"
  const close = "<!-- authorization-server:profile:end -->"
  const start = current.indexOf(open)
  const end = current.indexOf(close, start)
  if (start < 0 || end < 0) throw new Error(`docs/benchmarks.md has no ${open} ... ${close} section`)
  writeFileSync(file, `${current.slice(0, start)}${open}${output}${current.slice(end)}`)
}
