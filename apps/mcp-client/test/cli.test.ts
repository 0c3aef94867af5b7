import { spawn } from "node:child_process"
import { mkdtemp, readFile, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { listen, type Reply } from "@keyway/testing/peers"
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
    // The peer publishes no revocation endpoint: the tokens are forgotten here all the same, and the user told so.
    expect(logout.stderr).toBe(
      `keyway-mcp: the tokens could not be revoked at ${s.as.issuer}: the authorization server ${s.as.issuer} publishes no revocation_endpoint in its metadata, so its tokens cannot be revoked there (RFC 7009); they stay valid until they expire\n`,
    )
    expect(logout.stdout).toBe(
      `Logged out of ${s.url}: the tokens were forgotten here, but not revoked at ${s.as.issuer}; they stay valid there until they expire.\n`,
    )
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

/**
 * A revocation endpoint (RFC 7009) beside the stack's authorization server: records each request, revokes the access
 * token it names at the peer, and answers 200; `reply` answers instead when given.
 */
const revocationEndpoint = async (reply?: () => Reply) => {
  const requests: Array<{ params: Record<string, string>; authorization: string | undefined }> = []
  let stackOf: Stack | undefined
  const server = await listen((request, _url, body) => {
    const params = Object.fromEntries(new URLSearchParams(body))
    requests.push({ params, authorization: request.headers.authorization })
    if (reply !== undefined) return reply()
    const issued = stackOf?.as.tokens.get(params.token ?? "")
    if (issued !== undefined) issued.revoked = true
    return { status: 200, headers: { "cache-control": "no-store" } }
  })
  cleanups.push(server.close)
  return {
    url: `${server.origin}/revoke`,
    requests,
    attach: (s: Stack) => {
      stackOf = s
    },
  }
}

describe("keyway-mcp logout revokes", () => {
  it("the refresh token, then the access token, at the authorization server, then forgets them", async () => {
    const endpoint = await revocationEndpoint()
    const s = await stack({ metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }) })
    endpoint.attach(s)
    const config = await home()
    const env = { XDG_CONFIG_HOME: config, HOME: config }
    const file = join(config, "keyway", "tokens.json")
    expect((await cli(["login", s.url, "--headless"], env)).code).toBe(0)
    const held = (await readStore(file))[`tokens:${s.url}`] as { access_token: string; refresh_token: string }
    const clientId = s.as.authorizations[0]?.get("client_id")

    const logout = await cli(["logout", s.url], env)
    expect(logout.stderr).toBe("")
    expect(logout.stdout).toBe(
      `Logged out of ${s.url}: the tokens were revoked at ${s.as.issuer} and forgotten here.\n`,
    )
    expect(logout.code).toBe(0)
    expect(endpoint.requests).toEqual([
      {
        params: { token: held.refresh_token, token_type_hint: "refresh_token", client_id: clientId },
        authorization: undefined,
      },
      {
        params: { token: held.access_token, token_type_hint: "access_token", client_id: clientId },
        authorization: undefined,
      },
    ])
    expect(s.as.tokens.get(held.access_token)?.revoked).toBe(true)
    expect(Object.keys(await readStore(file))).not.toContain(`tokens:${s.url}`)
  })

  it("forgets the tokens and says so when the authorization server refuses the revocation", async () => {
    const endpoint = await revocationEndpoint(() => ({
      status: 503,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ error: "temporarily_unavailable", error_description: "try again later" }),
    }))
    const s = await stack({ metadata: (m) => ({ ...m, revocation_endpoint: endpoint.url }) })
    const config = await home()
    const env = { XDG_CONFIG_HOME: config, HOME: config }
    expect((await cli(["login", s.url, "--headless"], env)).code).toBe(0)
    const logout = await cli(["logout", s.url], env)
    expect(logout.code).toBe(0)
    expect(logout.stderr).toBe(
      `keyway-mcp: the tokens could not be revoked at ${s.as.issuer}: the revocation endpoint ${endpoint.url} answered HTTP 503 temporarily_unavailable: try again later when revoking the refresh token\n`,
    )
    expect(logout.stdout).toBe(
      `Logged out of ${s.url}: the tokens were forgotten here, but not revoked at ${s.as.issuer}; they stay valid there until they expire.\n`,
    )
    expect(Object.keys(await readStore(join(config, "keyway", "tokens.json")))).not.toContain(`tokens:${s.url}`)
  })
})

describe("keyway-mcp registers once", () => {
  it("and reuses the registration kept in the token file: login, logout, then through the browser", async () => {
    const s = await stack()
    const config = await home()
    const env = { XDG_CONFIG_HOME: config, HOME: config }
    expect((await cli(["login", s.url, "--headless"], env)).code).toBe(0)
    expect((await cli(["logout", s.url], env)).code).toBe(0)
    // The browser's loopback listener has another port each time: the registration covers it (RFC 8252 §7.3).
    const browsed = await cli(["list-tools", s.url], { ...env, BROWSER: `${process.execPath} ${fakeBrowser}` })
    expect(browsed.code).toBe(0)
    expect(s.as.authorizations).toHaveLength(2)
    expect(s.as.registrations).toHaveLength(1)
    const clientIds = new Set(s.as.authorizations.map((params) => params.get("client_id")))
    expect(clientIds.size).toBe(1)
  })
})

