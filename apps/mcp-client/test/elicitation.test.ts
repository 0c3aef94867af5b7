import { spawn } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { listen } from "@keyway/testing/peers"
import { createMcpHandler, inputRequired, inputResponse, McpServer } from "@modelcontextprotocol/server"
import { afterEach, describe, expect, it } from "vitest"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))
const fakeBrowser = fileURLToPath(new URL("./support/browser.mjs", import.meta.url))

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const REF = "-ref-1"

/**
 * A 2026-07-28 MCP server whose `files` tool needs the user's drive: it answers input_required with a URL-mode
 * elicitation; on the retry after `accept` it waits until the connect page was visited (the server may block until
 * the out-of-band interaction is done), then lists the files.
 */
const startServer = async () => {
  let visited: () => void = () => undefined
  const connected = new Promise<void>((resolve) => {
    visited = resolve
  })
  const calls: Array<string> = []
  let origin = ""
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: "files-server", title: "Files", version: "1.0.0" })
    server.registerTool("files", { description: "Lists files" }, async (ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, "connect")
      calls.push(answer.kind === "elicit" ? answer.action : answer.kind)
      if (answer.kind === "elicit") {
        if (answer.action !== "accept") {
          return { isError: true, content: [{ type: "text", text: `the user answered ${answer.action}` }] }
        }
        await connected
        return { content: [{ type: "text", text: "a.txt b.txt" }] }
      }
      return inputRequired({
        inputRequests: {
          connect: inputRequired.elicitUrl({ message: "Connect your drive", url: `${origin}/connect?ref=${REF}` }),
        },
        requestState: "-state",
      })
    })
    return server
  })
  const peer = await listen(async (request, url, body) => {
    if (url.pathname === "/connect") {
      if (url.searchParams.get("ref") === REF) visited()
      return { status: 200, headers: { "content-type": "text/html" }, body: "<p>Connected</p>" }
    }
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) if (typeof value === "string") headers.set(name, value)
    const response = await handler.fetch(
      new Request(url, {
        method: request.method ?? "GET",
        headers,
        ...(request.method === "POST" ? { body } : {}),
      }),
    )
    return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() }
  })
  origin = peer.origin
  cleanups.push(async () => {
    await handler.close()
    await peer.close()
  })
  return { url: `${peer.origin}/mcp`, origin: peer.origin, calls }
}

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const cli = async (args: ReadonlyArray<string>, env: Record<string, string | undefined>): Promise<Run> => {
  const config = await mkdtemp(join(tmpdir(), "keyway-mcp-elicit-"))
  cleanups.push(() => rm(config, { recursive: true, force: true }))
  return new Promise((resolve, reject) => {
    const { BROWSER: _b, DISPLAY: _d, WAYLAND_DISPLAY: _w, ...inherited } = process.env
    const child = spawn(process.execPath, [main, ...args], {
      env: Object.fromEntries(
        Object.entries({ ...inherited, XDG_CONFIG_HOME: config, HOME: config, ...env }).filter(
          ([, v]) => v !== undefined,
        ),
      ),
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    child.on("error", reject)
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }))
  })
}

describe("keyway-mcp and URL-mode elicitation", () => {
  it("with --yes prints the server, host, message and URL, opens the browser, and the retried call succeeds", async () => {
    const server = await startServer()
    const run = await cli(["call", server.url, "files", "--headless", "--yes"], {
      BROWSER: `${process.execPath} ${fakeBrowser}`,
    })
    expect(run.stdout).toBe("a.txt b.txt\n")
    expect(run.stderr).toBe(
      [
        `The MCP server "Files" asks you to open a page at ${new URL(server.origin).host}:`,
        "  Connect your drive",
        `  ${server.origin}/connect?ref=${REF}`,
        "Opening the page in your browser; keyway-mcp continues when the page is done.",
        "",
      ].join("\n"),
    )
    expect(run.code).toBe(0)
    expect(server.calls).toEqual(["missing", "accept"])
  })

  it("without a terminal and without --yes declines, and says how to accept", async () => {
    const server = await startServer()
    const run = await cli(["call", server.url, "files", "--headless"], {})
    expect(run.stderr).toBe(
      [
        `The MCP server "Files" asks you to open a page at ${new URL(server.origin).host}:`,
        "  Connect your drive",
        `  ${server.origin}/connect?ref=${REF}`,
        "Not opened: standard input is not a terminal; run with --yes to accept such requests.",
        "keyway-mcp: the tool files failed: the user answered decline",
        "",
      ].join("\n"),
    )
    expect(run.code).toBe(1)
    expect(server.calls).toEqual(["missing", "decline"])
  })
})
