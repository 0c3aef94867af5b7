/**
 * Token endpoint throughput on SQLite: authorization-code redemption and refresh-token rotation, with the load from a
 * separate process over loopback. Not a test. Run after building (`tsc -b tsconfig.json`):
 *
 *     node bench/token-endpoint.ts [--write]
 *
 * `--write` puts the figures and the machine in docs/benchmarks.md (replacing this script's earlier section).
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Pkce } from "@keyway/core"
import { Effect, Layer, ManagedRuntime } from "effect"
import { AuthorizationServer, NodeServer, Storage, UserAuthenticator } from "../dist/index.js"

const here = dirname(fileURLToPath(import.meta.url))
const RESOURCE = "https://mcp.example.com/mcp"
const REDIRECT = "http://127.0.0.1/callback"
const CODES = 3000
const CONCURRENCY = 16
const REFRESH_MS = 10_000

const loadBefore = loadavg()[0] ?? 0
const dir = mkdtempSync(join(tmpdir(), "keyway-bench-"))
let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
const running = await NodeServer.listen((request) => handler(request))
const runtime = ManagedRuntime.make(
  AuthorizationServer.AuthorizationServer.layer({
    issuer: running.url,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => undefined,
    resources: [{ uri: RESOURCE, scopes: { read: "Read" } }],
    clients: [{ clientId: "bench", redirectUris: [REDIRECT] }],
  }).pipe(
    Layer.provideMerge(
      Layer.merge(
        Storage.layerSqlite({ path: join(dir, "bench.db") }),
        UserAuthenticator.UserAuthenticator.layerUsers([]),
      ),
    ),
  ),
)
handler = (request) => runtime.runPromise(AuthorizationServer.AuthorizationServer.use((s) => s.handle(request)))

const pkce = await Pkce.generate()
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

interface LoadResult {
  readonly ok: number
  readonly failed: number
  readonly elapsedMs: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

const load = (kind: "redeem" | "refresh", codes: ReadonlyArray<string>): Promise<LoadResult> =>
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

// Warm-up: JIT, SQLite page cache, key import.
await load("redeem", await makeCodes(200))

const redeem = await load("redeem", await makeCodes(CODES))
const refresh = await load("refresh", await makeCodes(CONCURRENCY))

await running.close()
await runtime.dispose()
rmSync(dir, { recursive: true, force: true })

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

const section = `
## @keyway/authorization-server: token endpoint on SQLite

\`node packages/authorization-server/bench/token-endpoint.ts\` (${new Date().toISOString().slice(0, 10)}). One server process
(node:http + the Web handler, SQLite file in WAL mode, ES256 access tokens); load from a separate Node process over
loopback with ${CONCURRENCY} concurrent connections. Every successful request runs two or three SQLite write
transactions (code consumed or refresh token rotated, access-token id recorded, refresh family opened) and signs one
ES256 JWT. Codes are written to the store beforehand (the login and consent pages are not measured).

| Scenario | Requests OK | Failed | Throughput (req/s) | p50 (ms) | p99 (ms) | max (ms) |
|---|---|---|---|---|---|---|
| authorization_code redemption (${CODES} codes) | ${redeem.ok} | ${redeem.failed} | ${rate(redeem)} | ${ms(redeem.p50)} | ${ms(redeem.p99)} | ${ms(redeem.max)} |
| refresh_token rotation (${CONCURRENCY} families, ${REFRESH_MS / 1000} s) | ${refresh.ok} | ${refresh.failed} | ${rate(refresh)} | ${ms(refresh.p50)} | ${ms(refresh.p99)} | ${ms(refresh.max)} |

Machine: ${nproc} CPUs (nproc), ${cpuModel}, Node ${process.version}, ${process.platform}/${process.arch}; 1-minute load
average ${loadBefore.toFixed(2)} when the run started (the machine is shared with other work, so treat the figures as a
floor).
`
process.stdout.write(section)
if (process.argv.includes("--write")) {
  // Replaces this script's own section when it is already there; appends it otherwise.
  const file = join(here, "..", "..", "..", "docs", "benchmarks.md")
  const current = readFileSync(file, "utf8")
  const heading = "\n## @keyway/authorization-server: token endpoint on SQLite\n"
  const start = current.indexOf(heading)
  if (start < 0) {
    writeFileSync(file, current + section)
  } else {
    const next = current.indexOf("\n## ", start + heading.length)
    writeFileSync(file, current.slice(0, start) + section + (next < 0 ? "" : current.slice(next)))
  }
}
