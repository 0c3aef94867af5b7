/**
 * Token endpoint throughput on SQLite and on PostgreSQL: authorization-code redemption and refresh-token rotation,
 * with the load from a separate process over loopback. Not a test. Run after building (`tsc -b tsconfig.json`):
 *
 *     node bench/token-endpoint.ts [--write] [--only=sqlite|postgres]
 *
 * PostgreSQL is a throw-away cluster started from the machine's binaries (`startPostgres` of @keyway/testing; the
 * `postgresql` Debian package must be installed, as `npm test` does). `--write` puts the figures and the machine in docs/benchmarks.md
 * (replacing this script's earlier sections).
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Pkce } from "@keyway/core"
import { startPostgres } from "@keyway/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import pg from "pg"
import { AuthorizationServer, NodeServer, Storage, UserAuthenticator } from "../dist/index.js"

const here = dirname(fileURLToPath(import.meta.url))
const RESOURCE = "https://mcp.example.com/mcp"
const REDIRECT = "http://127.0.0.1/callback"
const CODES = 3000
const CONCURRENCY = 16
const REFRESH_MS = 10_000

const loadBefore = loadavg()[0] ?? 0
const only = process.argv.find((a) => a.startsWith("--only="))?.slice("--only=".length)
const pkce = await Pkce.generate()

interface LoadResult {
  readonly ok: number
  readonly failed: number
  readonly elapsedMs: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

interface Measured {
  readonly redeem: LoadResult
  readonly refresh: LoadResult
  readonly load: number
}

/** Starts one server over `storage`, runs the warm-up and both scenarios, and stops it. */
const measure = async (storage: Layer.Layer<Storage.Stores, Storage.StorageError>): Promise<Measured> => {
  const load = loadavg()[0] ?? 0
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const running = await NodeServer.listen((request) => handler(request))
  const runtime = ManagedRuntime.make(
    AuthorizationServer.AuthorizationServer.layer({
      issuer: running.url,
      development: { allowHttpLoopbackIssuer: true },
      warn: () => undefined,
      resources: [{ uri: RESOURCE, scopes: { read: "Read" } }],
      clients: [{ clientId: "bench", redirectUris: [REDIRECT] }],
      // One client sends every request here, far over the per-client limit a real client would meet.
      rateLimits: { token: false },
    }).pipe(Layer.provideMerge(Layer.merge(storage, UserAuthenticator.UserAuthenticator.layerUsers([])))),
  )
  handler = (request) => runtime.runPromise(AuthorizationServer.AuthorizationServer.use((s) => s.handle(request)))

  /** Codes written straight to the store, as the consent page would (the bench measures the token endpoint only). */
  const makeCodes = (n: number) =>
    runtime.runPromise(
      Effect.gen(function* () {
        const grants = yield* Storage.GrantStore
        const now = Math.floor(Date.now() / 1000)
        const codes: Array<string> = []
        for (let i = 0; i < n; i++) {
          const code = `bench-code-${i}-${crypto.randomUUID()}`
          yield* grants.createCode({
            code,
            client_id: "bench",
            redirect_uri: REDIRECT,
            code_challenge: pkce.challenge,
            code_challenge_method: "S256",
            resource: RESOURCE,
            scope: "read",
            subject: "bench-user",
            auth_time: now,
            issued_at: now,
            expires_at: now + 60,
          })
          codes.push(code)
        }
        return codes
      }),
    )

  const run = (kind: "redeem" | "refresh", codes: ReadonlyArray<string>): Promise<LoadResult> =>
    new Promise((resolve, reject) => {
      const scenario = {
        kind,
        tokenEndpoint: `${running.url}/token`,
        clientId: "bench",
        redirectUri: REDIRECT,
        resource: RESOURCE,
        verifier: pkce.verifier,
        codes,
        concurrency: CONCURRENCY,
        durationMs: REFRESH_MS,
      }
      const child = spawn(process.execPath, [join(here, "load.ts")], { stdio: ["pipe", "pipe", "inherit"] })
      child.stdin.end(JSON.stringify(scenario))
      let out = ""
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString("utf8")
      })
      child.on("error", reject)
      child.on("exit", (code) =>
        code === 0 ? resolve(JSON.parse(out) as LoadResult) : reject(new Error(`load exited ${code}`)),
      )
    })

  try {
    // Warm-up: JIT, page cache, key import, pool connections.
    await run("redeem", await makeCodes(200))
    const redeem = await run("redeem", await makeCodes(CODES))
    const refresh = await run("refresh", await makeCodes(CONCURRENCY))
    return { redeem, refresh, load }
  } finally {
    await running.close()
    await runtime.dispose()
  }
}

