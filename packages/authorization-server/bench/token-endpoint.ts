/**
 * The authorization server's token endpoint beside panva's oidc-provider 9.13.3 on its built-in memory adapter:
 * refresh-token rotation and warm re-authorization (GET of the authorization endpoint with a signed-in session and a
 * remembered consent, its redirect's code redeemed), each server in a process of its own (bench/server.ts), the load
 * from another (bench/load.ts) over loopback, the same connections for all. Rounds are interleaved (every server once
 * per round, in a rotated order), and each figure is the median of the rounds. Not a test. Run after building
 * (`npm run build`, or `npx tsc -b tsconfig.json` in this package):
 *
 *     node packages/authorization-server/bench/token-endpoint.ts [--write] [--rounds=3] [--seconds=8]
 *       [--connections=16] [--only=sqlite,sqlite-each,memory,postgres,app,oidc-provider,previous-sqlite,previous-memory]
 *       [--scenarios=refresh,reauth] [--generator=fetch|autocannon]
 *       [--previous=<dir>/index.js]
 *
 * PostgreSQL is a throw-away cluster started from the machine's binaries (`startPostgres` of @keyway/testing; the
 * `postgresql` Debian package must be installed, as `npm test` does). `--write` replaces this script's section of
 * docs/benchmarks.md (between its markers) with the figures, the machine and the command. `--previous` adds two rows
 * (SQLite file and memory) for another build of this package, interleaved with the others in every round: the
 * `dist/index.js` of a worktree of an earlier commit, built, so that its imports resolve in its own tree.
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { Pkce } from "@keyway/core"
import { startPostgres } from "@keyway/testing"
import pg from "pg"
import type { LoadResult } from "./requests.ts"
import type { Endpoints, Settings } from "./server.ts"

const here = dirname(fileURLToPath(import.meta.url))
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const ROUNDS = Number(arg("rounds") ?? 3)
const SECONDS = Number(arg("seconds") ?? 8)
const CONNECTIONS = Number(arg("connections") ?? 16)
const WARMUP_SECONDS = 2
const CLIENT = "bench"
// Not a loopback address: a public client redirecting to loopback is asked for consent every time (RFC 8252 §8.6).
const REDIRECT = "https://app.example.com/callback"
const RESOURCE = "https://mcp.example.com/mcp"
const SCOPE = "read"
// The bench's user's password: the runnable app checks it; the library's bench authenticator accepts anyone.
const PASSWORD = "the bench user's password"
// The load generator: Node's fetch in a process of its own (bench/load.ts), or autocannon (bench/load-autocannon.ts).
const GENERATOR = arg("generator") ?? "fetch"
if (GENERATOR !== "fetch" && GENERATOR !== "autocannon") throw new Error("--generator is fetch or autocannon")

const loadAtStart = loadavg()
const pkce = await Pkce.generate()

interface Target {
  readonly id: string
  readonly label: string
  readonly settings: Settings
}

const dir = mkdtempSync(join(tmpdir(), "keyway-bench-"))
const common = { clientId: CLIENT, redirectUri: REDIRECT, resource: RESOURCE, scope: SCOPE }
const all: Array<Target> = [
  {
    id: "sqlite",
    label: "Keyway, SQLite file (default: group commit)",
    settings: {
      target: "keyway",
      storage: { type: "sqlite", path: join(dir, "group.db"), groupCommit: true },
      ...common,
    },
  },
  {
    id: "sqlite-each",
    label: "Keyway, SQLite file, one commit per change (`groupCommit: false`: as before group commit)",
    settings: {
      target: "keyway",
      storage: { type: "sqlite", path: join(dir, "each.db"), groupCommit: false },
      ...common,
    },
  },
  {
    id: "memory",
    label: "Keyway, memory (SQLite `:memory:`)",
    settings: { target: "keyway", storage: { type: "memory" }, ...common },
  },
  { id: "postgres", label: "Keyway, PostgreSQL", settings: { target: "keyway", ...common } },
  {
    id: "app",
    label: "Keyway's runnable app (apps/authorization-server: SQLite file in its data directory, group commit)",
    settings: {
      target: "app",
      storage: { type: "app", dataDir: join(dir, "app"), password: PASSWORD },
      ...common,
    },
  },
  {
    id: "oidc-provider",
    label: "oidc-provider 9.13.3, memory adapter",
    settings: { target: "oidc-provider", ...common },
  },
]
const previousArg = arg("previous")
const previous = previousArg === undefined ? undefined : resolve(previousArg)
if (previous !== undefined) {
  all.push(
    {
      id: "previous-sqlite",
      label: "previous build, SQLite file (default: group commit)",
      settings: {
        target: "keyway",
        storage: { type: "sqlite", path: join(dir, "previous.db"), groupCommit: true },
        module: previous,
        ...common,
      },
    },
    {
      id: "previous-memory",
      label: "previous build, memory (SQLite `:memory:`)",
      settings: { target: "keyway", storage: { type: "memory" }, module: previous, ...common },
    },
  )
}
const only = arg("only")?.split(",")
const targets = all.filter((t) => only === undefined || only.includes(t.id))

// --- PostgreSQL ------------------------------------------------------------------------------------------------------

let postgres: Awaited<ReturnType<typeof startPostgres>> | undefined
let postgresVersion = ""
const postgresTarget = targets.find((t) => t.id === "postgres")
if (postgresTarget !== undefined) {
  postgres = await startPostgres()
  const url = postgres.createDatabase("keyway_bench")
  const pool = new pg.Pool({ connectionString: url, max: 1 })
  postgresVersion = String((await pool.query("SHOW server_version")).rows[0]?.server_version ?? "")
  await pool.end()
  Object.assign(postgresTarget, {
    settings: { ...postgresTarget.settings, storage: { type: "postgres", connectionString: url } },
  })
}

// --- Servers ---------------------------------------------------------------------------------------------------------

interface Running {
  readonly target: Target
  readonly endpoints: Endpoints
  readonly stop: () => Promise<void>
  cookie: string
}

const start = (target: Target): Promise<Running> =>
  new Promise((resolve, reject) => {
    // KEYWAY_BENCH_NODE_OPTIONS: extra flags for the servers' node (a profile: `--cpu-prof --cpu-prof-dir=...`).
    const flags = process.env.KEYWAY_BENCH_NODE_OPTIONS?.split(" ").filter((f) => f !== "") ?? []
    const child = spawn(process.execPath, [...flags, join(here, "server.ts"), JSON.stringify(target.settings)], {
      stdio: ["ignore", "pipe", "inherit"],
    })
    child.on("error", reject)
    child.on("exit", (code) => reject(new Error(`${target.id} exited (${code}) before it listened`)))
    createInterface({ input: child.stdout }).once("line", (line) => {
      const endpoints = JSON.parse(line) as Endpoints
      const exited = new Promise<void>((done) => child.once("exit", () => done()))
      resolve({
        target,
        endpoints,
        stop: () => {
          child.kill()
          return exited
        },
        cookie: "",
      })
    })
  })

// --- Sign-in and consent, once per server ----------------------------------------------------------------------------

const authorizationQuery = () =>
  new URLSearchParams({
    response_type: "code",
    client_id: CLIENT,
    redirect_uri: REDIRECT,
    scope: SCOPE,
    state: "setup",
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
  }).toString()

class Jar {
  private readonly cookies = new Map<string, string>()
  take(response: Response) {
    for (const header of response.headers.getSetCookie()) {
      const [pair = ""] = header.split(";")
      const eq = pair.indexOf("=")
      this.cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim())
    }
    return response
  }
  get header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ")
  }
}

const unescapeHtml = (s: string) =>
  s.replace(/&(amp|lt|gt|quot|#39|#x27);/g, (_, e: string) =>
    e === "amp" ? "&" : e === "lt" ? "<" : e === "gt" ? ">" : e === "quot" ? '"' : "'",
  )
const field = (page: string, name: string) => {
  const found = new RegExp(`name="${name}" value="([^"]*)"`).exec(page)?.[1]
  if (found === undefined) throw new Error(`the page has no ${name} field`)
  return unescapeHtml(found)
}

/** Signs the bench's user in and grants the consent, through each server's own pages; the session's cookie. */
const signIn = async (running: Running): Promise<string> => {
  const jar = new Jar()
  const get = (url: string) =>
    fetch(url, { headers: { cookie: jar.header }, redirect: "manual" }).then((r) => jar.take(r))
  const form = (url: string, body: Record<string, string>) =>
    fetch(url, {
      method: "POST",
      headers: { cookie: jar.header, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(body).toString(),
      redirect: "manual",
    }).then((r) => jar.take(r))
  const { authorization } = running.endpoints
  let response = await get(`${authorization}?${authorizationQuery()}`)
  if (running.endpoints.flavour === "keyway") {
    const login = await response.text()
    response = await form(`${authorization}/login`, {
      csrf_token: field(login, "csrf_token"),
      request: field(login, "request"),
      username: "bench-user",
      password: PASSWORD,
    })
    await response.arrayBuffer()
    response = await get(`${authorization}?${authorizationQuery()}`)
    // The consent page, unless the consent is remembered from an earlier sign-in.
    if (response.status === 200) {
      const consent = await response.text()
      response = await form(`${authorization}/consent`, {
        csrf_token: field(consent, "csrf_token"),
        request: field(consent, "request"),
        decision: "approve",
      })
    }
  } else {
    // The interaction (answered by bench/server.ts: sign-in and grant), then the resumed authorization request.
    for (let hops = 0; hops < 4 && !(response.headers.get("location") ?? "").startsWith(REDIRECT); hops++) {
      await response.arrayBuffer()
      response = await get(new URL(response.headers.get("location") ?? "", authorization).toString())
    }
  }
  await response.arrayBuffer()
  const location = response.headers.get("location") ?? ""
  if (!location.startsWith(REDIRECT) || new URL(location).searchParams.get("code") === null) {
    throw new Error(`${running.target.id}: sign-in ended with ${response.status} ${location}`)
  }
  return jar.header
}

// --- Load ------------------------------------------------------------------------------------------------------------

type Kind = "refresh" | "reauth"
const KINDS = (arg("scenarios")?.split(",") ?? ["refresh", "reauth"]) as ReadonlyArray<Kind>

/**
 * One load run. The user signs in again first: oidc-provider's memory adapter keeps 1000 entries, so the tokens of a
 * run push the session and the grant of the last sign-in out of it (Keyway gets the same steps, for the same work).
 */
const load = async (running: Running, kind: Kind, seconds: number): Promise<LoadResult> => {
  running.cookie = await signIn(running)
  return new Promise((resolve, reject) => {
    const scenario = {
      kind,
      ...running.endpoints,
      cookie: running.cookie,
      clientId: CLIENT,
      redirectUri: REDIRECT,
      resource: RESOURCE,
      scope: SCOPE,
      verifier: pkce.verifier,
      challenge: pkce.challenge,
      concurrency: CONNECTIONS,
      durationMs: seconds * 1000,
    }
    const generator = GENERATOR === "autocannon" ? "load-autocannon.ts" : "load.ts"
    const child = spawn(process.execPath, [join(here, generator)], { stdio: ["pipe", "pipe", "inherit"] })
    child.stdin.end(JSON.stringify(scenario))
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
    })
    child.on("error", reject)
    child.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`load exited ${code}`))
      const result = JSON.parse(out) as LoadResult
      if (result.failed > 0) {
        process.stderr.write(`${running.target.id} ${kind}: ${result.failed} failed, first: ${result.firstFailure}\n`)
      }
      resolve(result)
    })
  })
}

