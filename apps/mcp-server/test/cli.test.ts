import { fileURLToPath } from "node:url"
import { type CliProcess, spawnCli, waitForStderr } from "@keyway/testing"
import { afterEach, describe, expect, it } from "vitest"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const run = (args: ReadonlyArray<string>): CliProcess => {
  const child = spawnCli(main, args)
  cleanups.push(child.kill)
  return child
}

const ISSUER = "http://127.0.0.1:9"

describe("keyway-mcp-server", () => {
  it("starts, challenges without a token, serves its metadata, and stops with 0 on SIGTERM", async () => {
    const child = run(["--authorization-server", ISSUER, "--port", "0", "--path", "/notes/mcp"])
    const [, listening, url] = await waitForStderr(child, /listening on (\S+), public URL (\S+), authorization server /)
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/notes\/mcp$/)
    expect(`${listening}/notes/mcp`).toBe(url)
    const origin = new URL(url ?? "").origin
    const response = await fetch(url ?? "", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/notes/mcp", scope="notes:read"`,
    )
    const metadata = (await (await fetch(`${origin}/.well-known/oauth-protected-resource/notes/mcp`)).json()) as {
      resource: string
      authorization_servers: ReadonlyArray<string>
    }
    expect(metadata.resource).toBe(url)
    expect(metadata.authorization_servers).toEqual([ISSUER])
    await waitForStderr(child, /POST \/notes\/mcp 401 \(no token\)\n/)
    child.process.kill("SIGTERM")
    expect(await child.exit).toBe(0)
    expect(child.stderr).toMatch(/SIGTERM received, stopping\n.* stopped\n$/)
  })

  it.each([
    [[], "--authorization-server <issuer> is required"],
    [["--authorization-server", "ftp://as"], '--authorization-server must be an http(s) URL, got "ftp://as"'],
    [["--authorization-server", ISSUER, "--port=-1"], '--port must be a whole number from 0 to 65535, got "-1"'],
    [["--authorization-server", ISSUER, "--port", "x"], '--port must be a whole number from 0 to 65535, got "x"'],
    [["--authorization-server", ISSUER, "--path", "mcp"], '--path must start with "/", got "mcp"'],
    [["--authorization-server", ISSUER, "--verbose"], "Unknown option '--verbose'"],
  ])("exits with 2 on %j", async (args, message) => {
    const child = run(args)
    expect(await child.exit).toBe(2)
    expect(child.stderr.split("\n\n")[0]).toBe(`keyway-mcp-server: ${message}`)
    expect(child.stderr).toContain("usage: keyway-mcp-server --authorization-server <issuer> [options]")
  })

  it("prints the usage with --help", async () => {
    const child = run(["--help"])
    expect(await child.exit).toBe(0)
    expect(child.stdout).toMatch(/^usage: keyway-mcp-server --authorization-server <issuer> \[options\]\n/)
  })
})
