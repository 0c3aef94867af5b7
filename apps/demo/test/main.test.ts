import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { USAGE } from "../src/cli.js"
import { STEPS } from "../src/narrator.js"

const MAIN = join(import.meta.dirname, "..", "dist", "main.js")

/** Runs the built CLI to completion. */
export const runMain = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    // Nx sets FORCE_COLOR for its tasks; Node warns on stderr when both it and NO_COLOR are set.
    const { FORCE_COLOR: _forced, ...inherited } = process.env
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...inherited, NO_COLOR: "1", BROWSER: "" },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

describe("npm run demo (dist/main.js)", () => {
  it("runs the whole flow headlessly, prints every step with tokens redacted, exits 0", async () => {
    const { code, stdout, stderr } = await runMain([])
    expect(stderr).not.toContain("the demo failed")
    expect(code).toBe(0)
    for (const title of Object.values(STEPS)) expect(stdout).toContain(title)
    expect(stdout.indexOf(STEPS.challenge)).toBeLessThan(stdout.indexOf(STEPS.resourceMetadata))
    expect(stdout.indexOf(STEPS.insufficientScope)).toBeLessThan(stdout.lastIndexOf(STEPS.authorizationRequest))
    expect(stdout.lastIndexOf(STEPS.authorizationRequest)).toBeLessThan(stdout.indexOf(STEPS.refresh))
    // Nothing shaped like a JWT, and every credential member or parameter shown redacted.
    expect(stdout).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
    const credentialLines = stdout
      .split("\n")
      .filter((line) =>
        /"access_token":|"refresh_token":|^\s+(code|code_verifier|refresh_token|csrf_token|password)\s{2,}|Authorization: Bearer |Cookie:/.test(
          line,
        ),
      )
    expect(credentialLines.length).toBeGreaterThan(20)
    for (const line of credentialLines) expect(line).toMatch(/\[redacted/)
    // Progress goes to stderr, not into the transcript.
    expect(stderr).toContain("… shutting down\n")
    expect(stdout).not.toContain("… shutting down")
  })

  it("prints the usage for --help", async () => {
    expect(await runMain(["--help"])).toEqual({ code: 0, stdout: USAGE, stderr: "" })
  })

  it("exits 2 with the reason and the usage on a bad command line", async () => {
    const { code, stdout, stderr } = await runMain(["--as-port", "x"])
    expect(code).toBe(2)
    expect(stdout).toBe("")
    expect(stderr).toBe(`keyway-demo: --as-port must be a port number from 0 to 65535, got "x"\n\n${USAGE}`)
  })
})
