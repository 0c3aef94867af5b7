import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { isSupported, MINIMUM_NODE, requireSupportedNode, unsupportedMessage } from "../src/index.mjs"

const root = fileURLToPath(new URL("../../../", import.meta.url))
const run = promisify(execFile)

describe("the Node.js version rule", () => {
  it("is the root package.json's engines.node", () => {
    const manifest = JSON.parse(readFileSync(`${root}package.json`, "utf8")) as { engines: { node: string } }
    expect(manifest.engines.node).toBe(`>=${MINIMUM_NODE}`)
    expect(MINIMUM_NODE).toBe("22.19.0")
  })

  it("accepts 22.19.0 and later, with or without a v", () => {
    const cases: Array<[string, boolean]> = [
      ["22.19.0", true],
      ["v22.19.0", true],
      ["22.19.1", true],
      ["22.20.0", true],
      ["23.0.0", true],
      ["24.21.0", true],
      ["100.0.0", true],
      ["22.19", true],
      ["22.18.99", false],
      ["22.9.0", false],
      ["21.99.99", false],
      ["20.20.2", false],
      ["v18.0.0", false],
      ["9.19.0", false],
    ]
    expect(cases.map(([version]) => [version, isSupported(version)])).toEqual(cases)
  })

  it("says which Node is needed and what to run instead, in one line", () => {
    expect(unsupportedMessage("keyway-mcp", "apps/mcp-client/dist/main.js", "20.20.2")).toBe(
      "keyway-mcp: needs Node.js 22.19.0 or later, this is Node.js 20.20.2; from the repository root, run it with " +
        "the project's own Node: npm run exec -- node apps/mcp-client/dist/main.js [arguments]",
    )
  })

  it("lets this Node through", () => {
    expect(requireSupportedNode("keyway-test", "tools/node-version/test/index.test.ts")).toBeUndefined()
  })

  it("on an older Node, prints the message and exits with 1 before its caller goes on", async () => {
    // The module under this very Node, with process.versions.node reported as 20.20.2.
    const script = `Object.defineProperty(process.versions, "node", { value: "20.20.2" });
      const { requireSupportedNode } = await import(${JSON.stringify(new URL("../src/index.mjs", import.meta.url).href)});
      requireSupportedNode("keyway-test", "apps/test/dist/main.js");
      process.stdout.write("not reached");`
    const failed = await run(process.execPath, ["--input-type=module", "-e", script]).then(
      () => undefined,
      (e: { code: number; stdout: string; stderr: string }) => e,
    )
    expect([failed?.code, failed?.stdout, failed?.stderr]).toEqual([
      1,
      "",
      "keyway-test: needs Node.js 22.19.0 or later, this is Node.js 20.20.2; from the repository root, run it " +
        "with the project's own Node: npm run exec -- node apps/test/dist/main.js [arguments]\n",
    ])
  })

  it("imports nothing", () => {
    const source = readFileSync(new URL("../src/index.mjs", import.meta.url), "utf8")
    expect(source).not.toMatch(/\bimport\b|\brequire\(/)
  })
})