// --- The run ---------------------------------------------------------------------------------------------------------

const results = new Map<string, Array<LoadResult>>()
const servers: Array<Running> = []
try {
  for (const target of targets) servers.push(await start(target))
  // Warm-up: JIT, page cache, key import, pool connections.
  for (const running of servers) {
    for (const kind of KINDS) await load(running, kind, WARMUP_SECONDS)
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = servers.map((_, i) => servers[(i + round) % servers.length]!)
    for (const running of order) {
      for (const kind of KINDS) {
        const result = await load(running, kind, SECONDS)
        const key = `${running.target.id}/${kind}`
        results.set(key, [...(results.get(key) ?? []), result])
        process.stderr.write(
          `round ${round + 1} ${key}: ${rate(result).toFixed(0)}/s, ${cpuPerOp(result).toFixed(0)} µs/op ` +
            `(main thread ${(result.threadMicros / result.ok).toFixed(0)}), ` +
            `load ${loadavg()[0]?.toFixed(2)}\n`,
        )
      }
    }
  }
} finally {
  await Promise.all(servers.map((running) => running.stop()))
  postgres?.stop()
  rmSync(dir, { recursive: true, force: true })
}
const loadAtEnd = loadavg()

function rate(r: LoadResult) {
  return (r.ok / r.elapsedMs) * 1000
}
function cpuPerOp(r: LoadResult) {
  return r.ok === 0 ? Number.NaN : r.cpuMicros / r.ok
}
const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}
interface Figures {
  readonly rate: number
  readonly cpu: number
  readonly p50: number
  readonly p99: number
  readonly failed: number
}
const figures = (id: string, kind: Kind): Figures | undefined => {
  const rs = results.get(`${id}/${kind}`)
  if (rs === undefined) return undefined
  return {
    rate: median(rs.map(rate)),
    cpu: median(rs.map(cpuPerOp)),
    p50: median(rs.map((r) => r.p50)),
    p99: median(rs.map((r) => r.p99)),
    failed: rs.reduce((n, r) => n + r.failed, 0),
  }
}

