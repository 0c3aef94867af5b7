/**
 * keyway-mcp --device against Keyway's own servers: the authorization server app (SQLite in a temporary directory)
 * with the device authorization grant on, and the notes MCP server app. The user's part is done over HTTP on the
 * verification page by a cookie-keeping visitor. Both servers and the command line run on the wall clock (the command
 * line is another process): the authorization server's `interval` is 1 second, so the polls do not wait the default 5.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { startAuthorizationServer } from "@keyway/app-authorization-server"
import { NOTE_SCOPES, startMcpServer } from "@keyway/app-mcp-server"
import { type CliProcess, freePort, spawnCli, type VisitedPage, visitor, waitForStderr } from "@keyway/testing"
import { afterEach, describe, expect, it } from "vitest"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))
const PASSWORD = "-correct horse battery staple"
const CLIENT_ID = "-terminal"
const DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

/** The two apps on loopback: `-terminal` is a public client for the device grant; the notes server trusts the issuer. */
const start = async () => {
  const [asPort, mcpPort] = [await freePort(), await freePort()]
  const dataDir = await mkdtemp(join(tmpdir(), "keyway-mcp-device-keyway-"))
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }))
  const resource = `http://127.0.0.1:${mcpPort}/mcp`
  const as = await startAuthorizationServer(
    {
      port: asPort,
      dataDir,
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: resource, name: "Keyway notes", scopes: NOTE_SCOPES }],
      clients: [
        {
          clientId: CLIENT_ID,
          clientName: "Terminal agent",
          redirectUris: [],
          grantTypes: [DEVICE_CODE, "refresh_token"],
        },
      ],
      extensions: { deviceAuthorization: { interval: 1 } },
    },
    { log: () => undefined },
  )
  cleanups.push(() => as.close())
  const mcp = await startMcpServer({ authorizationServer: as.issuer, port: mcpPort, log: () => undefined })
  cleanups.push(() => mcp.close())
  return { issuer: as.issuer, resource: mcp.url }
}

/** keyway-mcp with a private config directory, the pre-registered client and --device. */
const keywayMcp = async (args: ReadonlyArray<string>, issuer: string, config: string): Promise<CliProcess> => {
  const child = spawnCli(
    main,
    [
      ...args,
      "--device",
      // A client ID beginning with "-" is given with "=", as node's argument parser wants.
      `--client-id=${CLIENT_ID}`,
      "--issuer",
      issuer,
    ],
    {
      XDG_CONFIG_HOME: config,
      HOME: config,
    },
  )
  cleanups.push(child.kill)
  return child
}

/** The URI and the code keyway-mcp printed (the `nth` time, from 1). */
const shown = async (child: CliProcess, nth = 1) => {
  const pattern = /visit (\S+) and enter the code (\S+)\n/gu
  await waitForStderr(child, new RegExp(`(?:[\\s\\S]*?visit \\S+ and enter the code \\S+\\n){${nth}}`, "u"))
  const [, uri, code] = [...child.stderr.matchAll(pattern)][nth - 1] ?? []
  return { uri: uri ?? "", code: code ?? "" }
}

const finished = (page: VisitedPage) => /<h1 data-finished="(\w+)">/u.exec(page.html)?.[1]

describe("keyway-mcp --device with Keyway's authorization server and MCP server", () => {
  it("lists the tools once alice enters the code on the verification page, and steps up with a second code", async () => {
    const { issuer, resource } = await start()
    const config = await mkdtemp(join(tmpdir(), "keyway-mcp-device-home-"))
    cleanups.push(() => rm(config, { recursive: true, force: true }))

    const list = await keywayMcp(["list-tools", resource], issuer, config)
    const first = await shown(list)
    expect(first.uri).toBe(`${issuer}/device`)
    expect(first.code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/u)
    const alice = visitor()
    const login = await alice.go(first.uri)
    expect(alice.heading(login)).toBe("Sign in")
    const entry = await alice.submit(login, { username: "alice", password: PASSWORD })
    expect(alice.heading(entry)).toBe("Connect a device")
    // Typed as a person might: lower case, no dash.
    const consent = await alice.submit(entry, { user_code: first.code.replace("-", "").toLowerCase() })
    expect(consent.html).toContain("<span data-client-name>Terminal agent</span>")
    expect(consent.html).toContain("<strong>This request started on another device.</strong>")
    expect(consent.html).toContain('<li data-scope="notes:read">')
    expect(finished(await alice.submit(consent, { decision: "approve" }))).toBe("approved")
    expect(await list.exit).toBe(0)
    expect(list.stdout.split("\n").map((line) => line.split(" ")[0])).toEqual([
      "list_notes",
      "read_note",
      "write_note",
      "delete_note",
      "",
    ])
    expect(list.stderr).toBe(
      [
        `To authorize, visit ${issuer}/device and enter the code ${first.code}`,
        `or open ${issuer}/device?user_code=${first.code}`,
        "(the code expires in 10 minutes)",
        "",
      ].join("\n"),
    )

    // write_note needs notes:write: the stored token answers 403, and a second device authorization asks for both.
    const write = await keywayMcp(
      ["call", resource, "write_note", '{"title":"-t","text":"from the device"}'],
      issuer,
      config,
    )
    const second = await shown(write)
    expect(second.code).not.toBe(first.code)
    const again = await alice.go(`${issuer}/device?user_code=${second.code}`)
    expect(alice.heading(again)).toBe("Connect a device")
    // The page prefills the code from the complete URI; the visitor sends only hidden fields, so it "keeps" it here.
    expect(again.html).toContain(`value="${second.code}"`)
    const wider = await alice.submit(again, { user_code: second.code })
    expect(wider.html).toContain('<li data-scope="notes:read">')
    expect(wider.html).toContain('<li data-scope="notes:write">')
    expect(finished(await alice.submit(wider, { decision: "approve" }))).toBe("approved")
    expect(await write.exit).toBe(0)
    expect(write.stdout).toBe("Saved note #1.\n")
  })
})
