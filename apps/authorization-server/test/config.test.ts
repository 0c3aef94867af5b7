import { writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import {
  type AppConfig,
  ConfigFileError,
  loadConfig,
  parseCommandLine,
  parseConfig,
  readConfigFile,
  startAuthorizationServer,
  USAGE,
  UsageError,
} from "../src/index.js"
import { RESOURCE, SCOPES, tempDir } from "./support/flow.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const dir = async () => {
  const d = await tempDir()
  cleanups.push(d.remove)
  return d.path
}

const minimal = {
  users: [{ username: "alice", password: "pw" }],
  resources: [{ uri: RESOURCE, scopes: SCOPES }],
}

const problems = (value: unknown): string => {
  try {
    parseConfig(value, "test.json")
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigFileError)
    return (e as Error).message
  }
  throw new Error("the configuration was accepted")
}

describe("parseConfig", () => {
  it("accepts a minimal configuration as is", () => {
    expect(parseConfig(minimal, "test.json")).toEqual(minimal)
  })

  it.each([
    ["not an object", [], "must be a JSON object"],
    ["no users, no resources", {}, "users: is required\n  resources: is required"],
    ["empty resources", { ...minimal, resources: [] }, "resources: must name at least one MCP server"],
    ["unknown top-level field", { ...minimal, prot: 80 }, 'unknown field "prot"'],
    [
      "unknown nested fields",
      { ...minimal, users: [{ username: "a", password: "b", pass: 1, role: "x" }] },
      'users[0]: unknown fields "pass", "role"',
    ],
    [
      "user without a password",
      { ...minimal, users: [{ username: "alice" }] },
      "users[0]: needs exactly one of password and passwordHash",
    ],
    [
      "user with both",
      { ...minimal, users: [{ username: "alice", password: "a", passwordHash: "b" }] },
      "users[0]: needs exactly one of password and passwordHash",
    ],
    [
      "empty username",
      { ...minimal, users: [{ username: "", password: "a" }] },
      "users[0].username: must not be empty",
    ],
    ["port as a string", { ...minimal, port: "9000" }, "port: must be a number"],
    ["port too large", { ...minimal, port: 70000 }, "port: must be from 0 to 65535"],
    ["fractional port", { ...minimal, port: 1.5 }, "port: must be a whole number"],
    [
      "bad auth method",
      { ...minimal, clients: [{ clientId: "c", redirectUris: [], tokenEndpointAuthMethod: "basic" }] },
      "clients[0].tokenEndpointAuthMethod: must be one of none, client_secret_basic, client_secret_post, private_key_jwt",
    ],
    [
      "client without redirect URIs",
      { ...minimal, clients: [{ clientId: "c" }] },
      "clients[0].redirectUris: is required",
    ],
    [
      "scope description not a string",
      { ...minimal, resources: [{ uri: RESOURCE, scopes: { "notes:read": 1 } }] },
      'resources[0].scopes["notes:read"]: must be a string',
    ],
    ["registration not a boolean", { ...minimal, registration: "yes" }, "registration: must be true or false"],
    [
      "code lifetime over 60 s",
      { ...minimal, lifetimes: { authorizationCode: 120 } },
      "lifetimes.authorizationCode: must be at most 60",
    ],
  ])("refuses %s, naming the field", (_name, value, message) => {
    expect(problems(value)).toBe(`invalid configuration in test.json:\n  ${message}`)
  })
})

describe("readConfigFile", () => {
  it("accepts the example configuration", async () => {
    const file = fileURLToPath(new URL("../keyway.example.json", import.meta.url))
    const config = await readConfigFile(file)
    expect(config.users.map((u) => u.username)).toEqual(["alice"])
    expect(config.resources.map((r) => Object.keys(r.scopes))).toEqual([["notes:read", "notes:write"]])
    expect(config.dataDir).toBe(join(dirname(file), ".keyway-data"))
  })

  it("reports a missing file", async () => {
    const file = join(await dir(), "missing.json")
    await expect(readConfigFile(file)).rejects.toThrow(new ConfigFileError(`configuration file ${file} does not exist`))
  })

  it("reports invalid JSON with the parser's reason", async () => {
    const file = join(await dir(), "bad.json")
    await writeFile(file, "{ users: [] }")
    let reason = ""
    try {
      JSON.parse("{ users: [] }")
    } catch (e) {
      reason = (e as Error).message
    }
    await expect(readConfigFile(file)).rejects.toThrow(
      new ConfigFileError(`configuration file ${file} is not valid JSON: ${reason}`),
    )
  })

  it("names the file in validation errors", async () => {
    const file = join(await dir(), "config.json")
    await writeFile(file, JSON.stringify({ ...minimal, port: -1 }))
    await expect(readConfigFile(file)).rejects.toThrow(
      new ConfigFileError(`invalid configuration in ${file}:\n  port: must be from 0 to 65535`),
    )
  })

  it("takes relative dataDir and database from the file's directory", async () => {
    const d = await dir()
    const file = join(d, "config.json")
    await writeFile(file, JSON.stringify({ ...minimal, dataDir: "data", database: "db/as.db" }))
    const config = await readConfigFile(file)
    expect(config.dataDir).toBe(join(d, "data"))
    expect(config.database).toBe(join(d, "db/as.db"))
  })
})

