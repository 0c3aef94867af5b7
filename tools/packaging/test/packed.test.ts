import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { publint } from "publint"
import { formatMessage } from "publint/utils"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  exampleEnv,
  freePort,
  newProject,
  npmFlags,
  npmInstall,
  type Started,
  start,
  typecheck,
} from "../src/consumer.js"
import { installedPackages, type Packed, packAll, run, sizeOf } from "../src/pack.js"
import { closure } from "../src/tarballs.js"
import { publishable, ROOT, readManifest } from "../src/workspace.js"

const work = mkdtempSync(join(tmpdir(), "keyway-packaging-"))
// Kept between runs (outside the work folder) so that a second run installs from it without the network.
const cache = join(tmpdir(), "keyway-npm-cache")
const projectDir = (name: string) => join(work, name)
let packed: ReadonlyMap<string, Packed> = new Map()
const tarball = (name: string) => {
  const found = packed.get(name)
  if (found === undefined) throw new Error(`${name} was not packed`)
  return found.tarball
}
const devVersion = (dir: string, name: string) => {
  const version = readManifest(join(ROOT, dir)).devDependencies?.[name]
  if (version === undefined) throw new Error(`${dir} has no devDependency ${name}`)
  return `${name}@${version}`
}
const TYPES_NODE = devVersion(".", "@types/node")
const sizes: Record<string, unknown> = {}

/** The home folder the test-user example keeps its state in (~/.my-tests), never the real one. */
const testUserHome = () => {
  const home = join(work, "home-test-user")
  mkdirSync(home, { recursive: true })
  return home
}

/** The example files each project runs, copied in from the packages (the READMEs show the same files). */
const copyExample = (from: string, project: string, as: string) =>
  copyFileSync(join(ROOT, from), join(projectDir(project), as))

beforeAll(async () => {
  const all = await packAll(work)
  packed = new Map(all.map((entry) => [entry.name, entry]))
  await Promise.all(["client", "resource-server", "authorization-server"].map((name) => newProject(projectDir(name))))
  // The first install of each project: only Keyway's packages, as a user of that role would install them.
  // The tarballs are those `npm run pack -- <role>` packs for the role (tools/packaging/src/tarballs.ts).
  await Promise.all(
    ["client", "resource-server", "authorization-server"].map((role) =>
      npmInstall(
        projectDir(role),
        closure([role], publishable()).map((project) => tarball(project.manifest.name)),
        cache,
      ),
    ),
  )
  for (const name of ["client", "resource-server", "authorization-server"]) {
    const nodeModules = join(projectDir(name), "node_modules")
    sizes[name] = { bytes: sizeOf(nodeModules), packages: installedPackages(nodeModules) }
  }
})

afterAll(() => {
  mkdirSync(join(import.meta.dirname, "..", ".reports"), { recursive: true })
  const tarballs = Object.fromEntries([...packed.values()].map((entry) => [entry.name, entry.bytes]))
  writeFileSync(
    join(import.meta.dirname, "..", ".reports", "sizes.json"),
    `${JSON.stringify({ tarballs, installs: sizes }, null, 2)}\n`,
  )
  rmSync(work, { recursive: true, force: true })
})

describe("the packed tarballs", () => {
  const names = publishable().map((project) => project.manifest.name)

  it.each(names)("%s ships no TypeScript build info", (name) => {
    expect(packed.get(name)?.files.filter((file) => file.endsWith(".tsbuildinfo"))).toEqual([])
    expect(packed.get(name)?.files).toContain("dist/index.js")
  })

  it.each(names)("%s passes publint", async (name) => {
    const entry = packed.get(name)
    if (entry === undefined) throw new Error(`${name} was not packed`)
    const bytes = readFileSync(entry.tarball)
    const tarballData = new ArrayBuffer(bytes.byteLength)
    new Uint8Array(tarballData).set(bytes)
    const result = await publint({ pack: { tarball: tarballData }, level: "suggestion", strict: true })
    expect(result.messages.map((message) => formatMessage(message, result.pkg))).toEqual([])
  })

  it.each(names)("%s passes Are the Types Wrong (ESM-only profile)", async (name) => {
    const attw = join(import.meta.dirname, "..", "node_modules", ".bin", "attw")
    const ran = await run(attw, [tarball(name), "--profile", "esm-only", "--format", "ascii"], { cwd: work })
    const output = ran.stdout + ran.stderr
    expect(ran.code, output).toBe(0)
    // Every entry point resolves to ESM with types for Node's ESM resolution and for bundlers; node10 and require()
    // are what the ESM-only profile (and the READMEs) leave out.
    const verdicts = output.split("\n").filter((line) => /^(node16 \(from ESM\)|bundler):/u.test(line))
    expect(verdicts.length).toBeGreaterThanOrEqual(2)
    expect(verdicts.filter((line) => !line.includes("🟢"))).toEqual([])
  })
})

