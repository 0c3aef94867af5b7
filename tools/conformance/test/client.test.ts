import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { type Stack, startStack } from "@keyway/testing/stack"
import { afterEach, describe, expect, it } from "vitest"

const client = fileURLToPath(new URL("../dist/client.js", import.meta.url))

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const stack = async (options: Parameters<typeof startStack>[0] = {}): Promise<Stack> => {
  const started = await startStack(options)
  cleanups.push(started.close)
  return started
}

/** Runs the conformance client the way the suite does: server URL last, the rest in the environment. */
const runClient = (
  serverUrl: string,
  env: Record<string, string>,
): Promise<{ readonly code: number; readonly stderr: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [client, serverUrl], {
      env: { ...process.env, MCP_CONFORMANCE_SCENARIO: "keyway/test", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    })
    let stderr = ""
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    child.on("error", reject)
    child.on("close", (code) => resolve({ code: code ?? -1, stderr }))
  })

describe("conformance client", () => {
  it("speaks the stateful wire (initialize handshake) by default", async () => {
    const s = await stack()
    const run = await runClient(s.url, {})
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(s.requests.filter((r) => r.method !== undefined).map((r) => [r.method, r.status])).toEqual([
      ["initialize", 401],
      ["initialize", 200],
      ["notifications/initialized", 202],
      ["tools/list", 200],
      ["tools/call", 200],
    ])
    expect(s.as.registrations).toHaveLength(1)
  })

  it("speaks the stateless 2026-07-28 wire when MCP_CONFORMANCE_PROTOCOL_VERSION asks for it", async () => {
    const s = await stack()
    const run = await runClient(s.url, { MCP_CONFORMANCE_PROTOCOL_VERSION: "2026-07-28" })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(s.requests.map((r) => [r.method, r.status, r.protocolVersion])).toEqual([
      ["server/discover", 401, "2026-07-28"],
      ["server/discover", 200, "2026-07-28"],
      ["tools/list", 200, "2026-07-28"],
      ["tools/call", 200, "2026-07-28"],
    ])
  })

  it("uses client credentials from MCP_CONFORMANCE_CONTEXT when the server offers no registration", async () => {
    const s = await stack({
      metadata: (m) => {
        const { registration_endpoint: _ignored, ...rest } = m
        return rest
      },
      clients: [
        {
          client_id: "pre-registered",
          client_secret: "pre-secret",
          token_endpoint_auth_method: "client_secret_basic",
          redirect_uris: ["http://127.0.0.1/callback"],
        },
      ],
    })
    const run = await runClient(s.url, {
      MCP_CONFORMANCE_CONTEXT: JSON.stringify({
        name: "keyway/test",
        client_id: "pre-registered",
        client_secret: "pre-secret",
      }),
    })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(s.as.registrations).toHaveLength(0)
    expect(s.as.tokenRequests[0]?.authorization).toBe(
      `Basic ${Buffer.from("pre-registered:pre-secret").toString("base64")}`,
    )
  })

  it("exits 1 with one line when MCP_CONFORMANCE_CONTEXT is not JSON", async () => {
    const s = await stack()
    const run = await runClient(s.url, { MCP_CONFORMANCE_CONTEXT: "{oops" })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe("keyway-conformance-client [keyway/test]: MCP_CONFORMANCE_CONTEXT is not valid JSON\n")
  })

  it("exits 1 with the typed error when authorization fails", async () => {
    const s = await stack({ authorizeReply: () => ({ status: 200, body: "<form>log in</form>" }) })
    const run = await runClient(s.url, {})
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(
      `keyway-conformance-client [keyway/test]: authorization/interaction-required: ${s.as.issuer}/authorize answered HTTP 200 instead of redirecting; the authorization server needs a person, use the browser user agent\n`,
    )
  })
})
