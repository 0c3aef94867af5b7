// The closing line of `npm test`: tests counted across the vitest JSON reports that the test targets wrote (or that
// Nx restored from its cache). Kept apart from run.mjs so that the counting is tested on real reports.
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

/** Paths of every `.reports/vitest.json` under packages/, apps/ and tools/ (node_modules skipped). */
export const findReports = (root) => {
  const reports = []
  const walk = (dir, depth) => {
    if (depth > 4 || !existsSync(dir)) return
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name === "node_modules" || entry.name.startsWith(".git")) continue
      const report = join(dir, entry.name, ".reports", "vitest.json")
      if (existsSync(report)) reports.push(report)
      walk(join(dir, entry.name), depth + 1)
    }
  }
  for (const top of ["packages", "apps", "tools"]) walk(join(root, top), 0)
  return reports.sort()
}

/**
 * Counts tests, never suites or steps: a failed test is one failure, however many suites and steps it fails with it.
 * A test file that failed without a failed test (it did not load, or a hook threw) counts as one failure, since its
 * tests never ran. Failed steps are named, one a line, and not counted.
 */
export const summarize = (reports, failedSteps) => {
  let passed = 0
  let failed = 0
  let skipped = 0
  const lines = []
  for (const { path, data } of reports) {
    passed += data.numPassedTests ?? 0
    failed += data.numFailedTests ?? 0
    skipped += (data.numPendingTests ?? 0) + (data.numTodoTests ?? 0)
    const files = [...(data.testResults ?? [])].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const file of files) {
      const tests = file.assertionResults ?? []
      for (const test of tests) if (test.status === "failed") lines.push(`failed test: ${file.name} > ${test.fullName}`)
      if (file.status === "failed" && !tests.some((test) => test.status === "failed")) {
        failed += 1
        lines.push(`failed test file (no test in it failed; it did not run to the end): ${file.name}`)
      }
    }
    if ((data.testResults ?? []).length === 0 && data.success === false) {
      failed += 1
      lines.push(`failed test run without results: ${path}`)
    }
  }
  for (const step of failedSteps) lines.push(`failed step: ${step}`)
  return { passed, failed, skipped, lines }
}

/** The summary's lines, the last one `N passed, N failed` (`, N skipped` when some were). */
export const summaryText = ({ passed, failed, skipped, lines }) =>
  `${lines.map((line) => `${line}\n`).join("")}\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`

/** Reads the reports under `root` and summarizes them with the failed steps. */
export const summarizeTree = (root, failedSteps) =>
  summarize(
    findReports(root).map((path) => ({ path, data: JSON.parse(readFileSync(path, "utf8")) })),
    failedSteps,
  )