describe("keyway-doctor, run npx-style from the tarballs", () => {
  it("npm exec --package <tarball> -- keyway-doctor --help prints the usage and exits 0", async () => {
    // No project: npm exec installs the doctor with the workspace packages it depends on (not yet in the registry)
    // into its own cache, as `npx @keyway/doctor` does, from the tests' npm cache.
    const dir = projectDir("npx")
    mkdirSync(dir, { recursive: true })
    const tarballs = closure(["doctor"], publishable()).map((project) => tarball(project.manifest.name))
    const ran = await run(
      "npm",
      [
        "exec",
        "--yes",
        ...npmFlags(cache),
        ...tarballs.flatMap((path) => ["--package", path]),
        "--",
        "keyway-doctor",
        "--help",
      ],
      { cwd: dir, env: exampleEnv(), timeoutMs: 300_000 },
    )
    expect(ran.code, ran.stderr).toBe(0)
    expect(ran.stdout.split("\n")[0]).toBe("usage: keyway-doctor [options] <mcp-server-url>")
    expect(ran.stdout).toContain(
      "exit codes: 0 every check passes (warnings allowed), 1 a check fails, 2 could not run\n",
    )
  })
})

describe("what a project of one role installs", () => {
  const packagesOf = (name: string) => (sizes[name] as { packages: ReadonlyArray<string> }).packages

  it("a client-only project gets the client, core and what they import: no server, no platform layer", () => {
    const installed = packagesOf("client")
    for (const unwanted of ["@effect/platform-node", "undici", "redis", "ws", "@types/node", "@keyway/http"]) {
      expect(installed).not.toContain(unwanted)
    }
    expect(installed.filter((name) => !name.startsWith("@standard-schema/"))).toEqual(
      expect.arrayContaining(["@keyway/client", "@keyway/core", "effect", "jose", "zod"]),
    )
  })

  it("a resource-server-only project does not get the MCP server SDK or the platform layer", () => {
    const installed = packagesOf("resource-server")
    for (const unwanted of ["@modelcontextprotocol/server", "@effect/platform-node", "undici", "redis", "ws"]) {
      expect(installed).not.toContain(unwanted)
    }
    expect(installed).toEqual(expect.arrayContaining(["@keyway/resource-server", "@keyway/http", "effect", "jose"]))
  })

  it("an embedded authorization server with SQLite does not get the PostgreSQL driver", () => {
    expect(packagesOf("authorization-server")).not.toContain("pg")
  })
})

