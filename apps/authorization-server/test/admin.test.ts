import { spawn } from "node:child_process"
import { readFile, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Signing, Storage } from "@keyway/authorization-server"
import { ClientAuth } from "@keyway/core"
import { type PostgresServer, spawnCli, startPostgres, waitForStderr } from "@keyway/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_USAGE, parseAdminArgs, runAdmin } from "../src/admin.js"
import { type AppConfig, startAuthorizationServer } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { codeFlow, PASSWORD, REDIRECT_URI, RESOURCE, refresh, SCOPES } from "./support/flow.js"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))

const { defer, dir } = testCleanups()

let postgres: PostgresServer
beforeAll(async () => {
  postgres = await startPostgres()
}, 300_000)
afterAll(() => postgres?.stop())

/**
 * Runs `admin` with the configuration file in this process, as the command line does (see {@link adminProcess});
 * its exit code and output.
 */
const admin = (file: string, ...args: Array<string>) => runAdmin(["--config", file, ...args])

/** Runs `admin` with the configuration file as a separate process, through the built command line. */
const adminProcess = async (file: string, ...args: Array<string>) => {
  const child = spawnCli(main, ["admin", "--config", file, ...args])
  defer(child.kill)
  const code = await child.exit
  return { code, stdout: child.stdout, stderr: child.stderr }
}

/** `admin ... --json`, which must succeed; its parsed output. */
const adminJson = async <T>(file: string, ...args: Array<string>): Promise<T> => {
  const result = await admin(file, "--json", ...args)
  if (result.code !== 0) throw new Error(`admin ${args.join(" ")} exited ${result.code}: ${result.stderr}`)
  return JSON.parse(result.stdout) as T
}

/** `admin clients add` of a public client (PKCE only) redirecting to REDIRECT_URI. */
const addPublicClient = (file: string) =>
  adminJson<{ client_id: string }>(file, "clients", "add", "--auth-method", "none", "--redirect-uri", REDIRECT_URI)

const introspect = (issuer: string, clientId: string, secret: string, token: string) =>
  fetch(`${issuer}/introspect`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: ClientAuth.encodeClientSecretBasic(clientId, secret),
    },
    body: new URLSearchParams({ token }),
  })

/** The `kid` of a JWT's protected header. */
const kidOf = (jwt: string): string =>
  (JSON.parse(Buffer.from(jwt.split(".")[0] ?? "", "base64url").toString("utf8")) as { kid: string }).kid

