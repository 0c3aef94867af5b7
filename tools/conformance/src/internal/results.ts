/**
 * Reading what the suite writes: the result directory of a scenario (`[<prefix>-]<scenario>-<timestamp>`, holding
 * checks.json and, in client mode, the client's stdout.txt and stderr.txt), and the suite's complaint about a spec
 * version it does not know.
 *
 * @module
 */
import { readdir, readFile } from "node:fs/promises"
import { basename, dirname, join } from "node:path"

/** One check of a scenario, as the suite writes it to checks.json. */
export interface Check {
  readonly id: string
  readonly status: string
  readonly description?: string
  readonly errorMessage?: string
}

const RESULT_DIR = /^(.*)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/u

/** Collapses whitespace, for table cells and one-line messages. */
export const oneLine = (text: string): string => text.replace(/\s+/gu, " ").trim()

/**
 * Finds the result directory the suite wrote for a scenario: `<scenario>-<timestamp>` in client mode,
 * `authorization-server-<scenario>-<timestamp>` in authorization-server mode (`prefix`).
 */
export const resultDirectory = async (
  outputDir: string,
  scenario: string,
  prefix = "",
): Promise<string | undefined> => {
  const parent = join(outputDir, dirname(scenario))
  const entries = await readdir(parent).catch(() => [] as string[])
  const match = entries.find((entry) => RESULT_DIR.exec(entry)?.[1] === `${prefix}${basename(scenario)}`)
  return match === undefined ? undefined : join(parent, match)
}

/** The checks of a result directory. */
export const readChecks = async (directory: string): Promise<ReadonlyArray<Check>> =>
  JSON.parse(await readFile(join(directory, "checks.json"), "utf8")) as ReadonlyArray<Check>

/** The failed and warning checks, one phrase each, without repeats. */
export const badChecks = (checks: ReadonlyArray<Check>): ReadonlyArray<string> => [
  ...new Set(
    checks
      .filter((check) => check.status === "FAILURE" || check.status === "WARNING")
      .map(
        (check) =>
          `${check.status === "WARNING" ? "warning" : "failed"} ${check.id}: ${check.description ?? ""}` +
          (check.errorMessage === undefined ? "" : ` (${check.errorMessage})`),
      ),
  ),
]

/** The note of a run the suite refused because it does not know the spec version, or undefined. */
export const unknownSpecVersion = (
  stderr: string,
  suiteVersion: string,
  specVersion: string | undefined,
): string | undefined => {
  if (specVersion === undefined || !stderr.includes("Unknown spec version")) return undefined
  const valid = oneLine(stderr.split("\n").find((line) => line.startsWith("Valid versions")) ?? "")
  return `@modelcontextprotocol/conformance ${suiteVersion} has no spec version ${specVersion} (${valid})`
}