let sqlite: Measured | undefined
if (only === undefined || only === "sqlite") {
  const dir = mkdtempSync(join(tmpdir(), "keyway-bench-"))
  try {
    sqlite = await measure(Storage.layerSqlite({ path: join(dir, "bench.db") }))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
let postgres: Measured | undefined
let postgresVersion = ""
if (only === undefined || only === "postgres") {
  const server = await startPostgres()
  try {
    const url = server.createDatabase("keyway_bench")
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    postgresVersion = String((await pool.query("SHOW server_version")).rows[0]?.server_version ?? "")
    await pool.end()
    postgres = await measure(Storage.layerPostgres({ connectionString: url }))
  } finally {
    server.stop()
  }
}

const rate = (r: LoadResult) => ((r.ok / r.elapsedMs) * 1000).toFixed(0)
const ms = (v: number) => v.toFixed(1)
const cpuModel =
  readFileSync("/proc/cpuinfo", "utf8")
    .split("\n")
    .find((l) => l.startsWith("model name"))
    ?.split(":")[1]
    ?.trim() ??
  cpus()[0]?.model ??
  "unknown"
const nproc = execFileSync("nproc").toString().trim()

const table = (
  m: Measured,
) => `| Scenario | Requests OK | Failed | Throughput (req/s) | p50 (ms) | p99 (ms) | max (ms) |
|---|---|---|---|---|---|---|
| authorization_code redemption (${CODES} codes) | ${m.redeem.ok} | ${m.redeem.failed} | ${rate(m.redeem)} | ${ms(m.redeem.p50)} | ${ms(m.redeem.p99)} | ${ms(m.redeem.max)} |
| refresh_token rotation (${CONCURRENCY} families, ${REFRESH_MS / 1000} s) | ${m.refresh.ok} | ${m.refresh.failed} | ${rate(m.refresh)} | ${ms(m.refresh.p50)} | ${ms(m.refresh.p99)} | ${ms(m.refresh.max)} |`

const date = new Date().toISOString().slice(0, 10)
const machine = `Machine: ${nproc} CPUs (nproc), ${cpuModel}, Node ${process.version}, ${process.platform}/${process.arch}. The
machine is shared with other work (1-minute load average ${loadBefore.toFixed(2)} when the run started), so treat the
figures as a floor.`

const sections: Array<string> = []
if (sqlite !== undefined) {
  sections.push(`
## @keyway/authorization-server: token endpoint on SQLite

\`node packages/authorization-server/bench/token-endpoint.ts\` (${date}). One server process
(node:http + the Web handler, SQLite file in WAL mode, ES256 access tokens); load from a separate Node process over
loopback with ${CONCURRENCY} concurrent connections. Every successful request runs two or three SQLite write
transactions (code consumed or refresh token rotated, access-token id recorded, refresh family opened) and signs one
ES256 JWT. Codes are written to the store beforehand (the login and consent pages are not measured).

${table(sqlite)}

${machine} Load average when this backend started: ${sqlite.load.toFixed(2)}.
`)
}
if (postgres !== undefined) {
  sections.push(`
## @keyway/authorization-server: token endpoint on PostgreSQL

Same script and scenarios (${date}), with \`Storage.layerPostgres\` (node-postgres pool of 10) on a local PostgreSQL
${postgresVersion} cluster started by the script on the same machine (loopback TCP, \`fsync=off\` as in the test
cluster, so the figures leave out disk flushes). Each successful request runs the same two or three transactions, the
check-then-write ones with \`SELECT ... FOR UPDATE\`. The database server shares the two CPUs with the server and the
load generator.

${table(postgres)}

${machine} Load average when this backend started: ${postgres.load.toFixed(2)}.
`)
}
const output = sections.join("")
process.stdout.write(output)
if (process.argv.includes("--write")) {
  // This script owns the text between its markers (or, in an older file, from its first heading to the next section).
  const file = join(here, "..", "..", "..", "docs", "benchmarks.md")
  const current = readFileSync(file, "utf8")
  const open = "<!-- authorization-server:start -->"
  const close = "<!-- authorization-server:end -->"
  const block = `${open}${output}${close}`
  let start = current.indexOf(open)
  let end = start < 0 ? -1 : current.indexOf(close, start) + close.length
  if (start < 0) {
    start = current.indexOf("\n## @keyway/authorization-server: token endpoint")
    if (start >= 0) {
      start += 1
      const after = [current.indexOf("\n## ", start + 3), current.indexOf("\n<!--", start)].filter((i) => i >= 0)
      end = after.length === 0 ? current.length : Math.min(...after) + 1
    }
  }
  writeFileSync(
    file,
    start < 0
      ? `${current.trimEnd()}\n\n${block}\n`
      : `${current.slice(0, start)}${block}\n\n${current.slice(end).replace(/^\n+/, "")}`,
  )
}