// --- Report ----------------------------------------------------------------------------------------------------------

const cpuModel =
  readFileSync("/proc/cpuinfo", "utf8")
    .split("\n")
    .find((l) => l.startsWith("model name"))
    ?.split(":")[1]
    ?.trim() ??
  cpus()[0]?.model ??
  "unknown"
const nproc = execFileSync("nproc").toString().trim()
const load3 = (l: ReadonlyArray<number>) => l.map((v) => v.toFixed(2)).join(" / ")
const command = `node packages/authorization-server/bench/token-endpoint.ts --write${
  process.argv.slice(2).filter((a) => a !== "--write").length === 0
    ? ""
    : ` ${process.argv
        .slice(2)
        .filter((a) => a !== "--write")
        .join(" ")}`
}`

const table = (kind: Kind, unit: string) => {
  const anchor = figures("oidc-provider", kind)
  const rows = targets.map((t) => {
    const f = figures(t.id, kind)
    if (f === undefined) return ""
    const ratio = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "n/a" : `${x.toFixed(2)}x`)
    return `| ${t.label} | ${f.rate.toFixed(0)} | ${f.cpu.toFixed(0)} | ${ratio(anchor === undefined ? undefined : f.rate / anchor.rate)} | ${ratio(anchor === undefined ? undefined : anchor.cpu / f.cpu)} | ${f.p50.toFixed(1)} | ${f.p99.toFixed(1)} | ${f.failed} |`
  })
  return `| Server | ${unit}/s | server CPU µs per ${unit} | throughput vs oidc-provider | CPU vs oidc-provider (its µs / these) | p50 ms | p99 ms | failed |
|---|---|---|---|---|---|---|---|
${rows.filter((r) => r !== "").join("\n")}`
}