describe("the READMEs' examples, compiled and run from the installed tarballs", () => {
  const running: Array<Started> = []
  const startExample = async (project: string, file: string, env: Record<string, string>) => {
    const started = await start(projectDir(project), file, env)
    running.push(started)
    return started
  }
  afterAll(async () => {
    await Promise.all(running.map((server) => server.stop()))
  })

  /** The authorization server example and a resource server example, wired to each other on free ports. */
  const stack = async (server: string) => {
    const [asPort, rsPort] = [await freePort(), await freePort()]
    const resource = `http://127.0.0.1:${rsPort}/mcp`
    const as = await startExample("authorization-server", "embedded.ts", {
      PORT: String(asPort),
      MCP_RESOURCE: resource,
    })
    expect(as.line).toBe(`authorization server http://127.0.0.1:${asPort}`)
    const rs = await startExample("resource-server", server, {
      PORT: String(rsPort),
      ISSUER: `http://127.0.0.1:${asPort}`,
      MCP_RESOURCE: resource,
    })
    expect(rs.line).toBe(`MCP server ${resource}`)
    return resource
  }

  beforeAll(async () => {
    await newProject(projectDir("connections"))
    copyExample("packages/authorization-server/examples/embedded.ts", "authorization-server", "embedded.ts")
    copyExample("packages/authorization-server/examples/standalone.ts", "authorization-server", "standalone.ts")
    copyExample("packages/resource-server/examples/node.ts", "resource-server", "node.ts")
    copyExample("packages/integrations/express/examples/server.ts", "resource-server", "express.ts")
    copyExample("packages/integrations/hono/examples/server.ts", "resource-server", "hono.ts")
    copyExample("packages/integrations/mcp-sdk-server/examples/server.ts", "resource-server", "mcp.ts")
    copyExample("packages/client/examples/cli.ts", "client", "cli.ts")
    copyExample("packages/client/examples/test-user.ts", "client", "test-user.ts")
    copyExample("packages/client/examples/errors.ts", "client", "errors.ts")
    copyExample("packages/integrations/mcp-sdk-client/examples/client.ts", "client", "sdk.ts")
    copyExample("packages/extensions/client-credentials/examples/client.ts", "client", "client-credentials.ts")
    copyExample(
      "packages/extensions/client-credentials/examples/authorization-server.ts",
      "authorization-server",
      "client-credentials.ts",
    )
    copyExample("packages/extensions/workload-identity/examples/client.ts", "client", "workload-identity.ts")
    copyExample(
      "packages/extensions/workload-identity/examples/server.ts",
      "authorization-server",
      "workload-identity.ts",
    )
    copyExample("packages/extensions/enterprise-managed/examples/client.ts", "client", "enterprise-managed.ts")
    copyExample(
      "packages/extensions/enterprise-managed/examples/authorization-server.ts",
      "authorization-server",
      "enterprise-managed.ts",
    )
    copyExample(
      "packages/extensions/enterprise-managed/examples/identity-provider.ts",
      "authorization-server",
      "identity-provider.ts",
    )
    copyExample("packages/extensions/dpop/examples/client.ts", "client", "dpop.ts")
    copyExample("packages/extensions/dpop/examples/authorization-server.ts", "authorization-server", "dpop.ts")
    copyExample("packages/extensions/dpop/examples/resource-server.ts", "resource-server", "dpop.ts")
    copyExample(
      "packages/extensions/token-exchange/examples/authorization-server.ts",
      "authorization-server",
      "token-exchange.ts",
    )
    copyExample(
      "packages/extensions/token-exchange/examples/resource-server.ts",
      "resource-server",
      "token-exchange.ts",
    )
    copyExample("packages/connections/examples/server.ts", "connections", "server.ts")
    copyExample("packages/extensions/device-authorization/examples/client.ts", "client", "device-authorization.ts")
    copyExample(
      "packages/extensions/device-authorization/examples/authorization-server.ts",
      "authorization-server",
      "device-authorization.ts",
    )
    copyFileSync(join(import.meta.dirname, "fixtures", "browser.mjs"), join(projectDir("client"), "browser.mjs"))
    // The second install: the frameworks the examples use, and @types/node for compiling them.
    await Promise.all([
      npmInstall(
        projectDir("client"),
        [
          tarball("@keyway/mcp-sdk-client"),
          tarball("@keyway/ext-client-credentials"),
          tarball("@keyway/ext-workload-identity"),
          tarball("@keyway/ext-enterprise-managed"),
          // The extensions take the role packages as optional peers: a client project installs no server.
          tarball("@keyway/ext-dpop"),
          tarball("@keyway/ext-device-authorization"),
          devVersion("packages/integrations/mcp-sdk-client", "@modelcontextprotocol/client"),
        ],
        cache,
      ),
      npmInstall(
        projectDir("authorization-server"),
        [
          tarball("@keyway/ext-client-credentials"),
          tarball("@keyway/ext-workload-identity"),
          tarball("@keyway/ext-enterprise-managed"),
          tarball("@keyway/ext-dpop"),
          tarball("@keyway/ext-token-exchange"),
          tarball("@keyway/ext-device-authorization"),
        ],
        cache,
      ),
      // An MCP server with connected accounts: the connections, the MCP SDK adapter and the resource server.
      npmInstall(
        projectDir("connections"),
        [
          ...closure(["connections", "mcp-sdk-server", "resource-server"], publishable()).map((project) =>
            tarball(project.manifest.name),
          ),
          devVersion("packages/connections", "@modelcontextprotocol/server"),
        ],
        cache,
      ),
      npmInstall(
        projectDir("resource-server"),
        [
          tarball("@keyway/express"),
          tarball("@keyway/hono"),
          tarball("@keyway/mcp-sdk-server"),
          tarball("@keyway/ext-dpop"),
          tarball("@keyway/ext-token-exchange"),
          devVersion("packages/integrations/express", "express"),
          devVersion("packages/integrations/hono", "hono"),
          devVersion("packages/integrations/hono", "@hono/node-server"),
          devVersion("packages/integrations/mcp-sdk-server", "@modelcontextprotocol/server"),
        ],
        cache,
      ),
    ])
    await Promise.all([
      npmInstall(projectDir("client"), [TYPES_NODE], cache, true),
      npmInstall(projectDir("connections"), [TYPES_NODE], cache, true),
      npmInstall(
        projectDir("resource-server"),
        [TYPES_NODE, devVersion("packages/integrations/express", "@types/express")],
        cache,
        true,
      ),
      npmInstall(projectDir("authorization-server"), [TYPES_NODE], cache, true),
    ])
  })

  it("the extensions bring no other role: a client or an MCP server project gets no authorization server", () => {
    const keyway = (project: string) => readdirSync(join(projectDir(project), "node_modules", "@keyway")).sort()
    expect(keyway("client")).not.toContain("authorization-server")
    expect(keyway("client")).toContain("ext-dpop")
    expect(keyway("client")).toContain("ext-device-authorization")
    expect(keyway("resource-server")).not.toContain("authorization-server")
    expect(keyway("resource-server")).not.toContain("client")
    expect(keyway("resource-server")).toContain("ext-dpop")
    expect(keyway("resource-server")).toContain("ext-token-exchange")
    expect(keyway("authorization-server")).not.toContain("client")
  })

  it.each(["client", "resource-server", "authorization-server", "connections"])(
    "the %s examples compile against the installed declarations (module nodenext, strict)",
    async (project) => {
      const ran = await typecheck(projectDir(project))
      expect(ran.stdout + ran.stderr).toBe("")
      expect(ran.code).toBe(0)
    },
  )

  it("Express: the test user signs in on the embedded authorization server and the client gets through", async () => {
    const resource = await stack("express.ts")
    const ran = await run(process.execPath, ["test-user.ts", resource], {
      cwd: projectDir("client"),
      env: exampleEnv({ HOME: testUserHome() }),
    })
    expect(ran.stderr).toBe("")
    expect(ran.stdout).toBe('200 {"hello":"alice"}\n')
  })

  it("Hono: the CLI example with the system browser (a stand-in for $BROWSER) and a token file", async () => {
    const resource = await stack("hono.ts")
    const home = join(work, "home")
    mkdirSync(home, { recursive: true })
    const ran = await run(process.execPath, ["cli.ts", resource], {
      cwd: projectDir("client"),
      env: exampleEnv({ HOME: home, BROWSER: `${process.execPath} ${join(projectDir("client"), "browser.mjs")}` }),
      timeoutMs: 60_000,
    })
    expect(ran.stdout).toBe('200 {"hello":"alice"}\n')
    expect(statSync(join(home, ".my-cli", "auth.json")).mode & 0o777).toBe(0o600)
  })

  it("plain node:http: the resource server's own quick start", async () => {
    const resource = await stack("node.ts")
    const ran = await run(process.execPath, ["test-user.ts", resource], {
      cwd: projectDir("client"),
      env: exampleEnv({ HOME: testUserHome() }),
    })
    expect(ran.stdout).toBe('200 {"hello":"alice"}\n')
  })

  it("the official MCP SDK on both sides: the client lists the protected server's tools", async () => {
    const resource = await stack("mcp.ts")
    const ran = await run(process.execPath, ["sdk.ts", resource], {
      cwd: projectDir("client"),
      env: exampleEnv({ BROWSER: `${process.execPath} ${join(projectDir("client"), "browser.mjs")}` }),
      timeoutMs: 60_000,
    })
    expect(ran.stderr).toBe("")
    const listed = JSON.parse(ran.stdout) as { tools: ReadonlyArray<{ name: string }> }
    expect(listed.tools.map((tool) => tool.name)).toEqual(["whoami"])
  })

  it("errors: a failure is a KeywayAuthError that names its step, reason and URL", async () => {
    const url = `http://127.0.0.1:${await freePort()}/mcp`
    const ran = await run(process.execPath, ["errors.ts", url], { cwd: projectDir("client"), env: exampleEnv() })
    expect(ran.stdout.split("\n")[0]).toBe(`true request network-error ${url}`)
  })
})