const jwksKids = async (issuer: string) =>
  ((await (await fetch(`${issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid).sort()

/**
 * A waiting signing key (published, signing an hour from now) whose kid begins with `-`, stored in the configuration's
 * database the way the server stores keys. Kids are JWK thumbprints (base64url), so one in 64 begins with `-`: keys are
 * generated until one does, so that the edge is covered on every run rather than by chance.
 */
const storeKeyBeginningWithDash = async (database: string): Promise<string> => {
  const now = Math.floor(Date.now() / 1000)
  let key = await Signing.generateSigningKey("ES256", now)
  while (!key.kid.startsWith("-")) key = await Signing.generateSigningKey("ES256", now)
  const layer = database.startsWith("postgres")
    ? Storage.layerPostgres({ connectionString: database, max: 1 })
    : Storage.layerSqlite({ path: database })
  await Effect.runPromise(
    Effect.gen(function* () {
      const keys = yield* Storage.KeyStore
      yield* keys.add({ ...key, activates_at: now + 3600 })
    }).pipe(Effect.provide(layer)),
  )
  return key.kid
}

/** A client ID that begins with `-` (client IDs are base64url: one in 64 generated ones does). */
const DASH_CLIENT_ID = "-Fq3_ops-tool"

interface KeyRow {
  readonly kid: string
  readonly state: string
}

/** Starts a live server on the database and runs every admin command against it, checking the server sees each. */
const scenario = async (database: string) => {
  const config: AppConfig = {
    port: 0,
    database,
    users: [{ username: "alice", password: PASSWORD }],
    resources: [{ uri: RESOURCE, scopes: SCOPES }],
    lifetimes: { accessToken: 900 },
  }
  const file = join(await dir(), "keyway.json")
  await writeFile(file, JSON.stringify(config))
  const server = await startAuthorizationServer(config, { log: () => undefined })
  defer(server.close)
  const { issuer } = server

  // clients add, through the command line: the secret is printed once, and the live server accepts it. The client's
  // ID begins with `-`, as one in 64 generated IDs does: every command below takes it as an option value or an
  // argument all the same.
  const addedLine = await adminProcess(
    file,
    "clients",
    "add",
    "--name",
    "Ops tool",
    "--client-id",
    DASH_CLIENT_ID,
    "--redirect-uri",
    REDIRECT_URI,
    "--json",
  )
  expect([addedLine.code, addedLine.stderr]).toEqual([0, ""])
  const added = JSON.parse(addedLine.stdout) as { client_id: string; client_secret: string; origin: string }
  expect(added).toMatchObject({ origin: "admin", client_id: DASH_CLIENT_ID })
  const clientId = added.client_id
  const shown = await admin(file, "clients", "show", clientId, "--json")
  expect(JSON.parse(shown.stdout)).toMatchObject({ client_id: clientId, client_name: "Ops tool", has_secret: true })
  expect(shown.stdout).not.toContain(added.client_secret)
  const listed = await adminJson<Array<{ client_id: string }>>(file, "clients", "list")
  expect(listed.map((c) => c.client_id)).toEqual([clientId])
  const human = await admin(file, "clients", "list")
  expect(human.stdout.split("\n")[0]).toMatch(/^CLIENT_ID\s+ORIGIN\s+AUTH\s+NAME\s+REDIRECT_URIS$/)
  expect(human.stdout).toContain(`${clientId}  admin   client_secret_basic  Ops tool  ${REDIRECT_URI}`)

  const tokens = await codeFlow(issuer, { clientId, clientSecret: added.client_secret })
  expect(await (await introspect(issuer, clientId, added.client_secret, tokens.access_token)).json()).toMatchObject({
    active: true,
    client_id: clientId,
  })

  // grants list and revoke: introspection and the refresh token see the revocation at once.
  const grants = await adminJson<Array<{ grant_id: string; subject: string; client_id: string; scope: string }>>(
    file,
    "grants",
    "list",
    "--user",
    "alice",
  )
  expect(grants.map((g) => [g.subject, g.client_id, g.scope])).toEqual([["alice", clientId, "notes:read"]])
  expect(await adminJson(file, "grants", "list", "--client", "someone-else")).toEqual([])
  const grantId = grants[0]?.grant_id ?? ""
  expect(await adminJson(file, "grants", "list", "--client", clientId)).toMatchObject([{ grant_id: grantId }])
  expect(await adminJson(file, "grants", "list", `--client=${clientId}`)).toMatchObject([{ grant_id: grantId }])
  // The operator learns that access tokens verified as JWTs outlive the revocation, and for how long at most.
  expect(await admin(file, "grants", "revoke", "--client", clientId)).toEqual({
    code: 0,
    stdout: `revoked 1 grant(s)\n  ${grantId}\nJWT access tokens already issued stay usable until they expire (at most 900 seconds: lifetimes.accessToken) unless the resource server introspects them\n`,
    stderr: "",
  })
  expect(await (await introspect(issuer, clientId, added.client_secret, tokens.access_token)).json()).toEqual({
    active: false,
  })
  const refused = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: ClientAuth.encodeClientSecretBasic(clientId, added.client_secret),
    },
    body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: tokens.refresh_token }),
  })
  expect([refused.status, await refused.json()]).toEqual([
    400,
    { error: "invalid_grant", error_description: "the refresh token has been revoked" },
  ])
  expect(await adminJson(file, "grants", "list")).toEqual([])

  // clients rotate-secret: the old secret stops working at once.
  const rotated = await adminJson<{ client_secret: string }>(file, "clients", "rotate-secret", clientId)
  expect(rotated.client_secret).not.toBe(added.client_secret)
  expect((await introspect(issuer, clientId, added.client_secret, "x")).status).toBe(401)
  expect(await (await introspect(issuer, clientId, rotated.client_secret, "x")).json()).toEqual({ active: false })

  // clients update: the server checks redirect URIs against the new list.
  await adminJson(file, "clients", "update", clientId, "--redirect-uri", "http://127.0.0.1/elsewhere")
  await expect(codeFlow(issuer, { clientId, clientSecret: rotated.client_secret })).rejects.toThrow(
    "authorize answered 400",
  )

  // clients remove: the client is unknown to the server, and its (new) grants are revoked.
  const publicApp = await addPublicClient(file)
  const publicTokens = await codeFlow(issuer, { clientId: publicApp.client_id })
  // A grant revoked by its ID given after `--` (grant IDs are base64url too).
  const [publicGrant] = await adminJson<Array<{ grant_id: string }>>(
    file,
    "grants",
    "list",
    "--client",
    publicApp.client_id,
  )
  expect(await adminJson(file, "grants", "revoke", "--", publicGrant?.grant_id ?? "")).toEqual({
    revoked: [publicGrant?.grant_id],
  })
  expect(await adminJson(file, "clients", "remove", publicApp.client_id)).toMatchObject({
    removed: publicApp.client_id,
  })
  expect((await refresh(issuer, publicApp.client_id, publicTokens.refresh_token)).status).toBe(401)
  expect(await admin(file, "clients", "remove", clientId)).toMatchObject({ code: 0 })
  expect((await introspect(issuer, clientId, rotated.client_secret, "x")).status).toBe(401)

  // keys: rotate publishes a new key; revoke unpublishes the compromised one at once and a new key signs.
  const keys = await adminJson<Array<KeyRow>>(file, "keys", "list")
  expect(keys.map((k) => k.state)).toEqual(["signing"])
  const original = keys[0]?.kid ?? ""
  expect(await jwksKids(issuer)).toEqual([original])
  const rotation = await adminJson<{ kid: string; created: boolean }>(file, "keys", "rotate")
  expect(rotation.created).toBe(true)
  expect(await jwksKids(issuer)).toEqual([original, rotation.kid].sort())
  expect((await adminJson<Array<KeyRow>>(file, "keys", "list")).map((k) => [k.kid, k.state])).toEqual([
    [original, "signing"],
    [rotation.kid, "waiting"],
  ])
  const retireSigning = await admin(file, "keys", "retire", original)
  expect(retireSigning).toMatchObject({
    code: 2,
    stderr: `keyway-authorization-server admin: kid: ${original} is the key signing now; rotate first and retire it once its successor signs\n`,
  })
  const revoked = await adminJson<{ kid: string; replacement: string }>(file, "keys", "revoke", original)
  expect(revoked.kid).toBe(original)
  const published = await jwksKids(issuer)
  expect(published).not.toContain(original)
  expect(published).toEqual([rotation.kid, revoked.replacement].sort())
  // The token endpoint reads its signing key from the store at most once a clock second, so a revocation made by
  // another process takes effect from the next second on: wait out that second, no more.
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const fresh = await codeFlow(issuer, {
    clientId: (await addPublicClient(file)).client_id,
  })
  expect(kidOf(fresh.access_token)).toBe(revoked.replacement)
  const retired = await adminJson<{ kid: string; retires_at: number }>(file, "keys", "retire", rotation.kid)
  expect(retired.kid).toBe(rotation.kid)
  expect(await jwksKids(issuer)).toContain(rotation.kid)

  // Kids that begin with `-`: retired as an argument after the command (through the command line), revoked after
  // `--`.
  const dashed = await storeKeyBeginningWithDash(database)
  expect(await jwksKids(issuer)).toContain(dashed)
  const retiredDashed = await adminProcess(file, "keys", "retire", dashed)
  expect([retiredDashed.code, retiredDashed.stderr]).toEqual([0, ""])
  expect(retiredDashed.stdout).toMatch(new RegExp(`^key ${dashed} retired; it leaves the JWK Set at \\S+\n$`))
  expect(await jwksKids(issuer)).toContain(dashed)
  const revokedDashed = await admin(file, "keys", "revoke", "--", dashed)
  expect(revokedDashed).toEqual({ code: 0, stdout: `key ${dashed} revoked; it is no longer published\n`, stderr: "" })
  expect(await jwksKids(issuer)).not.toContain(dashed)
}

describe("admin commands against a live server", () => {
  it("on SQLite: clients, grants and keys change what the server does at once", async () => {
    await scenario(join(await dir(), "keyway.db"))
  }, 120_000)

  it("on PostgreSQL: clients, grants and keys change what the server does at once", async () => {
    await scenario(postgres.createDatabase("admin_commands"))
  }, 120_000)
})

describe("admin clients: metadata an extension declares", () => {
  it("shows a DPoP client's dpop_bound_access_tokens beside its other fields, and keeps it across an update", async () => {
    const config: AppConfig = {
      port: 0,
      database: join(await dir(), "keyway.db"),
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
      extensions: { dpop: {} },
    }
    const file = join(await dir(), "keyway.json")
    await writeFile(file, JSON.stringify(config))
    const server = await startAuthorizationServer(config, { log: () => undefined })
    defer(server.close)
    const registered = await fetch(`${server.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        redirect_uris: [REDIRECT_URI],
        token_endpoint_auth_method: "none",
        dpop_bound_access_tokens: true,
      }),
    })
    expect(registered.status).toBe(201)
    const { client_id } = (await registered.json()) as { client_id: string }

    const shown = await adminJson<Record<string, unknown>>(file, "clients", "show", client_id)
    expect(shown).toMatchObject({ client_id, dpop_bound_access_tokens: true, has_secret: false })
    expect(shown).not.toHaveProperty("extension_metadata")
    const human = await admin(file, "clients", "show", client_id)
    expect(human.stdout).toContain(`\n${"dpop_bound_access_tokens".padEnd(27)}true\n`)

    await adminJson(file, "clients", "update", client_id, "--name", "Bound tool")
    expect(await adminJson(file, "clients", "show", client_id)).toMatchObject({
      client_name: "Bound tool",
      dpop_bound_access_tokens: true,
    })
    const listed = await adminJson<Array<Record<string, unknown>>>(file, "clients", "list")
    expect(listed).toMatchObject([{ client_id, dpop_bound_access_tokens: true }])
  }, 60_000)
})

