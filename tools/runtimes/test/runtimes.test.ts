/**
 * The Web faces on the runtimes they promise, each the real binary from npm: workerd (the bundle esbuild makes for a
 * worker) with an old compatibility date and no `nodejs_compat`, with `nodejs_compat` at 2026-03-01, and at a recent
 * date; Deno and Bun (the packages as installed). On each, `@keyway/resource-server`'s main entry answers the four
 * cases of a protected MCP endpoint (a 401 challenge, the protected resource metadata, 200 with a valid token, twice
 * so that the second goes through the verified-token cache, and 401 for a token issued for another audience), and
 * `@keyway/client`'s main entry runs its whole flow (memory store, headless user agent) against a loopback
 * authorization server and MCP server, with a few of `@keyway/core`'s functions.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { Challenge } from "@keyway/core"
import { freePort } from "@keyway/testing"
import {
  type AuthorizationServerPeer,
  type ResourceServerPeer,
  startAuthorizationServer,
  startResourceServer,
} from "@keyway/testing/peers"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bundleForBrowser, runtimeBinary } from "../src/index.js"

const programs = join(dirname(fileURLToPath(import.meta.url)), "..", "programs")
const RESOURCE = "https://mcp.runtime.example/mcp"
const ISSUER = "https://as.runtime.example"
/** An old compatibility date, run without the `nodejs_compat` flag: no `node:*` module exists there. */
const OLD_COMPATIBILITY_DATE = "2023-03-01"

let jwks: Server
let jwksUri = ""
let mint: (audience: string) => Promise<string>
let as: AuthorizationServerPeer
let mcp: ResourceServerPeer
const cleanups: Array<() => Promise<void>> = []

beforeAll(async () => {
  // The client's counterparts: an authorization server that approves at once, and an MCP server it protects.
  as = await startAuthorizationServer()
  mcp = await startResourceServer({ authorizationServers: () => [as.issuer], lookup: as.lookup })
  const { privateKey, publicKey } = await generateKeyPair("ES256")
  const publicJwk = { ...(await exportJWK(publicKey)), kid: "runtime", alg: "ES256", use: "sig" }
  mint = (audience) =>
    new SignJWT({ scope: "notes:read", client_id: "runtime-client" })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "runtime" })
      .setIssuer(ISSUER)
      .setAudience(audience)
      .setSubject("alice")
      .setIssuedAt()
      .setExpirationTime("10m")
      .sign(privateKey)
  jwks = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [publicJwk] }))
  })
  await new Promise<void>((resolve) => jwks.listen(0, "127.0.0.1", resolve))
  jwksUri = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`
})

afterAll(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
  await new Promise<void>((resolve) => jwks.close(() => resolve()))
  await mcp.close()
  await as.close()
})

/** Starts a child process, resolves with its first stdout line matching `ready`; the child is stopped after all. */
const start = (command: string, args: ReadonlyArray<string>, cwd: string, ready: RegExp): Promise<string> => {
  const child: ChildProcess = spawn(command, args, {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
  })
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve()
        child.once("exit", () => resolve())
        child.kill()
      }),
  )
  let output = ""
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! })
    lines.on("line", (line) => {
      output += `${line}\n`
      const match = ready.exec(line)
      if (match !== null) resolve(match[1] ?? line)
    })
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = ready.exec(output)
      if (match !== null) resolve(match[1] ?? "")
    })
    child.once("exit", (code) => reject(new Error(`${command} exited with ${code} before it was ready:\n${output}`)))
  })
}

const settings = () => JSON.stringify({ resource: RESOURCE, issuer: ISSUER, jwksUri })

const startWorkerd = async (compatibilityDate: string, flags: ReadonlyArray<string>): Promise<string> => {
  const bundle = await bundleForBrowser(join(programs, "worker.ts"))
  const dir = await mkdtemp(join(tmpdir(), "keyway-workerd-"))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  await writeFile(join(dir, "worker.js"), bundle.code)
  const port = await freePort()
  const text = (value: string) => JSON.stringify(value)
  await writeFile(
    join(dir, "config.capnp"),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    # The default outbound service: the test's JWKS is on loopback.
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
const worker :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed "worker.js") ],
  compatibilityDate = ${text(compatibilityDate)},
  compatibilityFlags = [${flags.map(text).join(", ")}],
  bindings = [
    (name = "RESOURCE", text = ${text(RESOURCE)}),
    (name = "ISSUER", text = ${text(ISSUER)}),
    (name = "JWKS_URI", text = ${text(jwksUri)}),
  ],
);
`,
  )
  const workerd = runtimeBinary("workerd")
  // workerd prints nothing once it listens (the pattern never matches): wait until the socket answers, and fail at
  // once if it exits.
  const child = start(workerd, ["serve", "config.capnp"], dir, /^(?!)/)
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 20_000
  for (;;) {
    const answered = await fetch(`${base}/.well-known/oauth-protected-resource/mcp`).then(
      () => true,
      () => false,
    )
    if (answered) break
    if (Date.now() > deadline) throw new Error("workerd did not start listening within 20 s")
    await Promise.race([child, new Promise((resolve) => setTimeout(resolve, 100))])
  }
  return base
}

