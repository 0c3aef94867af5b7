import { fileURLToPath } from "node:url"
import { olderSystemNode, spawnCli } from "@keyway/testing"
import { expect, it } from "vitest"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))

it("on a Node.js older than 22.19 (the machine's own), says what it needs and what to run instead, with exit code 1", async () => {
  const old = olderSystemNode()
  const child = spawnCli(main, ["--help"], {}, old.path)
  expect([await child.exit, child.stdout, child.stderr]).toEqual([
    1,
    "",
    `keyway-mcp: needs Node.js 22.19.0 or later, this is Node.js ${old.version}; from the repository root, run it with ` +
      "the project's own Node: npm run exec -- node apps/mcp-client/dist/main.js [arguments]\n",
  ])
})
