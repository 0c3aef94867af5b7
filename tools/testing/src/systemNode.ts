import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { isSupported, MINIMUM_NODE } from "@keyway/node-version"

/** Where the machine's own Node.js is (Debian's `nodejs`, older than the project's: the root scripts start on it). */
export const SYSTEM_NODE = "/usr/bin/node"

/**
 * The machine's own Node.js and its version, for tests that show what an app does on a Node older than
 * `MINIMUM_NODE`. Throws (the test fails, it never skips) when it is missing or not older, since such a test would
 * then prove nothing.
 */
export const olderSystemNode = (): { readonly path: string; readonly version: string } => {
  if (!existsSync(SYSTEM_NODE)) {
    throw new Error(
      `${SYSTEM_NODE} is missing: this test runs the app with the machine's own Node.js, older than ${MINIMUM_NODE} (Debian's nodejs package)`,
    )
  }
  const version = execFileSync(SYSTEM_NODE, ["-p", "process.versions.node"], { encoding: "utf8" }).trim()
  if (isSupported(version)) {
    throw new Error(
      `${SYSTEM_NODE} is Node.js ${version}, not older than ${MINIMUM_NODE}: this test needs an older Node.js there to show that the app refuses it`,
    )
  }
  return { path: SYSTEM_NODE, version }
}
