import { spawn } from "node:child_process"
import { mkdtemp, readFile, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Stack, startStack } from "@keyway/testing/stack"
import { afterEach, describe, expect, it } from "vitest"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))
const fakeBrowser = fileURLToPath(new URL("./support/browser.mjs", import.meta.url))

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const stack = async (options: Parameters<typeof startStack>[0] = {}): Promise<Stack> => {
  const started = await startStack(options)
  cleanups.push(started.close)
  return started
}

const home = async (): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), "keyway-mcp-test-"))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  return dir
}

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs keyway-mcp as a child process with a private HOME and config directory. */
const cli = (args: ReadonlyArray<string>, env: Record<string, string | undefined>): Promise<Run> =>
  new Promise((resolve, reject) => {
    const { XDG_CONFIG_HOME: _xdg, BROWSER: _browser, ...inherited } = process.env
    const child = spawn(process.execPath, [main, ...args], {
      env: Object.fromEntries(Object.entries({ ...inherited, ...env }).filter(([, v]) => v !== undefined)),
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

const readStore = async (file: string): Promise<Record<string, { access_token?: string; scope?: string }>> =>
  ((JSON.parse(await readFile(file, "utf8")) as { entries: Record<string, never> }).entries ?? {}) as Record<
    string,
    { access_token?: string; scope?: string }
  >

const mode = async (file: string): Promise<number> => (await stat(file)).mode & 0o777

describe("keyway-mcp list-tools", () => {
  it("authorizes headlessly, lists the tools, and keeps the tokens owner-only in $XDG_CONFIG_HOME/keyway", async () => {
    const s = await stack()
    const config = await home()
    const run = await cli(["list-tools", s.url, "--headless"], { XDG_CONFIG_HOME: config, HOME: config })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toBe(
      [
        "echo         Repeats the text it is given",
        "notes-write  Writes a note (needs notes:write)",
        "fail         Always fails",
        "",
      ].join("\n"),
    )
    const file = join(config, "keyway", "tokens.json")
    expect(await mode(file)).toBe(0o600)
    const stored = (await readStore(file))[`tokens:${s.url}`]
    expect(stored?.scope).toBe("tools:read offline_access")
    expect(run.stdout + run.stderr).not.toContain(stored?.access_token)
    expect(s.as.authorizations).toHaveLength(1)
    // The server speaks 2026-07-28, so the client uses the stateless wire: no initialize handshake.
    expect(s.requests.map((request) => request.method)).toEqual(["server/discover", "server/discover", "tools/list"])
    expect(s.requests.at(-1)?.protocolVersion).toBe("2026-07-28")
  })

  it("reuses the stored tokens on the next run without authorizing again", async () => {
    const s = await stack()
    const config = await home()
    const env = { XDG_CONFIG_HOME: config, HOME: config }
    expect((await cli(["list-tools", s.url, "--headless"], env)).code).toBe(0)
    const again = await cli(["list-tools", s.url, "--headless", "--json"], env)
    expect(again.code).toBe(0)
    expect((JSON.parse(again.stdout) as Array<{ name: string }>).map((tool) => tool.name)).toEqual([
      "echo",
      "notes-write",
      "fail",
    ])
    expect(s.as.authorizations).toHaveLength(1)
  })

  it("stores tokens under ~/.config/keyway when XDG_CONFIG_HOME is unset", async () => {
    const s = await stack()
    const dir = await home()
    const run = await cli(["list-tools", s.url, "--headless"], { HOME: dir })
    expect(run.code).toBe(0)
    expect(await mode(join(dir, ".config", "keyway", "tokens.json"))).toBe(0o600)
  })

  it("by default opens the browser ($BROWSER) and receives the redirect on a loopback listener", async () => {
    const s = await stack()
    const config = await home()
    const run = await cli(["list-tools", s.url], {
      XDG_CONFIG_HOME: config,
      HOME: config,
      BROWSER: `${process.execPath} ${fakeBrowser}`,
    })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain("echo         Repeats the text it is given\n")
    expect(run.stderr).toContain("Opening the authorization page in your browser. If it does not open, visit:\n")
    const redirect = URL.parse(s.as.authorizations[0]?.get("redirect_uri") ?? "")
    expect(redirect?.hostname).toBe("127.0.0.1")
    expect(redirect?.pathname).toBe("/callback")
    expect(Number(redirect?.port)).toBeGreaterThan(0)
  })
})

describe("keyway-mcp call", () => {
  it("calls a tool with JSON arguments and prints its text", async () => {
    const s = await stack()
    const config = await home()
    const run = await cli(["call", s.url, "echo", '{"text":"hello"}', "--headless"], {
      XDG_CONFIG_HOME: config,
      HOME: config,
    })
    expect(run.stderr).toBe("")
    expect(run.stdout).toBe("echo: hello\n")
    expect(run.code).toBe(0)
  })

  it("steps up when the tool needs more scope", async () => {
    const s = await stack()
    const config = await home()
    const run = await cli(["call", s.url, "notes-write", '{"note":"milk"}', "--headless"], {
      XDG_CONFIG_HOME: config,
      HOME: config,
    })
    expect(run.stdout).toBe("saved: milk\n")
    expect(run.code).toBe(0)
    const scopes = s.as.authorizations.map((params) => (params.get("scope") ?? "").split(" ").sort())
    expect(scopes).toEqual([
      ["offline_access", "tools:read"],
      ["notes:write", "offline_access", "tools:read"],
    ])
    expect(s.requests.some((request) => request.status === 403)).toBe(true)
  })

  it("prints --json results", async () => {
    const s = await stack()
    const config = await home()
    const run = await cli(["call", s.url, "echo", '{"text":"x"}', "--headless", "--json"], {
      XDG_CONFIG_HOME: config,
      HOME: config,
    })
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toMatchObject({ content: [{ type: "text", text: "echo: x" }] })
  })

  it("fails with exit code 1 and one line when the tool reports an error", async () => {
    const s = await stack()
    const config = await home()
    const run = await cli(["call", s.url, "fail", "--headless"], { XDG_CONFIG_HOME: config, HOME: config })
    expect(run.code).toBe(1)
    expect(run.stdout).toBe("")
    expect(run.stderr).toBe("keyway-mcp: the tool fail failed: the disk is full\n")
  })
})

describe("keyway-mcp login and logout", () => {
  it("login stores tokens (mode 0600) and logout removes them", async () => {
    const s = await stack()
    const config = await home()
    const env = { XDG_CONFIG_HOME: config, HOME: config }
    const file = join(config, "keyway", "tokens.json")
    const login = await cli(["login", s.url, "--headless"], env)
    expect(login.code).toBe(0)
    expect(login.stdout).toMatch(
      new RegExp(
        `^Logged in to ${s.url.replace(/[.]/g, "\\.")} \\(scope: tools:read notes:write offline_access; expires \\S+; refreshable\\)\\. Tokens saved in ${file.replace(/[.]/g, "\\.")}\\.\\n$`,
        "u",
      ),
    )
    expect(await mode(file)).toBe(0o600)
    expect(Object.keys(await readStore(file))).toContain(`tokens:${s.url}`)

    const logout = await cli(["logout", s.url], env)
    expect(logout.code).toBe(0)
    expect(logout.stdout).toBe(`Logged out of ${s.url}.\n`)
    expect(Object.keys(await readStore(file))).not.toContain(`tokens:${s.url}`)
    expect(await mode(file)).toBe(0o600)

    const again = await cli(["logout", s.url], env)
    expect(again.stdout).toBe(`No tokens were held for ${s.url}.\n`)
  })

  it("login --scope asks for those scopes (plus offline_access, which the server offers)", async () => {
    const s = await stack()
    const config = await home()
    const run = await cli(["login", s.url, "--headless", "--scope", "tools:read"], {
      XDG_CONFIG_HOME: config,
      HOME: config,
    })
    expect(run.code).toBe(0)
    expect(s.as.authorizations[0]?.get("scope")).toBe("tools:read offline_access")
  })
})

describe("keyway-mcp errors", () => {
  it("rejects an unknown command", async () => {
    const run = await cli(["frobnicate"], { HOME: await home() })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(
      'keyway-mcp: unknown command "frobnicate" (list-tools, call, login, logout) (see keyway-mcp --help)\n',
    )
  })

  it("rejects tool arguments that are not a JSON object", async () => {
    const run = await cli(["call", "http://127.0.0.1:9/mcp", "echo", "[1]"], { HOME: await home() })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe("keyway-mcp: the tool arguments must be a JSON object, got: [1] (see keyway-mcp --help)\n")
  })

  it("reports an unreachable server as one line", async () => {
    const s = await stack()
    const url = s.url
    await s.close()
    cleanups.pop()
    const run = await cli(["list-tools", url, "--headless"], { HOME: await home() })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(
      `keyway-mcp: authorization failed at request (network-error): could not reach ${url}: fetch failed; check the URL and that the server is running\n`,
    )
  })

  it("reports an authorization server that needs a person when run headless", async () => {
    const s = await stack({
      authorizeReply: () => ({ status: 200, headers: { "content-type": "text/html" }, body: "<form>log in</form>" }),
    })
    const run = await cli(["list-tools", s.url, "--headless"], { HOME: await home() })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(
      `keyway-mcp: authorization failed at authorization (interaction-required, HTTP 200): ${s.as.issuer}/authorize answered HTTP 200 instead of redirecting; the authorization server needs a person, use the browser user agent\n`,
    )
  })

  it("prints the usage with --help", async () => {
    const run = await cli(["--help"], { HOME: await home() })
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^usage: keyway-mcp <command> \[options\]\n/u)
  })
})
