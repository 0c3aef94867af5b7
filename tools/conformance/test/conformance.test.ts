import { spawn } from "node:child_process"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { expect, it } from "vitest"
import { AUTHORIZATION_RUNS, parseExpectedFailures } from "../src/runner.js"

const runner = fileURLToPath(new URL("../dist/run.js", import.meta.url))
const expectedFile = fileURLToPath(new URL("../expected-failures.json", import.meta.url))

it("passes the official conformance suite's client and authorization-server scenarios, apart from the listed expected failures", {
  timeout: 300_000,
}, async () => {
  const dir = await mkdtemp(join(tmpdir(), "keyway-conformance-test-"))
  try {
    const output = join(dir, "conformance.md")
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>(
      (resolve, reject) => {
        const child = spawn(process.execPath, [runner, "--output", output], { stdio: ["ignore", "pipe", "pipe"] })
        let out = ""
        let err = ""
        child.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString()
        })
        child.stderr.on("data", (chunk: Buffer) => {
          err += chunk.toString()
        })
        child.on("error", reject)
        child.on("close", (exit) => resolve({ code: exit ?? -1, stdout: out, stderr: err }))
      },
    )
    expect(stderr).not.toMatch(/unexpected (failure|pass)|stale entry/u)
    expect(stdout).toMatch(/^\d+\/\d+ scenarios passed; all as expected\n$/u)
    expect(code).toBe(0)
    const markdown = await readFile(output, "utf8")
    for (const entry of parseExpectedFailures(await readFile(expectedFile, "utf8"))) {
      expect(markdown).toContain(`| \`${entry.scenario}\` | expected failure |`)
    }
    expect(markdown).toContain("| `auth/basic-cimd` | pass |")
    expect(markdown).toContain("| `auth/pre-registration` | pass |")
    // Every run ran, the 2026-07-28 wire included, and none of its scenarios is an expected failure.
    expect(markdown).not.toContain("Not run:")
    const modern = markdown.split("## `conformance client --suite auth --spec-version 2026-07-28`")[1]?.split("## ")[0]
    expect(modern).toContain("| `auth/scope-retry-limit` | pass |")
    expect(modern).not.toMatch(/failure/u)
    // Every authorization-server run passes both scenarios against apps/authorization-server.
    for (const run of AUTHORIZATION_RUNS) {
      const section = markdown.split(`## \`conformance ${run.label}\``)[1]?.split("## ")[0]
      expect(section).toContain("| `authorization-server-metadata-endpoint` | pass |")
      expect(section).toContain("| `authorization-code-grant` | pass |")
      expect(section).not.toMatch(/failure/u)
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
})
