import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { rawRequest } from "@keyway/testing/raw"
import { Clock, Effect, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { AuthorizationServer, createAuthorizationServer } from "../src/AuthorizationServer.js"
import { listen } from "../src/NodeServer.js"
import { ClientStore, layerMemory } from "../src/storage/Storage.js"
import { UserAuthenticator } from "../src/UserAuthenticator.js"
import {
  alicePasswordHash,
  MCP,
  obtainCode,
  SECRET,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

const cleanups: Array<() => Promise<void> | void> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "keyway-as-"))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const redeem = (server: TestServer, code: string, verifier: string) =>
  tokenRequest(server, {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: "https://app.example.com/callback",
    client_id: "public-app",
    resource: MCP,
  })

describe("Effect face", () => {
  it("serves over any HTTP server from the layer, and keeps client secrets hashed in the ClientStore", async () => {
    let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
    const running = await listen((request) => handler(request))
    cleanups.push(() => running.close())
    const runtime = ManagedRuntime.make(
      AuthorizationServer.layer({
        issuer: running.url,
        development: { allowHttpLoopbackIssuer: true },
        warn: () => undefined,
        resources: [{ uri: MCP, scopes: { read: "Read" } }],
        clients: [{ clientId: "svc", redirectUris: ["https://svc.example.com/cb"], clientSecret: SECRET }],
      }).pipe(
        Layer.provideMerge(
          Layer.merge(
            layerMemory,
            UserAuthenticator.layerUsers([{ username: "alice", passwordHash: await alicePasswordHash() }]),
          ),
        ),
      ),
    )
    cleanups.push(() => runtime.dispose())
    handler = (request) => runtime.runPromise(AuthorizationServer.use((server) => server.handle(request)))

    const metadata = await fetch(`${running.url}/.well-known/oauth-authorization-server`)
    expect(((await metadata.json()) as { issuer: string }).issuer).toBe(running.url)

    const stored = await runtime.runPromise(
      ClientStore.use((clients) =>
        Effect.flatMap(Clock.currentTimeMillis, (millis) => clients.get("svc", Math.floor(millis / 1000))),
      ),
    )
    expect(stored.origin).toBe("static")
    expect(stored.token_endpoint_auth_method).toBe("client_secret_basic")
    expect(JSON.stringify(stored)).not.toContain(SECRET)
    expect(stored.client_secret_hash).toBeDefined()
  })

  it("answers 404 for unknown paths and 405 for wrong methods", async () => {
    const server = await startServer()
    cleanups.push(() => server.close())
    expect((await fetch(`${server.issuer}/nope`)).status).toBe(404)
    const wrong = await fetch(`${server.issuer}/authorize`, { method: "POST" })
    expect(wrong.status).toBe(405)
    // HEAD is served wherever GET is.
    expect(wrong.headers.get("allow")).toBe("GET, HEAD")
  })
})

