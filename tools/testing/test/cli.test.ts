import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawnCli, waitForStderr } from "../src/cli.js"

// Prints its argument and an environment variable, then either exits with the given code or waits to be killed.
const SCRIPT = `
process.stdout.write("out " + process.argv[2] + "\\n")
process.stderr.write("listening as " + process.env.KEYWAY_CLI_TEST + "\\n")
if (process.argv[3] === "stay") setInterval(() => {}, 1000)
else process.exitCode = Number(process.argv[3])
`

describe("spawnCli", () => {
  let dir: string
  let main: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "keyway-testing-cli-"))
    main = join(dir, "main.mjs")
    await writeFile(main, SCRIPT)
  })
  afterAll(() => rm(dir, { recursive: true, force: true }))

  it("collects stdout and stderr, passes the environment, and reports the exit code", async () => {
    const child = spawnCli(main, ["one", "3"], { KEYWAY_CLI_TEST: "probe" })
    expect(await child.exit).toBe(3)
    expect(child.stdout).toBe("out one\n")
    expect(child.stderr).toBe("listening as probe\n")
  })

  it("waits for a stderr line, and kill ends a process that keeps running", async () => {
    const child = spawnCli(main, ["two", "stay"], { KEYWAY_CLI_TEST: "server" })
    const [, who] = await waitForStderr(child, /listening as (\S+)\n/)
    expect(who).toBe("server")
    await child.kill()
    expect(child.process.signalCode).toBe("SIGKILL")
    expect(await child.exit).toBeNull()
    await child.kill()
  })

  it("rejects the wait when the process exits before the line appears", async () => {
    const child = spawnCli(main, ["three", "0"], { KEYWAY_CLI_TEST: "x" })
    await expect(waitForStderr(child, /never printed/)).rejects.toThrow(
      "exited with 0 before /never printed/: listening as x\n",
    )
  })
})