describe("keyway-mcp with a pre-registered client", () => {
  const CALLBACK = "http://127.0.0.1/callback"
  const SECRET = "s3cret: from the operator"
  // RFC 6749 §2.3.1: the ID and the secret form-encoded, then Base64.
  const BASIC = `Basic ${btoa("-keyway-cli:s3cret%3A+from+the+operator")}`

  const confidential = () =>
    stack({
      clients: [
        {
          client_id: "-keyway-cli",
          client_secret: SECRET,
          token_endpoint_auth_method: "client_secret_basic",
          redirect_uris: [CALLBACK],
        },
      ],
    })

  it("uses it instead of registering, with the secret from $KEYWAY_MCP_CLIENT_SECRET", async () => {
    const s = await confidential()
    const config = await home()
    const run = await cli(["list-tools", s.url, "--headless", "--client-id=-keyway-cli", "--issuer", s.as.issuer], {
      XDG_CONFIG_HOME: config,
      HOME: config,
      KEYWAY_MCP_CLIENT_SECRET: SECRET,
    })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(s.as.registrations).toHaveLength(0)
    expect(s.as.authorizations[0]?.get("client_id")).toBe("-keyway-cli")
    expect(s.as.tokenRequests[0]?.authorization).toBe(
      `Basic ${btoa(`-keyway-cli:${encodeURIComponent(SECRET).replace(/%20/gu, "+")}`)}`,
    )
  })

  it("takes the secret from --client-secret too, and a public client without one", async () => {
    const s = await stack({
      clients: [
        {
          client_id: "-keyway-cli",
          client_secret: SECRET,
          token_endpoint_auth_method: "client_secret_basic",
          redirect_uris: [CALLBACK],
        },
        { client_id: "keyway-public", token_endpoint_auth_method: "none", redirect_uris: [CALLBACK] },
      ],
    })
    const config = await home()
    const flagged = await cli(
      ["login", s.url, "--headless", "--client-id=-keyway-cli", "--client-secret", SECRET, "--issuer", s.as.issuer],
      { XDG_CONFIG_HOME: config, HOME: config },
    )
    expect(flagged.code).toBe(0)
    expect(s.as.tokenRequests[0]?.authorization).toBe(BASIC)
    const other = await home()
    const open = await cli(["login", s.url, "--headless", "--client-id", "keyway-public", "--issuer", s.as.issuer], {
      XDG_CONFIG_HOME: other,
      HOME: other,
    })
    expect(open.code).toBe(0)
    expect(s.as.tokenRequests[1]?.params.get("client_id")).toBe("keyway-public")
    expect(s.as.tokenRequests[1]?.authorization).toBeUndefined()
    expect(s.as.registrations).toHaveLength(0)
  })

  it("refuses an issuer the MCP server does not name, rather than registering there", async () => {
    const s = await confidential()
    const run = await cli(
      ["list-tools", s.url, "--headless", "--client-id=-keyway-cli", "--issuer", "https://as.example.com"],
      { HOME: await home(), KEYWAY_MCP_CLIENT_SECRET: SECRET },
    )
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(
      `keyway-mcp: authorization failed at protected-resource-metadata (invalid-input): the authorization server chooser returned "https://as.example.com", which is not one of ${s.as.issuer}\n`,
    )
    expect(s.as.registrations).toHaveLength(0)
  })

  it.each([
    [
      ["--client-id", "abc"],
      "--client-id needs --issuer, the authorization server the client is registered with (a client is never used with another)",
    ],
    [["--client-secret", "s"], "--client-secret goes with --client-id"],
    [["--issuer", "https://as.example.com"], "--issuer goes with --client-id"],
    [["--client-id", "abc", "--issuer", "as.example.com"], '--issuer "as.example.com" is not an http(s) URL'],
  ])("refuses %j with a usage error", async (flags, message) => {
    const run = await cli(["list-tools", "http://127.0.0.1:9/mcp", ...flags], { HOME: await home() })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(`keyway-mcp: ${message} (see keyway-mcp --help)\n`)
  })

  it("asks for --client-id=<id> when the ID begins with a dash", async () => {
    const run = await cli(["list-tools", "http://127.0.0.1:9/mcp", "--client-id", "-keyway-cli"], {
      HOME: await home(),
    })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(
      "keyway-mcp: Option '--client-id' argument is ambiguous. Did you forget to specify the option argument for '--client-id'? To specify an option argument starting with a dash use '--client-id=-XYZ'. (see keyway-mcp --help)\n",
    )
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
