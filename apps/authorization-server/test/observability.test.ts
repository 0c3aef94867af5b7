import { readFile, writeFile } from "node:fs/promises"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { fileURLToPath } from "node:url"
import { type CliProcess, spawnCli, waitForStderr } from "@keyway/testing"
import { describe, expect, it } from "vitest"
import { testCleanups } from "./support/cleanup.js"
import { codeFlow, PASSWORD, REDIRECT_URI, RESOURCE, refresh, registerClient, SCOPES } from "./support/flow.js"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))

const { defer, dir } = testCleanups()

const SESSION_SECRET = "session-secret-that-is-long-enough-0123456789"

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}): CliProcess => {
  const child = spawnCli(main, args, env)
  defer(child.kill)
  return child
}

/** Parses the Prometheus text format: `name{labels}` to value, comments and types checked on the way. */
const parsePrometheus = (text: string): Map<string, number> => {
  const samples = new Map<string, number>()
  const typed = new Set<string>()
  for (const line of text.split("\n")) {
    if (line === "") continue
    const type = /^# TYPE (\w+) (counter|gauge|histogram|summary|untyped)$/.exec(line)
    if (type !== null) {
      typed.add(type[1] ?? "")
      continue
    }
    if (line.startsWith("# HELP ")) continue
    const sample = /^(\w+)(\{[^}]*\})? (\S+)$/.exec(line)
    if (sample === null) throw new Error(`not a Prometheus sample line: ${line}`)
    const [, name = "", labels = "", value = ""] = sample
    const family = name.replace(/_(bucket|sum|count)$/, "")
    if (!typed.has(name) && !typed.has(family)) throw new Error(`sample before its # TYPE: ${line}`)
    samples.set(`${name}${labels}`, Number(value))
  }
  return samples
}

const startServer = async (config: object) => {
  const file = join(await dir(), "keyway.json")
  await writeFile(file, JSON.stringify(config))
  const child = run(["--config", file, "--port", "0"], { KEYWAY_SESSION_SECRET: SESSION_SECRET })
  const [, issuer = ""] = await waitForStderr(child, /issuer (\S+);/)
  return { child, issuer, file }
}

