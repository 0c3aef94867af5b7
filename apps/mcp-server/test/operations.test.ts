import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { startAuthorizationServer } from "@keyway/app-authorization-server"
import { freePort, spawnCli, waitForStderr } from "@keyway/testing"
import { afterEach, describe, expect, it } from "vitest"
import { NOTE_SCOPES } from "../src/index.js"
import { obtainToken, rpc, USER } from "./support/stack.js"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

/** `name{labels}` to value, from the Prometheus text format. */
const samples = (text: string): Map<string, number> =>
  new Map(
    text
      .split("\n")
      .filter((line) => line !== "" && !line.startsWith("#"))
      .map((line) => {
        const match = /^(\w+(?:\{[^}]*\})?) (\S+)$/.exec(line)
        if (match === null) throw new Error(`not a sample line: ${line}`)
        return [match[1] ?? "", Number(match[2])] as const
      }),
  )

describe("health and metrics of the MCP server", () => {
  it("answers health checks, counts authentication outcomes by reason on the metrics listener, and turns unready without the authorization server", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "keyway-mcp-ops-"))
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }))
    const mcpPort = await freePort()
    const resource = `http://127.0.0.1:${mcpPort}/mcp`
    const as = await startAuthorizationServer(
      { port: 0, dataDir, users: [USER], resources: [{ uri: resource, scopes: NOTE_SCOPES }] },
      { log: () => undefined },
    )
    cleanups.push(as.close)
    const child = spawnCli(main, [
      "--authorization-server",
      as.issuer,
      "--port",
      String(mcpPort),
      "--metrics-port",
      "0",
    ])
    cleanups.push(child.kill)
    const [, metricsUrl = ""] = await waitForStderr(child, /metrics on (\S+)\n/)
    expect(new URL(metricsUrl).port).not.toBe(String(mcpPort))
    const origin = `http://127.0.0.1:${mcpPort}`

    const live = await fetch(`${origin}/health/live`)
    expect([live.status, await live.json()]).toEqual([200, { status: "ok" }])
    const ready = await fetch(`${origin}/health/ready`)
    expect([ready.status, await ready.json()]).toEqual([200, { status: "ok", checks: { authorizationServer: "ok" } }])
    expect((await fetch(`${origin}/metrics`)).status).toBe(404)

    const readOnly = await obtainToken(as.issuer, resource, "notes:read")
    expect((await rpc(resource, undefined, "tools/list")).status).toBe(401)
    expect((await rpc(resource, "garbage", "tools/list")).status).toBe(401)
    const step = await rpc(resource, readOnly, "tools/call", {
      name: "write_note",
      arguments: { title: "t", text: "x" },
    })
    expect(step.status).toBe(403)
    const listed = await rpc(resource, readOnly, "tools/list")
    expect([401, 403]).not.toContain(listed.status)

    const metrics = samples(await (await fetch(metricsUrl)).text())
    expect({
      authenticated: metrics.get('keyway_resource_authentications_total{outcome="authenticated"}'),
      noToken: metrics.get('keyway_resource_authentications_total{outcome="no_token"}'),
      invalid: metrics.get('keyway_resource_authentications_total{outcome="invalid_token"}'),
      scope: metrics.get('keyway_resource_authentications_total{outcome="insufficient_scope"}'),
      badRequest: metrics.get('keyway_resource_authentications_total{outcome="invalid_request"}'),
      unauthorized: metrics.get('keyway_resource_requests_total{endpoint="mcp",status="401"}'),
      forbidden: metrics.get('keyway_resource_requests_total{endpoint="mcp",status="403"}'),
      timed: metrics.get('keyway_resource_request_duration_seconds_count{endpoint="mcp"}'),
    }).toEqual({
      authenticated: 1,
      noToken: 1,
      invalid: 1,
      scope: 1,
      badRequest: 0,
      unauthorized: 2,
      forbidden: 1,
      timed: 4,
    })
    // Health checks are neither logged nor counted.
    expect(child.stderr).not.toContain("/health")
    // The public port's 404 for /metrics counts as another path; the health checks are not counted at all.
    expect(metrics.get('keyway_resource_requests_total{endpoint="other",status="404"}')).toBe(1)
    await fetch(`${origin}/health/ready`)
    const after = samples(await (await fetch(metricsUrl)).text())
    expect(after.get('keyway_resource_requests_total{endpoint="other",status="404"}')).toBe(1)
    const series = (m: Map<string, number>) =>
      [...m.keys()].filter((k) => k.startsWith("keyway_resource_requests_total"))
    expect(series(after)).toEqual(series(metrics))

    await as.close()
    const unready = await fetch(`${origin}/health/ready`)
    expect([unready.status, await unready.json()]).toEqual([
      503,
      { status: "unavailable", checks: { authorizationServer: "unreachable" } },
    ])
  }, 90_000)

  it("refuses --metrics-port on the public port, and --metrics-host alone, with exit code 2", async () => {
    const same = spawnCli(main, [
      "--authorization-server",
      "http://127.0.0.1:9",
      "--port",
      "9100",
      "--metrics-port",
      "9100",
    ])
    cleanups.push(same.kill)
    expect(await same.exit).toBe(2)
    expect(same.stderr).toMatch(/^keyway-mcp-server: --metrics-port must differ from --port \(the public port\)\n/)
    const alone = spawnCli(main, ["--authorization-server", "http://127.0.0.1:9", "--metrics-host", "127.0.0.1"])
    cleanups.push(alone.kill)
    expect(await alone.exit).toBe(2)
    expect(alone.stderr).toMatch(/^keyway-mcp-server: --metrics-host needs --metrics-port\n/)
  })
})
