#!/usr/bin/env node
/**
 * `node tools/conformance/dist/run.js`: runs the official MCP conformance suite's client scenarios against Keyway's
 * conformance client and its authorization-server scenarios against Keyway's authorization server, writes
 * docs/conformance.md, and exits non-zero on any unexpected failure, any unexpected pass (a listed failure that now
 * passes must be removed from expected-failures.json), any stale entry, or any run the installed suite cannot run
 * (a spec version it does not know).
 *
 * Options: `--only <run label>` (repeatable, for example `--only auth --only "authorization --spec-version
 * 2026-07-28"`), `--output <file>` (default docs/conformance.md at the repository root), `--no-write`,
 * `--expected-failures <file>`, `--timeout <ms>` per scenario or browser step (default 30000).
 *
 * @module
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { executeAuthorizationRun, startAuthorizationEnvironment } from "./authorization.js"
import {
  ALL_RUNS,
  compare,
  executeRun,
  parseExpectedFailures,
  type RunOutcome,
  renderMarkdown,
  suiteCli,
} from "./runner.js"

const packageRoot = fileURLToPath(new URL("../", import.meta.url))
const repositoryRoot = fileURLToPath(new URL("../../../", import.meta.url))

const main = async (): Promise<number> => {
  const major = Number(process.versions.node.split(".")[0])
  if (major < 22) throw new Error(`the conformance suite needs Node 22 or later; this is Node ${process.versions.node}`)
  const { values } = parseArgs({
    options: {
      only: { type: "string", multiple: true },
      output: { type: "string", default: join(repositoryRoot, "docs", "conformance.md") },
      "no-write": { type: "boolean", default: false },
      "expected-failures": { type: "string", default: join(packageRoot, "expected-failures.json") },
      timeout: { type: "string", default: "30000" },
    },
  })
  const only = values.only ?? []
  const unknown = only.filter((label) => !ALL_RUNS.some((run) => run.label === label))
  if (unknown.length > 0) {
    throw new Error(`unknown run ${unknown.join(", ")}; runs: ${ALL_RUNS.map((run) => run.label).join(", ")}`)
  }
  const runs = only.length === 0 ? ALL_RUNS : ALL_RUNS.filter((run) => only.includes(run.label))
  const timeoutMs = Number(values.timeout)
  const clientPath = join(packageRoot, "dist", "client.js")
  const clientCommand = `${process.execPath} ${clientPath}`
  // The suite splits the command on spaces before running it through a shell.
  if (/\s/u.test(process.execPath) || /\s/u.test(clientPath)) {
    throw new Error(`the suite cannot run a client whose path contains spaces: ${clientCommand}`)
  }
  const expected = parseExpectedFailures(await readFile(values["expected-failures"], "utf8"))
  const outputDir = await mkdtemp(join(tmpdir(), "keyway-conformance-"))
  const outcomes: RunOutcome[] = []
  const report = (outcome: RunOutcome) => {
    outcomes.push(outcome)
    if (!outcome.available) process.stderr.write(`  not run: ${outcome.note}\n`)
    for (const result of outcome.results) {
      process.stderr.write(`  ${result.passed ? "pass" : "FAIL"} ${result.scenario}\n`)
    }
  }
  try {
    for (const run of runs) {
      if (run.command !== "client") continue
      process.stderr.write(`conformance client --suite ${run.label} ...\n`)
      report(await executeRun(run, { clientCommand, outputDir, timeoutMs }))
    }
    const authorizationRuns = runs.filter((run) => run.command === "authorization")
    if (authorizationRuns.length > 0) {
      const environment = await startAuthorizationEnvironment(outputDir)
      try {
        for (const run of authorizationRuns) {
          process.stderr.write(`conformance ${run.label} (against ${environment.fixture.issuer}) ...\n`)
          report(await executeAuthorizationRun(run, environment, { outputDir, timeoutMs }))
        }
      } finally {
        await environment.close()
      }
    }
  } finally {
    await rm(outputDir, { recursive: true, force: true })
  }
  const markdown = renderMarkdown(outcomes, expected, suiteCli().version)
  if (!values["no-write"]) {
    await writeFile(values.output, markdown)
    process.stderr.write(`wrote ${values.output}\n`)
  }
  const { unexpectedFailures, unexpectedPasses, staleEntries, unavailableRuns } = compare(outcomes, expected)
  for (const r of unexpectedFailures) {
    process.stderr.write(`unexpected failure: [${r.run}] ${r.scenario}: ${r.detail ?? "no detail"}\n`)
  }
  for (const r of unexpectedPasses) {
    process.stderr.write(
      `unexpected pass: [${r.run}] ${r.scenario} now passes; remove it from expected-failures.json\n`,
    )
  }
  for (const e of staleEntries) {
    process.stderr.write(`stale entry: [${e.suite}] ${e.scenario} did not run; remove it from expected-failures.json\n`)
  }
  for (const o of unavailableRuns) {
    process.stderr.write(`run not available: [${o.run.label}] ${o.note ?? ""}; pin a suite version that has it\n`)
  }
  const results = outcomes.flatMap((outcome) => outcome.results)
  const bad = unexpectedFailures.length + unexpectedPasses.length + staleEntries.length + unavailableRuns.length
  process.stdout.write(
    `${results.filter((r) => r.passed).length}/${results.length} scenarios passed; ${bad === 0 ? "all as expected" : `${bad} unexpected outcome(s)`}\n`,
  )
  return bad === 0 ? 0 : 1
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`conformance: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(2)
  },
)
