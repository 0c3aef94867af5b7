/**
 * The token endpoint without HTTP: refresh-token rotations through `AuthorizationServer.handle` in one process, 16 at
 * a time, each on a family of its own, so that no load generator and no socket shares the machine with the server.
 * Steadier than bench/token-endpoint.ts on a small machine (there the load generator and the server take turns on the
 * same cores), and the place to compare two builds: `--previous` runs another build's `dist/index.js` in the same
 * rounds. Each run is a fresh process; rounds interleave the builds and storages. Not a test. After building:
 *
 *     node packages/authorization-server/bench/in-process.ts [--rounds=3] [--refreshes=12000] [--previous=<dir>/index.js]
 *
 * One run (internal): `node bench/in-process.ts --run=<memory|sqlite> [--module=<index.js>]` prints its figures as JSON.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Pkce } from "@keyway/core"
import { Effect, Layer, ManagedRuntime } from "effect"
import type * as Keyway from "../dist/index.js"

const here = dirname(fileURLToPath(import.meta.url))
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const CONCURRENCY = 16
const RESOURCE = "https://mcp.example.com/mcp"
const REDIRECT = "https://app.example.com/callback"

interface Figures {
  readonly rate: number
  readonly cpu: number
  readonly thread: number
}

const run = async (kind: string, module: string, refreshes: number): Promise<Figures> => {
  const { AuthorizationServer, Storage, UserAuthenticator } = (await import(module)) as typeof Keyway
  const dir = mkdtempSync(join(tmpdir(), "keyway-in-process-"))
  const storage = kind === "sqlite" ? Storage.layerSqlite({ path: join(dir, "keyway.db") }) : Storage.layerMemory
  const issuer = "http://127.0.0.1:9"
  const runtime = ManagedRuntime.make(
    AuthorizationServer.AuthorizationServer.layer({
      issuer,
      development: { allowHttpLoopbackIssuer: true },
      warn: () => undefined,
      resources: [{ uri: RESOURCE, scopes: { read: "Read" } }],
      clients: [{ clientId: "bench", redirectUris: [REDIRECT] }],
      rateLimits: { token: false, refresh: false },
    }).pipe(
      Layer.provideMerge(
        Layer.merge(
          storage,
          UserAuthenticator.UserAuthenticator.fromFunction(async ({ username }) => ({
            subject: username,
            displayName: username,
          })),
        ),
      ),
    ),
  )
  try {
    const post = async (body: Record<string, string>) => {
      const request = new Request(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(body).toString(),
      })
      const response = await runtime.runPromise(AuthorizationServer.AuthorizationServer.use((a) => a.handle(request)))
      const json = (await response.json()) as Record<string, string>
      if (response.status !== 200) throw new Error(`${response.status} ${JSON.stringify(json)}`)
      return json
    }
    // Each family opened by a code written to the store and redeemed (PKCE S256): the sign-in is not what is measured.
    const grants = await runtime.runPromise(
      Effect.gen(function* () {
        return yield* Storage.GrantStore
      }),
    )
    const pkce = await Pkce.generate()
    const now = Math.floor(Date.now() / 1000)
    const tokens: Array<string> = []
    for (let i = 0; i < CONCURRENCY; i++) {
      const code = `-code-${i}-${now}`
      await runtime.runPromise(
        grants.createCode({
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
          expires_at: now + 600,
        }),
      )
      const answer = await post({
        grant_type: "authorization_code",
        code,
        redirect_uri: REDIRECT,
        client_id: "bench",
        code_verifier: pkce.verifier,
        resource: RESOURCE,
      })
      tokens.push(answer.refresh_token!)
    }
    const rotate = async (i: number, n: number) => {
      for (let k = 0; k < n; k++) {
        tokens[i] = (await post({ grant_type: "refresh_token", refresh_token: tokens[i]!, client_id: "bench" }))
          .refresh_token!
      }
    }
    // Warm-up: JIT, statements prepared, the key imported.
    await Promise.all(tokens.map((_, i) => rotate(i, 200)))
    const perFamily = Math.ceil(refreshes / CONCURRENCY)
    const thread = process.threadCpuUsage()
    const cpu = process.cpuUsage()
    const started = performance.now()
    await Promise.all(tokens.map((_, i) => rotate(i, perFamily)))
    const elapsed = performance.now() - started
    const t = process.threadCpuUsage(thread)
    const c = process.cpuUsage(cpu)
    const n = perFamily * CONCURRENCY
    return { rate: (n / elapsed) * 1000, cpu: (c.user + c.system) / n, thread: (t.user + t.system) / n }
  } finally {
    await runtime.dispose()
    rmSync(dir, { recursive: true, force: true })
  }
}

const one = arg("run")
if (one !== undefined) {
  const figures = await run(one, arg("module") ?? "../dist/index.js", Number(arg("refreshes") ?? 12000))
  process.stdout.write(JSON.stringify(figures))
} else {
  const rounds = Number(arg("rounds") ?? 3)
  const previous = arg("previous")
  const builds = [
    { name: "this build", module: "../dist/index.js" },
    ...(previous === undefined ? [] : [{ name: "previous build", module: resolve(previous) }]),
  ]
  const cases = builds.flatMap((b) => ["sqlite", "memory"].map((kind) => ({ ...b, kind })))
  const results = new Map<string, Array<Figures>>()
  const loadAtStart = loadavg()
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < cases.length; i++) {
      const c = cases[(i + round) % cases.length]!
      const out = execFileSync(process.execPath, [
        join(here, "in-process.ts"),
        `--run=${c.kind}`,
        `--module=${c.module}`,
        `--refreshes=${arg("refreshes") ?? 12000}`,
      ]).toString()
      const key = `${c.name}, ${c.kind === "sqlite" ? "SQLite file (default)" : "memory"}`
      results.set(key, [...(results.get(key) ?? []), JSON.parse(out) as Figures])
      process.stderr.write(`round ${round + 1} ${key}: ${out}\n`)
    }
  }
  const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const cpuModel =
    readFileSync("/proc/cpuinfo", "utf8")
      .split("\n")
      .find((l) => l.startsWith("model name"))
      ?.split(":")[1]
      ?.trim() ?? "unknown"
  process.stdout.write(`| Build and storage | refreshes/s | process CPU µs per refresh | main thread CPU µs per refresh |
|---|---:|---:|---:|
${[...results]
  .map(
    ([key, rs]) =>
      `| ${key} | ${median(rs.map((r) => r.rate)).toFixed(0)} | ${median(rs.map((r) => r.cpu)).toFixed(0)} | ${median(rs.map((r) => r.thread)).toFixed(0)} |`,
  )
  .join("\n")}

Medians of ${rounds} rounds; ${execFileSync("nproc").toString().trim()} CPUs (nproc), ${cpuModel}, Node ${process.version}; load average ${loadAtStart
    .map((v) => v.toFixed(2))
    .join(" / ")} at the start, ${loadavg()
    .map((v) => v.toFixed(2))
    .join(" / ")} at the end.
`)
}