describe("plain face", () => {
  it("listen() starts a node:http server that routes by the issuer's paths", async () => {
    const as = createAuthorizationServer({
      issuer: "http://127.0.0.1:9/tenant",
      development: { allowHttpLoopbackIssuer: true },
      warn: () => undefined,
      resources: [{ uri: MCP, scopes: { read: "Read" } }],
    })
    const running = await as.listen({ port: 0, host: "127.0.0.1" })
    cleanups.push(async () => {
      await running.close()
      await as.close()
    })
    const response = await fetch(`${running.url}/.well-known/oauth-authorization-server/tenant`)
    expect(response.status).toBe(200)
    expect(((await response.json()) as { token_endpoint: string }).token_endpoint).toBe(
      "http://127.0.0.1:9/tenant/token",
    )
    expect(as.metadata.issuer).toBe("http://127.0.0.1:9/tenant")
  })

  it("listen(): TRACE gets the endpoint's Allow, a caller's Host never reaches a URL, and allow() lists methods", async () => {
    const as = createAuthorizationServer({
      issuer: "http://127.0.0.1:9",
      development: { allowHttpLoopbackIssuer: true },
      warn: () => undefined,
      resources: [{ uri: MCP, scopes: { read: "Read" } }],
    })
    const running = await as.listen()
    cleanups.push(async () => {
      await running.close()
      await as.close()
    })
    const trace = await rawRequest(running.port, "TRACE /token HTTP/1.1\r\nHost: a\r\n\r\n")
    expect([trace.status, trace.headers.allow]).toEqual([405, "POST, OPTIONS"])
    const unknown = await rawRequest(running.port, "TRACE /nothing HTTP/1.1\r\nHost: a\r\n\r\n")
    expect(unknown.status).toBe(404)
    const metadata = await rawRequest(
      running.port,
      "GET /.well-known/oauth-authorization-server HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    )
    expect(JSON.parse(metadata.body).token_endpoint).toBe("http://127.0.0.1:9/token")
    expect(as.allow("/jwks")).toBe("GET, HEAD, OPTIONS")
    expect(as.allow("/authorize")).toBe("GET, HEAD")
    expect(as.allow("/nothing")).toBeUndefined()
  })

  it("warns once, at creation, when the development relaxation is on", async () => {
    const warnings: Array<string> = []
    const as = createAuthorizationServer({
      issuer: "http://localhost:9",
      development: { allowHttpLoopbackIssuer: true },
      warn: (message) => warnings.push(message),
      resources: [{ uri: MCP, scopes: { "tools:read": "List the tools" } }],
    })
    cleanups.push(() => as.close())
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain("DEVELOPMENT MODE")
    expect((await as.handler(new Request("http://localhost:9/.well-known/openid-configuration"))).status).toBe(200)
    expect(warnings).toHaveLength(1)
  })

  it("runs the whole flow under an issuer with a path", async () => {
    const server = await startServer({ issuerPath: "/tenant/a" })
    cleanups.push(() => server.close())
    const { code, verifier, location } = await obtainCode(server)
    expect(location.searchParams.get("iss")).toBe(`${server.url}/tenant/a`)
    expect((await redeem(server, code, verifier)).status).toBe(200)
    expect((await fetch(`${server.url}/token`, { method: "POST" })).status).toBe(404)
  })

  it("refuses an http issuer without the development flag", () => {
    expect(() =>
      createAuthorizationServer({
        issuer: "http://127.0.0.1:9",
        resources: [{ uri: MCP, scopes: { "tools:read": "List the tools" } }],
      }),
    ).toThrow(/allowHttpLoopbackIssuer/)
  })
})

describe("concurrency over HTTP", () => {
  // The store lets exactly one redemption (or rotation) win; every loser is a replay, which revokes the grant. So at
  // most one client sees 200, and whatever it got is dead once the replays land.
  it("N parallel redemptions of one code: at most one succeeds, the rest are invalid_grant, and the grant ends revoked", async () => {
    const server = await startServer()
    cleanups.push(() => server.close())
    const { code, verifier } = await obtainCode(server)
    const answers = await Promise.all(Array.from({ length: 8 }, () => redeem(server, code, verifier)))
    const winners = answers.filter((r) => r.status === 200)
    expect(winners.length).toBeLessThanOrEqual(1)
    const losers = answers.filter((r) => r.status !== 200)
    expect(losers.length).toBeGreaterThanOrEqual(7)
    for (const loser of losers) {
      expect(loser.status).toBe(400)
      expect(((await loser.json()) as { error: string }).error).toBe("invalid_grant")
    }
    for (const winner of winners) {
      const { refresh_token } = (await winner.json()) as { refresh_token: string }
      const refreshed = await tokenRequest(server, {
        grant_type: "refresh_token",
        refresh_token,
        client_id: "public-app",
      })
      expect(refreshed.status).toBe(400)
    }
  })

  it.each([
    ["memory", () => ({})],
    ["a SQLite file", () => ({ storage: { type: "sqlite" as const, path: join(tempDir(), "as.db") } })],
  ])(
    "20 parallel refreshes of one token on %s: every answer 200 with one and the same successor, which works",
    async (_, storage) => {
      const server = await startServer(storage())
      cleanups.push(() => server.close())
      const { code, verifier } = await obtainCode(server)
      const { refresh_token } = (await (await redeem(server, code, verifier)).json()) as { refresh_token: string }
      const refresh = (token: string) =>
        tokenRequest(server, { grant_type: "refresh_token", refresh_token: token, client_id: "public-app" })
      const answers = await Promise.all(Array.from({ length: 20 }, () => refresh(refresh_token)))
      expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200))
      const bodies = (await Promise.all(answers.map((r) => r.json()))) as Array<{
        refresh_token: string
        access_token: string
      }>
      const successors = new Set(bodies.map((b) => b.refresh_token))
      expect(successors.size).toBe(1)
      expect(new Set(bodies.map((b) => b.access_token)).size).toBe(20)
      const [successor] = [...successors]
      const next = await refresh(successor!)
      expect(next.status).toBe(200)
      expect(((await next.json()) as { refresh_token: string }).refresh_token).not.toBe(successor)
    },
  )
})

