import { type ChildProcessByStdio, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"
import type { Readable } from "node:stream"
import { createAuthClient } from "@keyway/client"
import { Pkce } from "@keyway/core"
import { freePort } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { scriptedUser } from "../src/agent.js"
import { Narrator } from "../src/narrator.js"
import { type Exchange, recordingFetch } from "../src/recorder.js"
import { Redactor } from "../src/redact.js"
import type { ServeAnnouncement } from "../src/serve.js"
import { Transcript } from "../src/transcript.js"

const MAIN = join(import.meta.dirname, "..", "dist", "main.js")

const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

describe("npm run demo -- --serve", () => {
  let child: ChildProcessByStdio<null, Readable, Readable>
  let stdout = ""
  let stderr = ""
  let exited: Promise<number | null>
  let asPort: number
  let mcpPort: number
  let announced: ServeAnnouncement

  beforeAll(async () => {
    asPort = await freePort()
    mcpPort = await freePort()
    child = spawn(process.execPath, [MAIN, "--serve", "--as-port", String(asPort), "--mcp-port", String(mcpPort)], {
      stdio: ["ignore", "pipe", "pipe"],
    })
    exited = new Promise((resolve) => child.on("close", (code) => resolve(code)))
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    const line = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString("utf8")
        const end = stdout.indexOf("\n")
        if (end >= 0) resolve(stdout.slice(0, end))
      })
      child.on("close", (code) => reject(new Error(`--serve exited with ${code} before announcing: ${stderr}`)))
    })
    announced = JSON.parse(line) as ServeAnnouncement
  })

  afterAll(async () => {
    if (child.exitCode === null) child.kill("SIGKILL")
    await exited
  })

  it("announces the servers, the demo user, the confidential and the public client in one JSON line", () => {
    expect(Object.keys(announced)).toEqual(["authorizationServer", "mcpServer", "users", "clients"])
    expect(announced.authorizationServer).toBe(`http://127.0.0.1:${asPort}`)
    expect(announced.mcpServer).toBe(`http://127.0.0.1:${mcpPort}/mcp`)
    expect(announced.users).toEqual([{ username: "alice", password: expect.stringMatching(/^[\w-]{16}$/) }])
    expect(announced.clients).toEqual([
      {
        client_id: "demo-confidential",
        client_secret: expect.stringMatching(/^[\w-]{43}$/),
        redirect_uris: ["http://127.0.0.1/callback"],
      },
      { client_id: "demo-public", redirect_uris: ["http://127.0.0.1/callback"] },
    ])
    expect(stderr).toContain(`Serving. Authorization server http://127.0.0.1:${asPort}`)
  })

  it("ran the doctor on its stack before announcing it: every revision works", async () => {
    // 2025-03-26 clients look for the authorization server at the MCP server's origin; the demo's has its own origin.
    // stdout and stderr are two pipes: the announcement may arrive before the lines written to stderr before it.
    if (!stderr.includes("Serving.")) {
      await new Promise<void>((resolve) => {
        const listener = () => {
          if (stderr.includes("Serving.")) {
            child.stderr.off("data", listener)
            resolve()
          }
        }
        child.stderr.on("data", listener)
      })
    }
    expect(stderr.split("\n").filter((line) => line.startsWith("Doctor: "))).toEqual([
      "Doctor: 2025-03-26: works with warnings",
      "Doctor: 2025-06-18: works",
      "Doctor: 2025-11-25: works",
      "Doctor: 2026-07-28: works",
    ])
    expect(stderr.indexOf("Doctor: 2026-07-28: works")).toBeLessThan(stderr.indexOf("Serving."))
  })

  it("serves the authorization server metadata and the MCP server's 401 challenge", async () => {
    const metadata = await fetch(`${announced.authorizationServer}/.well-known/oauth-authorization-server`)
    expect(metadata.status).toBe(200)
    expect(await metadata.json()).toMatchObject({
      issuer: announced.authorizationServer,
      code_challenge_methods_supported: ["S256"],
    })
    const mcp = await fetch(announced.mcpServer, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    })
    expect(mcp.status).toBe(401)
    expect(mcp.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="http://127.0.0.1:${mcpPort}/.well-known/oauth-protected-resource/mcp", scope="notes:read"`,
    )
  })

  it("lets the confidential client use any loopback port for its redirect, with client_secret_basic", async () => {
    const [user] = announced.users
    const [confidential] = announced.clients
    const otherPort = await freePort()
    const redirectUri = `http://127.0.0.1:${otherPort}/callback`
    const redactor = new Redactor()
    const lines: Array<string> = []
    const narrator = new Narrator(new Transcript({ write: (text) => lines.push(text), redactor }), redactor, {
      mcpUrl: announced.mcpServer,
      issuer: announced.authorizationServer,
    })
    const exchanges: Array<Exchange> = []
    const auth = createAuthClient({
      clients: [
        {
          issuer: announced.authorizationServer,
          client_id: confidential!.client_id,
          client_secret: confidential!.client_secret ?? "",
          token_endpoint_auth_method: "client_secret_basic",
          redirect_uris: [redirectUri],
        },
      ],
      fetch: recordingFetch(
        (input, init) => fetch(input, init),
        (exchange) => exchanges.push(exchange),
      ),
      userAgent: scriptedUser({ narrator, username: user!.username, password: user!.password, redirectUri }),
    })
    try {
      const tokens = await auth.authorize(announced.mcpServer)
      expect(tokens).toMatchObject({
        client_id: "demo-confidential",
        scope: "notes:read notes:write",
        resource: announced.mcpServer,
      })
      const token = exchanges.find((e) => e.url.pathname === "/token")
      expect(token?.requestHeaders.get("authorization")).toMatch(/^Basic /)
      expect(new URLSearchParams(token?.requestBody).get("redirect_uri")).toBe(redirectUri)
      expect(lines.join("")).toContain(`redirect_uri           ${redirectUri}`)
      expect(lines.join("")).not.toContain(confidential!.client_secret)
    } finally {
      await auth.dispose()
    }
  })

  it("refuses a redirect URI on another path (exact matching, only the port may vary)", async () => {
    const { challenge } = await Pkce.generate()
    const url = new URL(`${announced.authorizationServer}/authorize`)
    for (const [name, value] of Object.entries({
      response_type: "code",
      client_id: "demo-confidential",
      redirect_uri: "http://127.0.0.1:4444/elsewhere",
      code_challenge: challenge,
      code_challenge_method: "S256",
      resource: announced.mcpServer,
      state: "s",
    })) {
      url.searchParams.set(name, value)
    }
    const response = await fetch(url, { redirect: "manual" })
    expect(response.status).toBe(400)
    expect(response.headers.get("location")).toBeNull()
    expect(await response.text()).toContain(
      '<code data-error="invalid_request">invalid_request</code></p>\n<p data-error-description>redirect_uri does not match any URI registered for this client</p>',
    )
  })

  it("stops both servers on SIGTERM, exits 0, and printed nothing else on stdout", async () => {
    child.kill("SIGTERM")
    expect(await exited).toBe(0)
    expect(stdout.split("\n")).toEqual([stdout.slice(0, stdout.indexOf("\n")), ""])
    expect(await canListen(asPort)).toBe(true)
    expect(await canListen(mcpPort)).toBe(true)
    await expect(fetch(`${announced.authorizationServer}/jwks`)).rejects.toThrow("fetch failed")
  })
})