describe("admin command errors", () => {
  const configFile = async () => {
    const file = join(await dir(), "keyway.json")
    await writeFile(
      file,
      JSON.stringify({
        database: join(await dir(), "keyway.db"),
        users: [{ username: "alice", password: PASSWORD }],
        resources: [{ uri: RESOURCE, scopes: SCOPES }],
      }),
    )
    return file
  }

  it("answers bad input with exit code 2 and a message naming the field", async () => {
    const file = await configFile()
    const prefix = "keyway-authorization-server admin: "
    const cases: Array<[Array<string>, string]> = [
      [
        ["clients", "add", "--redirect-uri", "http://example.com/cb"],
        "--redirect-uri: http://example.com/cb uses http on a host that is not loopback",
      ],
      [["clients", "add"], "--redirect-uri: needs at least one redirect URI"],
      [
        ["clients", "add", "--redirect-uri", REDIRECT_URI, "--auth-method", "private_key_jwt"],
        "--auth-method: must be one of none, client_secret_basic, client_secret_post",
      ],
      [["clients", "show", "nope"], "no client nope"],
      [["clients", "rotate-secret", "nope"], "no client nope"],
      [["keys", "revoke", "nope"], "no signing key nope"],
      [["grants", "revoke"], "grants revoke needs a grant ID, --user or --client"],
      [["grants", "revoke", "g-1"], "no grant g-1 (or it is revoked already)"],
    ]
    for (const [args, message] of cases) {
      const result = await admin(file, ...args)
      expect([args, result.code, result.stderr, result.stdout]).toEqual([args, 2, `${prefix}${message}\n`, ""])
    }
  }, 60_000)

  it("answers a bad command line with exit code 2 and the usage", async () => {
    const file = await configFile()
    for (const [args, message] of [
      [["frob"], 'unknown command "frob"'],
      [["clients", "show"], "clients show needs <client-id>"],
      [["keys", "list", "extra"], 'keys list takes no argument, got "extra"'],
      [["keys", "list", "--user", "alice"], "keys list does not take --user"],
    ] as const) {
      const result = await admin(file, ...args)
      expect(result.code).toBe(2)
      expect(result.stderr).toMatch(new RegExp(`^keyway-authorization-server admin: ${message}\n\nusage: `))
    }
    const missing = spawnCli(main, ["admin", "clients", "list"])
    defer(missing.kill)
    expect(await missing.exit).toBe(2)
    expect(missing.stderr).toContain("--config <file.json> is required")
  }, 60_000)
})