describe("parseCommandLine", () => {
  it.each([
    [["--port"], "Option '--port <value>' argument missing"],
    [["--config", "c.json", "--verbose"], "Unknown option '--verbose'"],
    [["--config", "c.json", "extra"], "Unexpected argument 'extra'. This command does not take positional arguments"],
    [[], "--config <file.json> is required"],
    [["--config", ""], "--config must not be empty"],
    [["--config", "c.json", "--port", "http"], '--port must be a whole number from 0 to 65535, got "http"'],
    [["--config", "c.json", "--port", "65536"], '--port must be a whole number from 0 to 65535, got "65536"'],
    [["--config", "c.json", "--issuer", "ftp://x"], '--issuer must be an http(s) URL, got "ftp://x"'],
  ])("refuses %j", (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(new UsageError(message))
  })

  it("--help wins over everything else", () => {
    expect(parseCommandLine(["--port", "x", "-h"])).toEqual({ help: true })
  })

  it("loadConfig refuses --help, with the usage as the message", async () => {
    await expect(loadConfig(["--help"])).rejects.toThrow(new UsageError(USAGE))
  })
})

describe("loadConfig", () => {
  const write = async (config: object) => {
    const d = await dir()
    const file = join(d, "keyway.json")
    await writeFile(file, JSON.stringify(config))
    return { d, file }
  }

  it("reads the file when no flag overrides it", async () => {
    const { d, file } = await write({ ...minimal, port: 9001, host: "::1", dataDir: "state" })
    expect(await loadConfig(["--config", file])).toEqual({
      ...minimal,
      port: 9001,
      host: "::1",
      dataDir: join(d, "state"),
    })
  })

  it("flags override the file", async () => {
    const { file } = await write({ ...minimal, port: 9001, host: "::1", issuer: "https://a.example", dataDir: "x" })
    const cwdDir = await dir()
    const config = await loadConfig([
      "--config",
      file,
      "--port",
      "0",
      "--host",
      "127.0.0.1",
      "--issuer",
      "https://b.example",
      "--data-dir",
      cwdDir,
    ])
    const expected: AppConfig = { ...minimal, port: 0, host: "127.0.0.1", issuer: "https://b.example", dataDir: cwdDir }
    expect(config).toEqual(expected)
  })

  it("--data-dir replaces a database path from the file; --database replaces both", async () => {
    const { d, file } = await write({ ...minimal, database: "file.db" })
    const other = await dir()
    expect(await loadConfig(["--config", file, "--data-dir", other])).toEqual({ ...minimal, dataDir: other })
    expect(await loadConfig(["--config", file])).toEqual({ ...minimal, database: join(d, "file.db") })
    expect(await loadConfig(["--config", file, "--database", join(other, "x.db")])).toEqual({
      ...minimal,
      database: join(other, "x.db"),
    })
  })
})

describe("startAuthorizationServer refuses", () => {
  it("an object that is not a valid configuration", async () => {
    await expect(startAuthorizationServer({ ...minimal, port: -5 }, { log: () => undefined })).rejects.toThrow(
      new ConfigFileError("invalid configuration in the configuration:\n  port: must be from 0 to 65535"),
    )
  })

  it("a non-loopback host without an issuer", async () => {
    await expect(
      startAuthorizationServer({ ...minimal, host: "0.0.0.0", dataDir: await dir() }, { log: () => undefined }),
    ).rejects.toThrow(
      new ConfigFileError(
        "invalid configuration: issuer is required when host (0.0.0.0) is not a loopback address; set an https issuer",
      ),
    )
  })

  it("an http issuer on a non-loopback host, with the library's reason", async () => {
    await expect(
      startAuthorizationServer(
        { ...minimal, port: 0, issuer: "http://auth.example.com", dataDir: await dir() },
        { log: () => undefined },
      ),
    ).rejects.toThrow(
      new ConfigFileError(
        "invalid configuration: issuer must use https (http is only possible on a loopback host in development mode)",
      ),
    )
  })

  it("a resource URI that is not canonical", async () => {
    const error = await startAuthorizationServer(
      { ...minimal, port: 0, resources: [{ uri: "not a url", scopes: {} }], dataDir: await dir() },
      { log: () => undefined },
    ).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigFileError)
    expect((error as Error).message).toMatch(
      /^invalid configuration: resource "not a url" is not a valid canonical URI: /,
    )
  })
})
