/**
 * What a diagnosis comes to: a verdict per revision and the command line's exit code.
 *
 * @module
 */
import type { Revision } from "@keyway/core"
import type { Diagnosis } from "../diagnose.js"
import type { CheckEntry, Finding, Status } from "../Finding.js"

const RANK: Readonly<Record<Status, number>> = { pass: 0, warn: 1, fail: 2 }

/** The worst status of the findings that concern `revision` (`pass` when none does). */
export const verdictOf = (findings: ReadonlyArray<Finding>, revision: Revision.Revision): Status =>
  findings
    .filter((finding) => finding.revisions.includes(revision))
    .reduce<Status>((worst, finding) => (RANK[finding.status] > RANK[worst] ? finding.status : worst), "pass")

/**
 * The verdict of each selected revision: `fail` when a finding that concerns it fails, `warn` when one warns, else
 * `pass`. A diagnosis that stopped early (the MCP server unreachable) fails for every revision.
 */
export const verdicts = (diagnosis: Diagnosis): Readonly<Partial<Record<Revision.Revision, Status>>> =>
  Object.fromEntries(
    diagnosis.revisions.map((revision) => [
      revision,
      diagnosis.stopped === undefined ? verdictOf(diagnosis.findings, revision) : "fail",
    ]),
  )

/** The failures that concern `revision`. */
export const failuresOf = (findings: ReadonlyArray<Finding>, revision: Revision.Revision): number =>
  findings.filter((finding) => finding.status === "fail" && finding.revisions.includes(revision)).length

/**
 * A revision's verdict in words: `works`, `works with warnings`, `fails: <n> failures`, or `could not run` when the
 * diagnosis stopped early; with its status.
 */
export const verdictWords = (diagnosis: Diagnosis, revision: Revision.Revision): readonly [Status, string] => {
  if (diagnosis.stopped !== undefined) return ["fail", "could not run"]
  const verdict = verdictOf(diagnosis.findings, revision)
  if (verdict === "pass") return ["pass", "works"]
  if (verdict === "warn") return ["warn", "works with warnings"]
  const failures = failuresOf(diagnosis.findings, revision)
  return ["fail", `fails: ${failures} ${failures === 1 ? "failure" : "failures"}`]
}

/**
 * The exit code: 2 when the diagnosis could not run (it stopped early), 1 when a finding fails, 0 otherwise
 * (warnings allowed).
 */
export const exitCode = (diagnosis: Diagnosis): 0 | 1 | 2 =>
  diagnosis.stopped !== undefined ? 2 : diagnosis.findings.some((finding) => finding.status === "fail") ? 1 : 0

/** The catalog entry of a finding's check; a check missing from the catalog is shown by its ID. */
export const entryOf = (catalog: Readonly<Record<string, CheckEntry>>, check: string): CheckEntry | undefined =>
  Object.hasOwn(catalog, check) ? catalog[check] : undefined

/**
 * The servers of a diagnosis in report order: the MCP server first, then the others (its authorization servers) in
 * the order their first finding came, each with its findings.
 */
export const byServer = (diagnosis: Diagnosis): ReadonlyArray<{ server: string; findings: ReadonlyArray<Finding> }> => {
  const groups = new Map<string, Array<Finding>>([[diagnosis.target, []]])
  for (const finding of diagnosis.findings) {
    const group = groups.get(finding.server)
    if (group === undefined) groups.set(finding.server, [finding])
    else group.push(finding)
  }
  return [...groups].filter(([, findings]) => findings.length > 0).map(([server, findings]) => ({ server, findings }))
}