// How the SQLite rows keep their file, in the first section only.
const DURABILITY = `How the SQLite file is kept (\`journal_mode = WAL\` in both Keyway SQLite rows). The default, group commit: the
changes asked for in one turn of the event loop run together at its end in one \`BEGIN IMMEDIATE\` transaction, each in
its own savepoint (one that fails rolls back alone), then one \`COMMIT\`; the store's connection runs at
\`synchronous = NORMAL\` and Keyway flushes the WAL file itself (\`fdatasync\`, on libuv's thread pool, so the event loop
goes on serving) before it answers any change of the group, or any read made while such a flush is under way (reads
run between groups on the same connection, so they see committed data only). What is
answered is on disk, as with \`synchronous = FULL\`; a crash or power loss can only take back a group nobody was
answered for. One difference with \`FULL\`: another process sharing the file can read a group between its commit and
its flush. \`groupCommit: false\` (the "one commit per change" row, the behaviour before group commit) commits every
change on its own at \`synchronous = FULL\`, SQLite flushing the WAL inside each \`COMMIT\` on the event loop. What the
other settings would risk: \`synchronous = NORMAL\` without that flush of Keyway's loses nothing when the process
crashes but, on a power loss or an operating-system crash, the last commits, answered ones among them (a redeemed code
redeemable again, a rotated refresh token live again beside its successor); \`synchronous = OFF\` hands even the
ordering of writes to the operating system, so a power loss may also corrupt the file; \`journal_mode = DELETE\` or
\`TRUNCATE\` (a rollback journal) keeps the durability of \`FULL\` for more flushes per commit (journal, then database
file) and lets no reader run beside a writer; \`journal_mode = MEMORY\` or \`OFF\` may leave a corrupt file after any
crash in the middle of a transaction. Earlier figures of this endpoint (codes written beforehand and redeemed, three
transactions per request, then one) are in this file's history.
`