describe("health", () => {
  it("answers /health/live and /health/ready without logging them; ready is 503 without a signing key", async () => {
    const data = await dir()
    const { child, issuer } = await startServer({
      dataDir: data,
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const live = await fetch(`${issuer}/health/live`)
    expect([live.status, live.headers.get("cache-control"), await live.json()]).toEqual([
      200,
      "no-store",
      { status: "ok" },
    ])
    const ready = await fetch(`${issuer}/health/ready`)
    expect([ready.status, await ready.json()]).toEqual([
      200,
      { status: "ok", checks: { database: "ok", signingKey: "ok" } },
    ])
    const post = await fetch(`${issuer}/health/ready`, { method: "POST" })
    expect([post.status, post.headers.get("allow")]).toEqual([405, "GET, HEAD"])

    // No key can sign any more (as if every key had been retired by hand): not ready.
    const db = new DatabaseSync(join(data, "keyway.db"))
    db.exec("UPDATE signing_keys SET status = 'retired'")
    db.close()
    const unready = await fetch(`${issuer}/health/ready`)
    expect([unready.status, await unready.json()]).toEqual([
      503,
      { status: "unavailable", checks: { database: "ok", signingKey: "missing" } },
    ])
    // The metadata request is logged; the health checks are not.
    await fetch(`${issuer}/.well-known/oauth-authorization-server`)
    await waitForStderr(child, /GET \/\.well-known\/oauth-authorization-server 200/)
    expect(child.stderr).not.toContain("/health")
    // Metrics are off by default: nothing on the public port either.
    expect((await fetch(`${issuer}/metrics`)).status).toBe(404)
  }, 60_000)
})

describe("metrics and the audit log", () => {
  it("counts requests, tokens, reuse, failed logins, rate limits and storage time; audits without secrets", async () => {
    const data = await dir()
    const auditLog = join(data, "audit.jsonl")
    const { child, issuer, file } = await startServer({
      dataDir: data,
      auditLog,
      metrics: { port: 0 },
      rateLimits: { registration: { max: 1, window: 3600 } },
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const [, metricsUrl = ""] = await waitForStderr(child, /metrics on (\S+)\n/)
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
    expect(new URL(metricsUrl).port).not.toBe(new URL(issuer).port)
    // The public port does not serve the metrics.
    expect((await fetch(`${issuer}/metrics`)).status).toBe(404)

    const clientId = await registerClient(issuer)
    const secondRegistration = await registerClient(issuer).catch((e: Error) => e.message)
    expect(secondRegistration).toMatch(/^registration answered 429/)
    const tokens = await codeFlow(issuer, { clientId, wrongPassword: "not-the-password" })
    const refreshed = await refresh(issuer, clientId, tokens.refresh_token)
    expect(refreshed.status).toBe(200)
    const second = (await refreshed.json()) as { access_token: string; refresh_token: string }
    // Within the reuse interval a rotated-out token is answered with its successor again; a token two rotations old
    // is reuse.
    const third = (await (await refresh(issuer, clientId, second.refresh_token)).json()) as { refresh_token: string }
    const reused = await refresh(issuer, clientId, tokens.refresh_token)
    expect([reused.status, await reused.json()]).toEqual([
      400,
      {
        error: "invalid_grant",
        error_description: "the refresh token was already used; its whole family is now revoked",
      },
    ])
    const revoked = await fetch(`${issuer}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: third.refresh_token, client_id: clientId }),
    })
    expect(revoked.status).toBe(200)

    // The user revokes the app on the account page.
    const accountPage = await fetch(`${issuer}/account`)
    let cookie = accountPage.headers.getSetCookie()[0]?.split(";")[0] ?? ""
    const form = (values: Record<string, string>) => ({
      method: "POST",
      redirect: "manual" as const,
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: new URLSearchParams(values),
    })
    const csrfOf = (html: string) => /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? ""
    const signedIn = await fetch(
      `${issuer}/account/login`,
      form({ csrf_token: csrfOf(await accountPage.text()), username: "alice", password: PASSWORD }),
    )
    expect(signedIn.status).toBe(303)
    cookie = signedIn.headers.getSetCookie()[0]?.split(";")[0] ?? ""
    const apps = await (await fetch(`${issuer}/account`, { headers: { cookie } })).text()
    const revokedApp = await fetch(`${issuer}/account/revoke`, form({ csrf_token: csrfOf(apps), client_id: clientId }))
    expect(revokedApp.status).toBe(303)

    // An admin command writes to the same audit log.
    const added = spawnCli(main, [
      "admin",
      "--config",
      file,
      "clients",
      "add",
      "--redirect-uri",
      REDIRECT_URI,
      "--json",
    ])
    defer(added.kill)
    expect(await added.exit).toBe(0)
    const adminSecret = (JSON.parse(added.stdout) as { client_secret: string }).client_secret
    const rotated = spawnCli(main, ["admin", "--config", file, "keys", "rotate"])
    defer(rotated.kill)
    expect(await rotated.exit).toBe(0)

    const scrape = await fetch(metricsUrl)
    expect(scrape.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    const metrics = parsePrometheus(await scrape.text())
    expect({
      tokenOk: metrics.get('keyway_http_requests_total{endpoint="token",status="200"}'),
      tokenRefused: metrics.get('keyway_http_requests_total{endpoint="token",status="400"}'),
      registered: metrics.get('keyway_http_requests_total{endpoint="register",status="201"}'),
      registerLimited: metrics.get('keyway_http_requests_total{endpoint="register",status="429"}'),
      loginFailed: metrics.get('keyway_http_requests_total{endpoint="login",status="401"}'),
      rateLimited: metrics.get('keyway_rate_limited_total{endpoint="register"}'),
      codes: metrics.get('keyway_tokens_issued_total{grant_type="authorization_code"}'),
      refreshes: metrics.get('keyway_tokens_issued_total{grant_type="refresh_token"}'),
      reuse: metrics.get("keyway_refresh_token_reuse_detected_total"),
      wrongPassword: metrics.get('keyway_login_failures_total{reason="wrong_credentials"}'),
      loginLimited: metrics.get('keyway_login_failures_total{reason="rate_limited"}'),
      redeemTimed: metrics.get('keyway_database_operation_duration_seconds_count{operation="GrantStore.redeemCode"}'),
      redeemBucket: metrics.get(
        'keyway_database_operation_duration_seconds_bucket{operation="GrantStore.redeemCode",le="+Inf"}',
      ),
      tokenTimed: metrics.get('keyway_http_request_duration_seconds_count{endpoint="token"}'),
    }).toEqual({
      tokenOk: 3,
      tokenRefused: 1,
      registered: 1,
      registerLimited: 1,
      loginFailed: 1,
      rateLimited: 1,
      codes: 1,
      refreshes: 2,
      reuse: 1,
      wrongPassword: 1,
      loginLimited: 0,
      redeemTimed: 1,
      redeemBucket: 1,
      tokenTimed: 4,
    })
    expect(metrics.get('keyway_database_errors_total{operation="GrantStore.redeemCode"}')).toBeUndefined()
    // The public port's 404 for /metrics counts as another path; health checks are not counted at all.
    const other = (m: Map<string, number>) =>
      [...m].filter(([k]) => k.startsWith('keyway_http_requests_total{endpoint="other"'))
    expect(other(metrics)).toEqual([['keyway_http_requests_total{endpoint="other",status="404"}', 1]])
    await fetch(`${issuer}/health/ready`)
    await fetch(`${issuer}/health/live`)
    expect(other(parsePrometheus(await (await fetch(metricsUrl)).text()))).toEqual(other(metrics))

    child.process.kill("SIGTERM")
    expect(await child.exit).toBe(0)
    const text = await readFile(auditLog, "utf8")
    const events = text
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as { time: string; source: string; event: string })
    for (const e of events) expect(e.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(events.map((e) => `${e.source} ${e.event}`)).toEqual([
      "server client_registered",
      "server login_failed",
      "server login_succeeded",
      "server consent_given",
      "server code_issued",
      "server token_issued",
      "server token_issued",
      "server token_issued",
      "server refresh_token_reuse_detected",
      "server token_refused",
      "server token_revoked",
      "server login_succeeded",
      "server consent_revoked",
      "admin client_registered",
      "admin key_rotated",
    ])
    expect(events[1]).toMatchObject({ username: "alice", reason: "wrong_credentials", client_id: clientId })
    expect(events[5]).toMatchObject({ grant_type: "authorization_code", client_id: clientId, scope: "notes:read" })
    expect(events[6]).toMatchObject({ grant_type: "refresh_token", client_id: clientId, subject: "alice" })
    expect(events[12]).toMatchObject({ event: "consent_revoked", subject: "alice", client_id: clientId })
    // No secret used in the test reaches the audit log.
    for (const secret of [
      PASSWORD,
      "not-the-password",
      SESSION_SECRET,
      tokens.code,
      tokens.access_token,
      tokens.refresh_token,
      second.access_token,
      second.refresh_token,
      third.refresh_token,
      adminSecret,
    ]) {
      expect(text).not.toContain(secret)
    }
  }, 90_000)
})

interface ReceivedSpan {
  readonly name: string
  readonly service: string
  readonly attributes: Record<string, unknown>
}

/** A minimal OTLP/HTTP trace collector on loopback: it keeps the spans of every JSON export it receives. */
const startCollector = async () => {
  const spans: Array<ReceivedSpan> = []
  const contentTypes: Array<string> = []
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      contentTypes.push(`${req.method} ${req.url} ${req.headers["content-type"]}`)
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceSpans: Array<{
          resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> }
          scopeSpans: Array<{
            spans: Array<{ name: string; attributes: Array<{ key: string; value: Record<string, unknown> }> }>
          }>
        }>
      }
      for (const rs of body.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue ?? ""
        for (const ss of rs.scopeSpans) {
          for (const span of ss.spans) {
            const attributes = Object.fromEntries(span.attributes.map((a) => [a.key, Object.values(a.value)[0]]))
            spans.push({ name: span.name, service, attributes })
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  defer(() => new Promise((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, contentTypes }
}

describe("the audit log of key rotation", () => {
  it("has a line for each signing key the server creates on its schedule", async () => {
    const data = await dir()
    const auditLog = join(data, "audit.jsonl")
    const { child, issuer } = await startServer({
      dataDir: data,
      auditLog,
      signingKeys: { rotateEvery: 2, publishAhead: 1, checkEvery: 0.2, clockSkew: 0 },
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const [, kid = ""] = await waitForStderr(child, /signing key created: (\S+), signs from /)
    const published = (await (await fetch(`${issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }
    expect(published.keys.map((k) => k.kid)).toContain(kid)
    child.process.kill("SIGTERM")
    expect(await child.exit).toBe(0)
    const events = (await readFile(auditLog, "utf8"))
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(events[0]).toMatchObject({ source: "server", event: "key_rotated", kid })
  }, 60_000)
})

describe("traces", () => {
  it("exports a span per endpoint request over OTLP/HTTP to the configured collector", async () => {
    const collector = await startCollector()
    const { child, issuer } = await startServer({
      dataDir: await dir(),
      tracing: { otlpEndpoint: collector.url, serviceName: "as-under-test" },
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    await waitForStderr(child, /traces exported over OTLP to /)
    await fetch(`${issuer}/.well-known/oauth-authorization-server`)
    const clientId = await registerClient(issuer)
    await codeFlow(issuer, { clientId })
    // Stopping flushes what is still batched.
    child.process.kill("SIGTERM")
    expect(await child.exit).toBe(0)
    expect(new Set(collector.contentTypes)).toEqual(new Set(["POST /v1/traces application/json"]))
    const names = collector.spans.map((s) => s.name)
    for (const name of [
      "AuthorizationServer.metadata",
      "AuthorizationServer.register",
      "AuthorizationServer.authorize",
      "AuthorizationServer.authorize.login",
      "AuthorizationServer.authorize.consent",
      "AuthorizationServer.token",
    ]) {
      expect(names).toContain(name)
    }
    const token = collector.spans.find((s) => s.name === "AuthorizationServer.token")
    expect(token?.service).toBe("as-under-test")
    expect(token?.attributes).toMatchObject({ "http.request.method": "POST", "http.response.status_code": 200 })
  }, 60_000)
})
