import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { tarballName } from "../src/pack.js"
import { closure, installLine } from "../src/tarballs.js"
import { publishable, ROOT, readManifest } from "../src/workspace.js"

const names = (packages: ReadonlyArray<string>) => closure(packages, publishable()).map((p) => p.manifest.name)

describe("the tarballs a role needs (npm run pack)", () => {
  const out = mkdtempSync(join(tmpdir(), "keyway pack-"))
  afterAll(() => rmSync(out, { recursive: true, force: true }))

  it("takes each role package with the workspace packages it depends on, and nothing else", () => {
    expect(names(["client"])).toEqual(["@keyway/client", "@keyway/core"])
    expect(names(["resource-server"])).toEqual(["@keyway/core", "@keyway/http", "@keyway/resource-server"])
    expect(names(["@keyway/authorization-server"])).toEqual([
      "@keyway/authorization-server",
      "@keyway/core",
      "@keyway/http",
    ])
  })

  it("leaves an extension's optional role peers to the user, who names the role beside it", () => {
    expect(names(["ext-dpop"])).toEqual(["@keyway/core", "@keyway/ext-dpop"])
    expect(names(["client", "ext-dpop"])).toEqual(["@keyway/client", "@keyway/core", "@keyway/ext-dpop"])
  })

  it("refuses a name that is no published package, listing those that are", () => {
    expect(() => names(["clients"])).toThrow(
      "not a published Keyway package: @keyway/clients (choose from authorization-server, client, connections, core, doctor, ext-client-credentials, ext-device-authorization, ext-dpop, ext-enterprise-managed, ext-token-exchange, ext-workload-identity, http, express, hono, mcp-sdk-client, mcp-sdk-server, resource-server)",
    )
  })

  it("quotes a tarball path that the shell would split", () => {
    expect(installLine(["/tmp/a/keyway-core-0.1.0.tgz", "/tmp/my dir/keyway-client-0.1.0.tgz"])).toBe(
      "npm install /tmp/a/keyway-core-0.1.0.tgz '/tmp/my dir/keyway-client-0.1.0.tgz'",
    )
  })

  it("packs them and prints the npm install line that takes them", () => {
    const ran = spawnSync(process.execPath, [join(ROOT, "tools/packaging/dist/cli.js"), "--out", out, "client"], {
      cwd: ROOT,
      encoding: "utf8",
    })
    expect(ran.stderr).toContain("packed @keyway/client@")
    expect(ran.status).toBe(0)
    const version = (dir: string) => readManifest(join(ROOT, dir)).version
    const expected = [
      join(out, tarballName("@keyway/client", version("packages/client"))),
      join(out, tarballName("@keyway/core", version("packages/core"))),
    ]
    expect(ran.stdout).toBe(`${installLine(expected)}\n`)
    for (const tarball of expected) expect(existsSync(tarball)).toBe(true)
  })

  it("answers a wrong call with its usage and exit 2", () => {
    const ran = spawnSync(process.execPath, [join(ROOT, "tools/packaging/dist/cli.js")], {
      cwd: ROOT,
      encoding: "utf8",
    })
    expect(ran.status).toBe(2)
    expect(ran.stderr).toBe(
      "name at least one package\nusage: npm run pack -- [--out <dir>] <package>... (for example: npm run pack -- client, npm run pack -- resource-server express)\n",
    )
  })
})