const date = new Date().toISOString().slice(0, 10)
const output = `
${GENERATOR === "autocannon" ? "### The same with autocannon as the load generator" : "## @keyway/authorization-server: token endpoint beside oidc-provider"}

\`${command}\` (${date}, after \`npm run build\`). Each server runs in a process of its own (node:http; Keyway through
its Web handler; the runnable app as it starts itself), the load comes from another Node process over loopback with
${CONNECTIONS} concurrent connections (the same load generator for every server: ${
  GENERATOR === "autocannon" ? "autocannon 9, bench/load-autocannon.ts" : "Node's fetch, bench/load.ts"
}), ${ROUNDS} interleaved rounds of ${SECONDS} s per server and scenario after a
${WARMUP_SECONDS} s warm-up, and every figure is the median of the rounds. Server CPU is the server process's
\`process.cpuUsage()\` (user + system) over the measured window divided by the operations completed in it; for PostgreSQL
the database server's own CPU is not in it.

Both servers have one public client (PKCE S256 required, the refresh token rotated on every use), one resource
(RFC 8707, \`${RESOURCE}\`, scope \`${SCOPE}\`) and ES256-signed JWT access tokens for it (RFC 9068), refresh tokens that
do not end with the browser session, and the bench's user signed in and the consent granted through each server's own
steps before every run (not measured; oidc-provider's memory adapter keeps 1000 entries, so the tokens of one run push
the session of the sign-in before out of it). oidc-provider 9.13.3 runs with its built-in memory adapter (nothing
written anywhere). Keyway's per-client token-request limit and per-family refresh limit are off (one client sends every
request, each connection refreshes one family). The PostgreSQL cluster is started by the script on this machine (PostgreSQL ${postgresVersion || "n/a"},
loopback TCP, \`fsync=off\` as in the test cluster, so its figures leave out disk flushes).

### Refresh-token rotation (one token request per operation)

${table("refresh", "request")}

### Warm re-authorization (GET /authorize answered 302 with a code, then the code redeemed: two requests per operation)

${table("reauth", "operation")}

Machine: ${nproc} CPUs (nproc), ${cpuModel}, Node ${process.version}, ${process.platform}/${process.arch}; load average
(1 / 5 / 15 min) ${load3(loadAtStart)} at the start and ${load3(loadAtEnd)} at the end. The machine may be shared with
other work: throughput moves with it, the CPU per operation and the ratios within one run much less.

${GENERATOR === "autocannon" ? "" : DURABILITY}`
process.stdout.write(output)
if (process.argv.includes("--write")) {
  const file = join(here, "..", "..", "..", "docs", "benchmarks.md")
  const current = readFileSync(file, "utf8")
  // Each load generator's figures have a section of their own.
  const section = GENERATOR === "autocannon" ? "authorization-server:autocannon" : "authorization-server"
  const open = `<!-- ${section}:start -->`
  const close = `<!-- ${section}:end -->`
  const start = current.indexOf(open)
  const end = current.indexOf(close, start)
  if (start < 0 || end < 0) throw new Error(`docs/benchmarks.md has no ${open} ... ${close} section`)
  writeFileSync(file, `${current.slice(0, start)}${open}${output}${current.slice(end)}`)
}