describe("the admin command line", () => {
  // Every ID the commands take is base64url or chosen by the operator: it may begin with `-`, or even `--`.
  const ids = ["-F3k9", "--F3k9", "-", "-h-not-help", "plain"]
  const commands = [
    "clients show",
    "clients update",
    "clients remove",
    "clients rotate-secret",
    "grants revoke",
    "keys retire",
    "keys revoke",
    "users add",
    "users passwd",
    "users remove",
  ]
  const options = [
    "config",
    "data-dir",
    "database",
    "name",
    "auth-method",
    "scope",
    "client-id",
    "user",
    "client",
    "display-name",
  ]

  it("takes an argument after the command whatever it begins with, and anything after --", () => {
    for (const command of commands) {
      for (const id of ids) {
        const words = command.split(" ")
        const expected = { values: { config: "k.json" }, positionals: [...words, id] }
        expect([command, id, parseAdminArgs(["--config", "k.json", ...words, "--", id])]).toEqual([
          command,
          id,
          expected,
        ])
        if (!id.startsWith("--") && id !== "-h-not-help") {
          expect([command, id, parseAdminArgs(["--config", "k.json", ...words, id])]).toEqual([command, id, expected])
        }
      }
    }
    expect(parseAdminArgs(["keys", "retire", "-h-not-help"])).toEqual({
      values: {},
      positionals: ["keys", "retire", "-h-not-help"],
    })
    expect(parseAdminArgs(["--", "keys", "list", "--json"])).toEqual({
      values: {},
      positionals: ["keys", "list", "--json"],
    })
  })

  it("takes the next argument as an option's value whatever it begins with, or the value after =", () => {
    for (const option of options) {
      for (const id of ids) {
        const expected = { values: { [option]: id }, positionals: ["grants", "list"] }
        expect([option, parseAdminArgs(["grants", "list", `--${option}`, id])]).toEqual([option, expected])
        expect([option, parseAdminArgs(["grants", "list", `--${option}=${id}`])]).toEqual([option, expected])
      }
    }
    expect(parseAdminArgs(["--redirect-uri", "-a", "--redirect-uri=--b", "--json", "-h"])).toEqual({
      values: { "redirect-uri": ["-a", "--b"], json: true, help: true },
      positionals: [],
    })
    expect(parseAdminArgs(["--client=a=b", "--name="])).toEqual({
      values: { client: "a=b", name: "" },
      positionals: [],
    })
  })

  it("refuses an unknown option, a missing value and a value for a switch, with exit code 2 and the usage", async () => {
    const cases: Array<[Array<string>, string]> = [
      [["keys", "retire", "--F3k9"], 'unknown option --F3k9 (an argument that begins with -- goes after "--")'],
      [
        ["--constructor", "keys", "list"],
        'unknown option --constructor (an argument that begins with -- goes after "--")',
      ],
      [["grants", "list", "--client"], "--client needs a value"],
      [["keys", "list", "--json=yes"], "--json takes no value"],
      [["keys", "list", "--help=1"], "--help takes no value"],
    ]
    for (const [args, message] of cases) {
      expect([args, await runAdmin(args, {})]).toEqual([
        args,
        { code: 2, stdout: "", stderr: `keyway-authorization-server admin: ${message}\n\n${ADMIN_USAGE}\n` },
      ])
    }
  })
})