const startDenoOrBun = async (runtime: "deno" | "bun"): Promise<string> => {
  const binary = runtimeBinary(runtime)
  const cwd = join(programs, "..")
  const args =
    runtime === "deno"
      ? [
          "run",
          "--allow-net",
          "--allow-read",
          "--allow-env",
          "--node-modules-dir=manual",
          "programs/serve.ts",
          settings(),
        ]
      : ["programs/serve.ts", settings()]
  const port = await start(binary, args, cwd, /^\{"port":(\d+)\}$/)
  return `http://127.0.0.1:${port}`
}

const runtimes: ReadonlyArray<readonly [string, () => Promise<string>, string]> = [
  [
    `workerd, compatibility date ${OLD_COMPATIBILITY_DATE}, no nodejs_compat`,
    () => startWorkerd(OLD_COMPATIBILITY_DATE, []),
    "Cloudflare-Workers",
  ],
  [
    "workerd, compatibility date 2026-03-01 with nodejs_compat",
    () => startWorkerd("2026-03-01", ["nodejs_compat"]),
    "Cloudflare-Workers",
  ],
  ["workerd, compatibility date 2026-08-04", () => startWorkerd("2026-08-04", []), "Cloudflare-Workers"],
  ["Deno", () => startDenoOrBun("deno"), "deno"],
  ["Bun", () => startDenoOrBun("bun"), "bun"],
]

describe.each(runtimes)("the Web faces on %s", (_name, startRuntime, runtime) => {
  let base = ""
  beforeAll(async () => {
    base = await startRuntime()
  }, 60_000)

  it("answers a request without a token 401 with a Bearer challenge naming the metadata", async () => {
    const response = await fetch(`${base}/mcp`)
    expect(response.status).toBe(401)
    const challenge = Challenge.fromHeaders(response.headers)
    expect(challenge).toMatchObject({
      _tag: "Success",
      success: {
        resource_metadata: "https://mcp.runtime.example/.well-known/oauth-protected-resource/mcp",
        scope: "notes:read",
      },
    })
    expect(response.headers.get("www-authenticate")).not.toContain("error=")
  })

  it("serves the protected resource metadata", async () => {
    const response = await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({
      resource: RESOURCE,
      authorization_servers: [ISSUER],
      scopes_supported: ["notes:read"],
    })
  })

  it("answers 200 with a valid token, verified first and then from the cache", async () => {
    const token = await mint(RESOURCE)
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${token}` } })
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({ subject: "alice", scopes: ["notes:read"], runtime })
    }
  })

  it("answers 401 invalid_token for a token issued for another MCP server", async () => {
    const token = await mint("https://other.runtime.example/mcp")
    const response = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${token}` } })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toContain('error="invalid_token"')
  })

  it("runs the client's flow: discovery, registration, authorization, token and an authorized MCP call", async () => {
    const registrations = as.registrations.length
    const codes = as.tokenRequests.filter((request) => request.grant === "authorization_code").length
    const response = await fetch(`${base}/client-flow?mcp=${encodeURIComponent(mcp.url)}`)
    expect(response.status).toBe(200)
    const result = (await response.json()) as Record<string, unknown>
    expect(result).toMatchObject({
      status: 200,
      resource: mcp.url,
      core: {
        canonical: "https://mcp.example.com",
        challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        equal: true,
      },
    })
    // This runtime's client registered and redeemed a code of its own.
    expect(as.registrations.length).toBe(registrations + 1)
    expect(as.tokenRequests.filter((request) => request.grant === "authorization_code").length).toBe(codes + 1)
  })
})
