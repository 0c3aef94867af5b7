import { writeFile } from "node:fs/promises"
import { createServer, type Server } from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type CliProcess, spawnCli, waitForStderr } from "@keyway/testing"
import { describe, expect, it } from "vitest"
import { ADMIN_USAGE } from "../src/admin.js"
import { USAGE } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { PASSWORD, RESOURCE, SCOPES } from "./support/flow.js"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))

const { defer, dir } = testCleanups()

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}): CliProcess => {
  const child = spawnCli(main, args, env)
  defer(child.kill)
  return child
}

const configFile = async (config: object): Promise<string> => {
  const file = join(await dir(), "keyway.json")
  await writeFile(file, JSON.stringify(config))
  return file
}

describe("keyway-authorization-server", () => {
  it("starts, answers metadata, logs readable events without secrets, and stops with 0 on SIGTERM", async () => {
    const dataDir = await dir()
    const file = await configFile({
      port: 9,
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const child = run(["--config", file, "--port", "0", "--data-dir", dataDir])
    const [, url, issuer] = await waitForStderr(child, /listening on (\S+), issuer (\S+);/)
    expect(issuer).toBe(url)
    const metadata = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as {
      issuer: string
    }
    expect(metadata.issuer).toBe(issuer)
    await waitForStderr(child, /GET \/\.well-known\/oauth-authorization-server 200 \d+ms\n/)
    child.process.kill("SIGTERM")
    expect(await child.exit).toBe(0)
    const lines = child.stderr.trimEnd().split("\n")
    // Every line starts with the time.
    for (const line of lines) expect(line).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /)
    const messages = lines.map((line) => line.slice(25))
    expect(messages).toEqual([
      'user "alice" has a clear-text password in the configuration; prefer passwordHash',
      `warning: DEVELOPMENT MODE: the authorization server runs with the insecure http issuer ${issuer}/. ` +
        "Never use this outside local development.",
      `database ${join(dataDir, "keyway.db")}`,
      `listening on ${url}, issuer ${issuer}; resources ${RESOURCE}; dynamic registration on`,
      expect.stringMatching(/^GET \/\.well-known\/oauth-authorization-server 200 \d+ms$/),
      "SIGTERM received, stopping",
      "stopped",
    ])
    expect(child.stderr).not.toContain(PASSWORD)
    expect(child.stdout).toBe("")
  })

  it("stops with 0 on SIGINT", async () => {
    const file = await configFile({
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const child = run(["--config", file, "--port", "0", "--data-dir", await dir()])
    await waitForStderr(child, /listening on /)
    child.process.kill("SIGINT")
    expect(await child.exit).toBe(0)
    expect(child.stderr).toMatch(/SIGINT received, stopping\n.* stopped\n$/)
  })

  it("prints the usage with --help, admin and its commands included", async () => {
    const child = run(["--help"])
    expect(await child.exit).toBe(0)
    expect(child.stdout).toBe(`${USAGE}\n`)
    const lines = child.stdout.split("\n")
    expect(lines.slice(0, 2)).toEqual([
      "usage: keyway-authorization-server --config <file.json> [options]",
      "       keyway-authorization-server admin --config <file.json> <command> [--json]",
    ])
    const admin = lines.indexOf(
      "admin commands (operator actions on the database, seen at once by running servers; admin --help for more):",
    )
    expect(lines.slice(admin + 1, admin + 5)).toEqual([
      "  clients list | show | add | update | remove | rotate-secret",
      "  grants list | revoke",
      "  keys list | rotate | retire | revoke",
      "  users list | add | passwd | remove",
    ])
    // Every command of `admin --help`, and no other, is listed.
    const listed = lines
      .slice(admin + 1, admin + 5)
      .flatMap((line) => {
        const [group = "", ...verbs] = line.trim().split(/ \|? ?/)
        return verbs.map((verb) => `${group} ${verb}`)
      })
      .sort()
    const documented = [
      ...new Set(
        [...ADMIN_USAGE.matchAll(/^ {2}(clients|grants|keys|users) ([a-z-]+)/gm)].map((m) => `${m[1]} ${m[2]}`),
      ),
    ].sort()
    expect(listed).toEqual(documented)
  })

  it("exits with 2 and the usage on a bad command line", async () => {
    const child = run(["--port", "80"])
    expect(await child.exit).toBe(2)
    expect(child.stderr).toBe(`keyway-authorization-server: --config <file.json> is required\n\n${USAGE}\n`)
  })

  it("exits with 2 naming the field of an invalid configuration", async () => {
    const file = await configFile({ users: [{ username: "alice" }], resources: [{ uri: RESOURCE, scopes: SCOPES }] })
    const child = run(["--config", file])
    expect(await child.exit).toBe(2)
    expect(child.stderr).toBe(
      `keyway-authorization-server: invalid configuration in ${file}:\n  users[0]: needs exactly one of password and passwordHash\n`,
    )
  })

  it("reads KEYWAY_SESSION_SECRET: exits with 2 when it is too short, without showing it", async () => {
    const file = await configFile({
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const child = run(["--config", file, "--port", "0", "--data-dir", await dir()], {
      KEYWAY_SESSION_SECRET: "too-short-secret",
    })
    expect(await child.exit).toBe(2)
    expect(child.stderr).toBe(
      "keyway-authorization-server: invalid configuration: KEYWAY_SESSION_SECRET must be at least 32 random characters (got 16)\n",
    )
  })

  /** The line the CLI ends with when it fails (after the timed log lines). */
  const lastLine = (child: CliProcess) => child.stderr.trimEnd().split("\n").at(-1)

  it("exits with 2 when the data directory serves another issuer, naming both and the fix", async () => {
    const dataDir = await dir()
    const file = await configFile({
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const first = run(["--config", file, "--port", "0", "--data-dir", dataDir, "--issuer", "http://localhost:9001"])
    await waitForStderr(first, /listening on /)
    first.process.kill("SIGTERM")
    expect(await first.exit).toBe(0)

    const second = run(["--config", file, "--port", "0", "--data-dir", dataDir, "--issuer", "http://localhost:9002"])
    expect(await second.exit).toBe(2)
    expect(lastLine(second)).toBe(
      "keyway-authorization-server: invalid configuration: storage: the database serves the issuer http://localhost:9001 " +
        "(its clients, signing keys and tokens are that issuer's), not http://localhost:9002: give http://localhost:9002 " +
        "a database of its own (another data directory, SQLite file, or PostgreSQL database or schema), or, to move the " +
        "database to http://localhost:9002, start once with previousIssuer set to http://localhost:9001",
    )
    expect(second.stderr).not.toContain("listening on")

    // The documented move: previousIssuer in the file, for one start (or more: once moved it changes nothing).
    const moving = await configFile({
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
      previousIssuer: "http://localhost:9001",
    })
    const third = run(["--config", moving, "--port", "0", "--data-dir", dataDir, "--issuer", "http://localhost:9002"])
    await waitForStderr(third, /listening on \S+, issuer http:\/\/localhost:9002;/)
    third.process.kill("SIGTERM")
    expect(await third.exit).toBe(0)
  }, 90_000)

  it.each([
    [
      "a client grant type whose extension is not configured",
      {
        clients: [
          { clientId: "nightly", clientSecret: "s".repeat(32), redirectUris: [], grantTypes: ["client_credentials"] },
        ],
      },
      "clients[0].grantTypes: client_credentials needs extensions.clientCredentials, which is not configured ({} turns it on with its defaults)",
    ],
    [
      "a user password under 15 characters",
      { users: [{ username: "alice", password: "fourteen chars" }] },
      "users[0].password: must be at least 15 characters long (NIST SP 800-63B-4 §3.1.1.2, a password used alone); a few unrelated words make one easy to remember",
    ],
  ])("exits with 2 for %s, naming the field", async (_name, fields, problem) => {
    const file = await configFile({
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
      ...fields,
    })
    const child = run(["--config", file, "--port", "0", "--data-dir", await dir()])
    expect(await child.exit).toBe(2)
    expect(child.stderr).toBe(`keyway-authorization-server: invalid configuration in ${file}:\n  ${problem}\n`)
  })

  it("exits with 1 when the metrics port is taken: the environment, not the configuration", async () => {
    const occupied: Server = createServer()
    await new Promise<void>((resolve) => occupied.listen(0, "127.0.0.1", resolve))
    defer(() => new Promise<void>((resolve) => occupied.close(() => resolve())))
    const address = occupied.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    const file = await configFile({
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
      metrics: { port },
    })
    const child = run(["--config", file, "--port", "0", "--data-dir", await dir()])
    expect(await child.exit).toBe(1)
    expect(lastLine(child)).toBe(
      `keyway-authorization-server: metrics: cannot listen: listen EADDRINUSE: address already in use 127.0.0.1:${port}`,
    )
  })

  it("exits with 1 when the port is taken", async () => {
    const file = await configFile({
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    })
    const first = run(["--config", file, "--port", "0", "--data-dir", await dir()])
    const [, port] = await waitForStderr(first, /listening on http:\/\/127\.0\.0\.1:(\d+),/)
    const second = run(["--config", file, "--port", port ?? "", "--data-dir", await dir()])
    expect(await second.exit).toBe(1)
    expect(second.stderr).toMatch(
      new RegExp(`keyway-authorization-server: listen EADDRINUSE: address already in use 127\\.0\\.0\\.1:${port}\\n$`),
    )
  })
})
