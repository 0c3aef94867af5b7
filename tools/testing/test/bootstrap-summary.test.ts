import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { summarize, summarizeTree, summaryText, type VitestReport } from "../../bootstrap/summary.mjs"

const vitestCli = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs")

/** Runs the real vitest on `files` in a fresh project under `root/<name>` and returns its JSON report's path. */
const runVitest = (root: string, name: string, files: Record<string, string>): string => {
  const project = join(root, "packages", name)
  mkdirSync(join(project, "test"), { recursive: true })
  for (const [file, body] of Object.entries(files)) writeFileSync(join(project, "test", file), body)
  const outputFile = join(project, ".reports", "vitest.json")
  spawnSync(
    process.execPath,
    [vitestCli, "run", "--root", project, "--globals", "--reporter=json", `--outputFile=${outputFile}`],
    { cwd: project, encoding: "utf8", env: { ...process.env, CI: "true" } },
  )
  return outputFile
}

const report = (path: string): VitestReport => ({ path, data: JSON.parse(readFileSync(path, "utf8")) })

describe("the closing line of npm test (tools/bootstrap/summary.mjs)", () => {
  let root: string
  let failing: string
  let passing: string

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "keyway-summary-"))
    failing = runVitest(root, "failing", {
      "mixed.test.mjs": [
        'it("adds", () => expect(1 + 1).toBe(2))',
        'it("breaks", () => expect(1 + 1).toBe(3))',
        'it.skip("waits", () => {})',
        "",
      ].join("\n"),
      "broken.test.mjs": 'throw new Error("cannot load")\n',
    })
    passing = runVitest(root, "passing", { "ok.test.mjs": 'it("holds", () => expect(true).toBe(true))\n' })
  }, 180_000)

  afterAll(() => rmSync(root, { recursive: true, force: true }))

  it("counts one failed test once, however many suites and steps fail with it", () => {
    const summary = summarize([report(failing), report(passing)], ["lint, typecheck, build, test (nx)"])
    expect(summary).toMatchObject({ passed: 2, failed: 2, skipped: 1 })
    expect(summary.lines).toEqual([
      `failed test file (no test in it failed; it did not run to the end): ${join(root, "packages", "failing", "test", "broken.test.mjs")}`,
      `failed test: ${join(root, "packages", "failing", "test", "mixed.test.mjs")} > breaks`,
      "failed step: lint, typecheck, build, test (nx)",
    ])
  })

  it("ends with the plain closing line, the failed steps each on a line of their own above it", () => {
    const text = summaryText(summarizeTree(root, ["format and lint (biome ci)", "API docs (typedoc)"]))
    const lines = text.trimEnd().split("\n")
    expect(lines.at(-1)).toBe("2 passed, 2 failed, 1 skipped")
    expect(lines).toContain("failed step: format and lint (biome ci)")
    expect(lines).toContain("failed step: API docs (typedoc)")
  })

  it("says 0 failed when every test passed, whatever failed outside the tests", () => {
    expect(summaryText(summarize([report(passing)], ["API docs (typedoc)"]))).toBe(
      "failed step: API docs (typedoc)\n\n1 passed, 0 failed\n",
    )
  })
})