/** `admin` with `input` on its standard input (not a terminal: the password is its first line). */
const adminWithInput = (file: string, input: string, ...args: Array<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [main, "admin", "--config", file, ...args], {
      stdio: ["pipe", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString()
    })
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString()
    })
    child.on("close", (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(input)
  })

describe("admin users: new passwords", () => {
  it("refuses a password under 15 characters with exit code 2, naming the minimum, and changes nothing", async () => {
    const file = join(await dir(), "keyway.json")
    const config = {
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
    }
    await writeFile(file, JSON.stringify(config))
    const tooShort =
      "keyway-authorization-server admin: password: must be at least 15 characters long (NIST SP 800-63B-4 §3.1.1.2, a password used alone); a few unrelated words make one easy to remember\n"
    const [add, passwd] = await Promise.all([
      adminWithInput(file, "fourteen chars\n", "users", "add", "carol"),
      adminWithInput(file, "fourteen chars\n", "users", "passwd", "alice"),
    ])
    expect(add).toEqual({ code: 2, stdout: "", stderr: tooShort })
    expect(passwd).toEqual({ code: 2, stdout: "", stderr: tooShort })
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual(config)
  }, 60_000)
})

describe("admin users against a live server", () => {
  it("adds a user, changes the password and removes the user; the running server follows the file", async () => {
    const folder = await dir()
    const file = join(folder, "keyway.json")
    await writeFile(
      file,
      JSON.stringify({
        database: join(folder, "keyway.db"),
        users: [{ username: "alice", password: PASSWORD }],
        resources: [{ uri: RESOURCE, scopes: SCOPES }],
      }),
    )
    const server = spawnCli(main, ["--config", file, "--port", "0"])
    defer(server.kill)
    const [, issuer = ""] = await waitForStderr(server, /issuer (\S+);/)
    const app = await addPublicClient(file)
    const clientId = app.client_id

    const added = await adminWithInput(file, "bob-first-password\n", "users", "add", "bob", "--display-name", "Bob")
    expect(added).toEqual({ code: 0, stdout: "added user bob\n", stderr: "" })
    const stored = JSON.parse(await readFile(file, "utf8")) as { users: Array<Record<string, string>> }
    expect(stored.users[1]).toEqual({
      username: "bob",
      passwordHash: expect.stringMatching(/^scrypt\$/),
      displayName: "Bob",
    })
    expect(JSON.stringify(stored)).not.toContain("bob-first-password")
    const tokens = await codeFlow(issuer, { clientId, username: "bob", password: "bob-first-password" })
    expect(await adminJson(file, "users", "list")).toEqual([
      { username: "alice" },
      { username: "bob", displayName: "Bob" },
    ])

    expect(await adminWithInput(file, "bob-second-password\n", "users", "passwd", "bob")).toMatchObject({ code: 0 })
    await expect(codeFlow(issuer, { clientId, username: "bob", password: "bob-first-password" })).rejects.toThrow(
      "login answered 401",
    )
    await codeFlow(issuer, { clientId, username: "bob", password: "bob-second-password" })

    // Bob's two sign-ins to one client at one resource are one grant.
    expect(await adminWithInput(file, "", "users", "remove", "bob")).toEqual({
      code: 0,
      stdout: "removed user bob; revoked 1 grant(s)\n",
      stderr: "",
    })
    await expect(codeFlow(issuer, { clientId, username: "bob", password: "bob-second-password" })).rejects.toThrow(
      "login answered 401",
    )
    expect((await refresh(issuer, clientId, tokens.refresh_token)).status).toBe(400)
    // alice, whose clear-text password stays as it was, still signs in.
    await codeFlow(issuer, { clientId })
    expect(server.stderr).toContain(`users reloaded from ${file} (1)`)

    // A user name that begins with `-`: an argument after the command, or after `--`.
    expect(await adminWithInput(file, "dana-long-password\n", "users", "add", "-dana")).toEqual({
      code: 0,
      stdout: "added user -dana\n",
      stderr: "",
    })
    const withDana = JSON.parse(await readFile(file, "utf8")) as { users: Array<{ username: string }> }
    expect(withDana.users.map((u) => u.username)).toEqual(["alice", "-dana"])
    expect(await adminWithInput(file, "", "users", "remove", "--", "-dana")).toEqual({
      code: 0,
      stdout: "removed user -dana; revoked 0 grant(s)\n",
      stderr: "",
    })

    const prefix = "keyway-authorization-server admin: "
    expect(await adminWithInput(file, "x\n", "users", "add", "alice")).toEqual({
      code: 2,
      stdout: "",
      stderr: `${prefix}username: alice already exists\n`,
    })
    expect(await adminWithInput(file, "\n", "users", "add", "carol")).toEqual({
      code: 2,
      stdout: "",
      stderr: `${prefix}password: must not be empty\n`,
    })
    expect(await adminWithInput(file, "x\n", "users", "passwd", "carol")).toEqual({
      code: 2,
      stdout: "",
      stderr: `${prefix}no user carol\n`,
    })
    expect(server.stderr).not.toContain("bob-first-password")
    expect(server.stderr).not.toContain("bob-second-password")
  }, 120_000)
})
