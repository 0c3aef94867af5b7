import { readFileSync, rmSync } from "node:fs"
import { mkdtemp } from "node:fs/promises"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { createAuthorizationServer, NodeServer } from "@keyway/authorization-server"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { closing, freePort, listening, spawnCli } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { reportSchema } from "../src/index.ts"

const CLI = fileURLToPath(new URL("../dist/cli.js", import.meta.url))

/** Runs the built command line to its end (asynchronously: the servers it talks to run in this process). */
const doctor = async (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) => {
  const child = spawnCli(CLI, args, { NO_COLOR: "1", FORCE_COLOR: "0", ...env })
  const code = await child.exit
  return { code, stdout: child.stdout, stderr: child.stderr }
}

const lastLine = (text: string) => text.trimEnd().split("\n").at(-1)

describe("keyway-doctor's arguments", () => {
  it("--help prints the usage and exits 0", async () => {
    const ran = await doctor(["--help"])
    expect(ran.code).toBe(0)
    expect(ran.stdout.split("\n")[0]).toBe("usage: keyway-doctor [options] <mcp-server-url>")
    expect(ran.stdout).toContain("  --json                     print the JSON report instead of the text report\n")
    expect(ran.stderr).toBe("")
  })

  it.each([
    [[], "keyway-doctor: name the MCP server URL (keyway-doctor --help)"],
    [["--verbose", "https://mcp.example.com/mcp"], "keyway-doctor: unknown option --verbose"],
    [
      ["--revision", "2024-11-05", "https://mcp.example.com/mcp"],
      'keyway-doctor: --revision "2024-11-05" is not an MCP revision (2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)',
    ],
    [
      ["--client-credentials", "reporter", "https://mcp.example.com/mcp"],
      "keyway-doctor: --client-credentials needs the secret in the environment variable KEYWAY_DOCTOR_CLIENT_SECRET",
    ],
  ])("%j exits 2 with one line naming the bad argument", async (args, line) => {
    const ran = await doctor(args)
    expect(ran.code).toBe(2)
    expect(ran.stderr).toBe(`${line}\n`)
    expect(ran.stdout).toBe("")
  })
})

describe("keyway-doctor against servers on loopback", () => {
  const servers: Array<ReturnType<typeof createServer>> = []
  const closers: Array<() => Promise<void>> = []
  let mcp = ""
  let hostile = ""
  let out = ""

  beforeAll(async () => {
    out = await mkdtemp(join(tmpdir(), "keyway-doctor-"))
    // Keyway's own authorization server and a protected MCP endpoint, as the READMEs wire them.
    const asServer = createServer()
    const rsServer = createServer()
    servers.push(asServer, rsServer)
    const issuer = await listening(asServer)
    mcp = `${await listening(rsServer)}/mcp`
    const authorizationServer = createAuthorizationServer({
      issuer,
      resources: [{ uri: mcp, name: "Notes", scopes: { "notes:read": "Read your notes" } }],
      registration: true,
      development: { allowHttpLoopbackIssuer: true },
      warn: () => {},
    })
    asServer.on("request", NodeServer.toNodeListener(authorizationServer.handler, { publicUrl: issuer }))
    const metadata = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as {
      jwks_uri: string
    }
    const guard = createProtectedResource({
      resource: mcp,
      authorizationServers: [issuer],
      verifier: jwt({ jwksUri: metadata.jwks_uri }),
      scopesSupported: ["notes:read"],
      requiredScopes: ["notes:read"],
    })
    rsServer.on(
      "request",
      toNodeListener(guard.protect(async () => Response.json({ jsonrpc: "2.0", id: 1, result: {} }))),
    )
    closers.push(
      () => guard.close(),
      () => authorizationServer.close(),
    )
    // A server that answers markup where clients expect URLs: the HTML report must show it as text.
    const bad = createServer((req, res) => {
      const origin = `http://${req.headers.host ?? ""}`
      if (req.url === "/.well-known/oauth-protected-resource/mcp") {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ resource: "<script>alert(1)</script>", authorization_servers: [] }))
        return
      }
      res.writeHead(401, {
        "www-authenticate": `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`,
      })
      res.end()
    })
    servers.push(bad)
    hostile = `${await listening(bad)}/mcp`
  })

  afterAll(async () => {
    await Promise.all(servers.map(closing))
    await Promise.all(closers.map((close) => close()))
    rmSync(out, { recursive: true, force: true })
  })

  it("a Keyway stack: exit 0, the text report ends with the verdict", async () => {
    const ran = await doctor(["--revision", "2025-11-25", mcp])
    expect(ran.stderr).toBe("")
    expect(ran.code).toBe(0)
    expect(ran.stdout.split("\n").slice(0, 2)).toEqual([`keyway-doctor ${mcp}`, "revisions: 2025-11-25"])
    expect(lastLine(ran.stdout)).toMatch(/^2025-11-25: works/u)
    expect(ran.stdout).not.toContain("\u001b[")
  })

  it("--json prints a report that parses against the schema; --html writes the page", async () => {
    const html = join(out, "report.html")
    const ran = await doctor(["--json", "--html", html, "--revision", "2026-07-28", "--revision", "2025-06-18", mcp])
    expect(ran.code).toBe(0)
    const report = reportSchema.parse(JSON.parse(ran.stdout))
    expect(report.target).toBe(mcp)
    expect(report.revisions).toEqual(["2025-06-18", "2026-07-28"])
    expect(Object.keys(report.verdicts)).toEqual(["2025-06-18", "2026-07-28"])
    expect(report.findings.filter((finding) => finding.status === "fail")).toEqual([])
    const page = readFileSync(html, "utf8")
    expect(page).toContain(`<h1>keyway-doctor: <code>${mcp}</code></h1>`)
    expect(page).not.toContain("<script")
  })

  it("a server that answers markup: the HTML report shows it as text", async () => {
    const html = join(out, "hostile.html")
    const ran = await doctor(["--html", html, hostile])
    expect(ran.code).toBe(1)
    const page = readFileSync(html, "utf8")
    expect(page).toContain("&lt;script&gt;alert(1)&lt;/script&gt;")
    expect(page).not.toContain("<script")
  })

  it("a closed port: exit 2, the MCP server could not be diagnosed", async () => {
    const closed = `http://127.0.0.1:${await freePort()}/mcp`
    const ran = await doctor(["--revision", "2025-11-25", closed])
    expect(ran.code).toBe(2)
    expect(lastLine(ran.stdout)).toBe("2025-11-25: could not run")
  })
})