describe("SQLite storage", () => {
  it("persists keys, clients and refresh tokens across restarts, and stores no secret in clear", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keyway-as-"))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const path = join(dir, "as.db")

    const first = await startServer({ storage: { type: "sqlite", path } })
    const { code, verifier } = await obtainCode(first)
    const tokens = (await (await redeem(first, code, verifier)).json()) as {
      refresh_token: string
      access_token: string
    }
    const kid = ((await (await fetch(`${first.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys[0]!.kid
    await first.close()

    const bytes = readFileSync(path).toString("latin1") + readFileSync(`${path}-wal`, { flag: "a+" }).toString("latin1")
    for (const secret of [SECRET, tokens.refresh_token, code]) expect(bytes).not.toContain(secret)

    // Each start listens on another port, so under another issuer: previousIssuer moves the database along, with its
    // keys, clients and refresh tokens.
    const second = await startServer({ storage: { type: "sqlite", path }, previousIssuer: first.issuer })
    cleanups.push(() => second.close())
    const keys = ((await (await fetch(`${second.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys
    expect(keys.map((k) => k.kid)).toEqual([kid])
    const refreshed = await tokenRequest(second, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: "public-app",
    })
    expect(refreshed.status).toBe(200)
    await second.close()
    cleanups.pop()

    // A client removed from the configuration is removed from the database at the next start.
    const third = await startServer({
      storage: { type: "sqlite", path },
      previousIssuer: second.issuer,
      clients: [{ clientId: "only-one", redirectUris: ["https://one.example.com/cb"] }],
    })
    cleanups.push(() => third.close())
    const gone = await tokenRequest(third, { grant_type: "refresh_token", refresh_token: "x", client_id: "public-app" })
    expect(gone.status).toBe(401)
  })
})

describe("ready", () => {
  const base = {
    issuer: "https://as.example.com",
    resources: [{ uri: "https://mcp.example.com/mcp", scopes: { "tools:read": "List the tools" } }],
    warn: () => undefined,
  }

  it("opens the store and creates the signing key before any request", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keyway-as-"))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const path = join(dir, "as.db")
    const server = createAuthorizationServer({ ...base, storage: { type: "sqlite", path } })
    cleanups.push(() => server.close())
    await server.ready()
    const { DatabaseSync } = await import("node:sqlite")
    const db = new DatabaseSync(path, { readOnly: true })
    const count = db.prepare("SELECT count(*) AS n FROM signing_keys").get() as { n: number }
    db.close()
    expect(count.n).toBe(1)
  })

  it("rejects with the storage failure when the database cannot be opened", async () => {
    const server = createAuthorizationServer({
      ...base,
      storage: { type: "sqlite", path: join(tmpdir(), "keyway-missing-dir", "nested", "as.db") },
    })
    cleanups.push(() => server.close())
    await expect(server.ready()).rejects.toThrow(/unable to open database file/)
  })
})
