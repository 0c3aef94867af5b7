/**
 * keyway-mcp with the device authorization grant (RFC 8628), end to end: the command line as a child process,
 * oidc-provider with its device flow as the authorization server (its pages walked by a person over HTTP), and an
 * MCP server of the official SDK behind Keyway's resource server, which accepts the provider's JWT access tokens.
 * The client polls on the wall clock here (another process): the provider states no interval, so the first poll
 * comes after the default 5 seconds.
 */
import { generateKeyPairSync } from "node:crypto"
import { mkdtemp, rm } from "node:fs/promises"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { type CliProcess, closing, listening, spawnCli, visitor, waitForStderr } from "@keyway/testing"
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server"
import Provider from "oidc-provider"
import { afterEach, describe, expect, it } from "vitest"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))
const fakeBrowser = fileURLToPath(new URL("./support/browser.mjs", import.meta.url))

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

/** oidc-provider with the device flow and dynamic registration, and an MCP server whose tokens it issues. */
const start = async () => {
  const asServer = createServer()
  const issuer = await listening(asServer)
  const rsServer = createServer()
  const resource = `${await listening(rsServer)}/mcp`
  cleanups.push(
    () => closing(asServer),
    () => closing(rsServer),
  )
  const signing = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" })
  const provider = new Provider(issuer, {
    cookies: { keys: ["a test key that is long enough to sign the cookies"] },
    scopes: ["openid", "offline_access", "tools:read"],
    features: {
      deviceFlow: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => ({
          scope: "tools:read",
          audience: indicator,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "ES256" } },
        }),
      },
    },
    jwks: { keys: [{ ...signing, alg: "ES256", use: "sig", kid: "-cli" }] },
    // Its one key is ES256: registered clients get ID tokens signed with it.
    clientDefaults: { id_token_signed_response_alg: "ES256" },
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  })
  asServer.on("request", provider.callback())
  const guard = createProtectedResource({
    resource,
    authorizationServers: [issuer],
    verifier: jwt({ jwksUri: `${issuer}/jwks` }),
    scopesSupported: ["tools:read"],
    requiredScopes: ["tools:read"],
  })
  const mcp = createMcpHandler(() => {
    const server = new McpServer({ name: "device-test", version: "1.0.0" })
    server.registerTool("whoami", { description: "Names the user the token is for" }, async () => ({
      content: [{ type: "text", text: "alice" }],
    }))
    return server
  })
  cleanups.push(
    () => guard.close(),
    () => mcp.close(),
  )
  rsServer.on("request", toNodeListener(guard.protect((request) => mcp.fetch(request))))
  return { issuer, resource }
}

/** keyway-mcp with a private config directory; `env` adds to (or, with "", blanks) the inherited environment. */
const keywayMcp = async (args: ReadonlyArray<string>, env: Record<string, string>): Promise<CliProcess> => {
  const dir = await mkdtemp(join(tmpdir(), "keyway-mcp-device-"))
  const child = spawnCli(main, args, { XDG_CONFIG_HOME: dir, HOME: dir, ...env })
  cleanups.push(async () => {
    await child.kill()
    await rm(dir, { recursive: true, force: true })
  })
  return child
}

/** The URI and the code keyway-mcp printed. */
const shown = async (child: CliProcess) => {
  const [, uri, code] = await waitForStderr(child, /visit (\S+) and enter the code (\S+)\n/u)
  return { uri: uri ?? "", code: code ?? "" }
}

describe("keyway-mcp --device", () => {
  it("prints the URI and the code on stderr, and lists the tools once the user approves on another device", async () => {
    const s = await start()
    const child = await keywayMcp(["list-tools", s.resource, "--device"], {
      BROWSER: `${process.execPath} ${fakeBrowser}`,
    })
    const { uri, code } = await shown(child)
    expect(uri).toBe(`${s.issuer}/device`)
    const alice = visitor()
    const confirm = await alice.submit(await alice.go(uri), { user_code: code })
    const consent = await alice.submit(await alice.submit(confirm, {}), { login: "alice", password: "-any" })
    expect(alice.heading(await alice.submit(consent, {}))).toBe("Sign-in Success")
    expect(await child.exit).toBe(0)
    expect(child.stdout).toBe("whoami  Names the user the token is for\n")
    expect(child.stderr).toBe(
      [
        `To authorize, visit ${s.issuer}/device and enter the code ${code}`,
        `or open ${s.issuer}/device?user_code=${code}`,
        "(the code expires in 10 minutes)",
        "",
      ].join("\n"),
    )
  })

  it("is chosen where no browser can open, says so, and fails with one line when the user aborts", async () => {
    const s = await start()
    const child = await keywayMcp(["list-tools", s.resource], { DISPLAY: "", WAYLAND_DISPLAY: "", BROWSER: "" })
    const { code } = await shown(child)
    const alice = visitor()
    const confirm = await alice.submit(await alice.go(`${s.issuer}/device?user_code=${code}`), {})
    await alice.submit(confirm, { abort: "yes" })
    expect(await child.exit).toBe(1)
    expect(child.stdout).toBe("")
    expect(child.stderr).toBe(
      [
        "No browser can open here (no display (no DISPLAY or WAYLAND_DISPLAY)): authorize on another device.",
        `To authorize, visit ${s.issuer}/device and enter the code ${code}`,
        `or open ${s.issuer}/device?user_code=${code}`,
        "(the code expires in 10 minutes)",
        `keyway-mcp: authorization failed at token (authorization-error, access_denied): the user denied the device authorization`,
        "",
      ].join("\n"),
    )
  })

  it("refuses --device with --headless", async () => {
    const child = await keywayMcp(["list-tools", "http://127.0.0.1:9/mcp", "--device", "--headless"], {})
    expect(await child.exit).toBe(1)
    expect(child.stderr).toBe(
      "keyway-mcp: --headless and --device are two ways to authorize: give one of them (see keyway-mcp --help)\n",
    )
  })
})
