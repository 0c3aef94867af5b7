/**
 * The assertion every app's test makes about starting on a Node.js older than the project supports, apart from the
 * root export because it imports vitest (the root is also imported outside tests).
 *
 * @module
 */
import { expect } from "vitest"
import { spawnCli } from "./cli.js"
import { olderSystemNode } from "./systemNode.js"

/**
 * Runs an app's `main` (its built `dist/main.js`) with `--help` on the machine's own, older Node.js and asserts that
 * it starts nothing: exit code 1, nothing on stdout, and on stderr what it needs and how to run it with the project's
 * Node instead. `program` is the name the app gives itself, `path` its main from the repository root.
 */
export const expectRequiresNode = async (main: string, program: string, path: string): Promise<void> => {
  const old = olderSystemNode()
  const child = spawnCli(main, ["--help"], {}, old.path)
  expect([await child.exit, child.stdout, child.stderr]).toEqual([
    1,
    "",
    `${program}: needs Node.js 22.19.0 or later, this is Node.js ${old.version}; from the repository root, run it with ` +
      `the project's own Node: npm run exec -- node ${path} [arguments]\n`,
  ])
}
