import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type CliProcess, freePort, spawnCli, waitForStderr } from "@keyway/testing"
import { hostileRequests, rawRequest, unauthenticated } from "@keyway/testing/raw"
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NOTE_SCOPES } from "../src/index.js"
import { obtainToken, USER } from "./support/stack.js"

// The two runnable servers as their own processes, exactly as users start them: whatever a stranger sends, each
// answers with the specified 4xx and is still running afterwards.
const asMain = fileURLToPath(new URL("../../authorization-server/dist/main.js", import.meta.url))
const mcpMain = fileURLToPath(new URL("../dist/main.js", import.meta.url))

let dir: string
let as: CliProcess
let mcp: CliProcess
let issuer: string
let resource: string
let asPort: number
let mcpPort: number

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "keyway-hostile-"))
  asPort = await freePort()
  mcpPort = await freePort()
  resource = `http://127.0.0.1:${mcpPort}/mcp`
  const config = join(dir, "keyway.json")
  await writeFile(
    config,
    JSON.stringify({
      users: [USER],
      resources: [{ uri: resource, name: "Keyway notes", scopes: NOTE_SCOPES }],
    }),
  )
  as = spawnCli(asMain, ["--config", config, "--port", String(asPort), "--data-dir", join(dir, "data")])
  issuer = (await waitForStderr(as, /listening on \S+, issuer (\S+);/))[1]!
  mcp = spawnCli(mcpMain, ["--authorization-server", issuer, "--port", String(mcpPort)])
  await waitForStderr(mcp, /listening on /)
})

afterAll(async () => {
  await mcp?.kill()
  await as?.kill()
  await rm(dir, { recursive: true, force: true })
})

const alive = (child: CliProcess) => {
  expect(child.process.exitCode).toBeNull()
  expect(child.process.signalCode).toBeNull()
}

describe("the runnable authorization server under hostile requests", () => {
  it.each(hostileRequests("/token"))("$name: $status", async ({ request, status, endAfterWrite }) => {
    const answer = await rawRequest(asPort, request, endAfterWrite === true ? { endAfterWrite } : {})
    expect(answer.status).toBe(status)
    if (status === 405 && !request.startsWith("CONNECT")) expect(answer.headers.allow).toBe("POST, OPTIONS")
    alive(as)
  })

  it("a form body over the endpoint's limit: the OAuth 413 of the token endpoint", async () => {
    const body = `grant_type=refresh_token&refresh_token=${"x".repeat(70 * 1024)}`
    const answer = await rawRequest(
      asPort,
      `POST /token HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    )
    expect(answer.status).toBe(413)
    expect(JSON.parse(answer.body)).toEqual({
      error: "invalid_request",
      error_description: "the body exceeds 65536 bytes",
    })
    alive(as)
  })

  it("metadata never echoes a caller's Host", async () => {
    const answer = await rawRequest(
      asPort,
      "GET /.well-known/oauth-authorization-server HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    )
    expect(answer.status).toBe(200)
    expect(answer.body).not.toContain("evil")
    expect(JSON.parse(answer.body).issuer).toBe(issuer)
  })
})

describe("the notes MCP server under hostile requests", () => {
  it.each(hostileRequests("/mcp").map(unauthenticated))(
    "$name: $status",
    async ({ request, status, endAfterWrite }) => {
      const answer = await rawRequest(mcpPort, request, endAfterWrite === true ? { endAfterWrite } : {})
      expect(answer.status).toBe(status)
      if (status === 405 && !request.startsWith("CONNECT"))
        expect(answer.headers.allow).toBe("GET, POST, DELETE, OPTIONS")
      alive(mcp)
    },
  )

  it("authenticated bodies over 4 MiB: 413 before they are read, declared or chunked", async () => {
    const token = await obtainToken(issuer, resource, "notes:read")
    const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${mcpPort}\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n`
    const declared = await rawRequest(mcpPort, `${head}Content-Length: 50000000\r\n\r\n{`)
    expect(declared.status).toBe(413)
    expect(JSON.parse(declared.body)).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "the request body exceeds the limit of 4194304 bytes" },
    })
    const chunk = "x".repeat(1024 * 1024)
    const chunked = await rawRequest(
      mcpPort,
      `${head}Transfer-Encoding: chunked\r\n\r\n${`100000\r\n${chunk}\r\n`.repeat(5)}0\r\n\r\n`,
    )
    expect(chunked.status).toBe(413)
    expect(JSON.parse(chunked.body)).toEqual(JSON.parse(declared.body))
    const incomplete = await rawRequest(mcpPort, `${head}Transfer-Encoding: chunked\r\n\r\n5\r\n{`, {
      endAfterWrite: true,
    })
    expect(incomplete.status).toBe(400)
    alive(mcp)
  })

  it("after all of it, the whole flow works: registration, login, consent, token, tool call", async () => {
    alive(as)
    alive(mcp)
    const token = await obtainToken(issuer, resource, "notes:read")
    const client = new Client({ name: "after-hostile", version: "1.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resource), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    )
    const tools = await client.listTools()
    expect(tools.tools.map((t) => t.name).sort()).toEqual(["delete_note", "list_notes", "read_note", "write_note"])
    await client.close()
  })
})
