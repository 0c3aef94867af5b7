/**
 * Runs the official MCP conformance suite's client scenarios against Keyway's conformance client, collects the
 * outcome of every scenario, compares it with the expected failures, and renders the results table.
 *
 * @see {@link https://github.com/modelcontextprotocol/conformance | MCP conformance suite}
 * @module
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { readdir, readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { basename, dirname, join } from "node:path"

/**
 * One invocation of the suite's client mode: a suite, optionally restricted to a spec version, and which of its
 * scenarios are in scope. `label` names the run in the expected-failures file and in the results table.
 */
export interface Run {
  readonly label: string
  readonly suite: string
  readonly specVersion?: string
  /** Scenarios outside this filter are run by the suite (it cannot select them) but not reported. */
  readonly include?: (scenario: string) => boolean
}

const isAuthorizationScenario = (scenario: string): boolean => scenario.startsWith("auth/")

/**
 * The client runs: the authorization scenarios at the default wire and at 2026-07-28, the authorization scenarios
 * of the draft suite, the 2025-03-26 back-compatibility scenarios, and the extension scenarios.
 */
export const CLIENT_RUNS: ReadonlyArray<Run> = [
  { label: "auth", suite: "auth" },
  { label: "auth --spec-version 2026-07-28", suite: "auth", specVersion: "2026-07-28" },
  { label: "draft", suite: "draft", include: isAuthorizationScenario },
  { label: "backcompat", suite: "backcompat" },
  { label: "extensions", suite: "extensions" },
]

/** The outcome of one scenario, as the suite judges it: passed when no check failed and none warned. */
export interface ScenarioResult {
  readonly run: string
  readonly scenario: string
  readonly passed: boolean
  readonly checksPassed: number
  readonly checksFailed: number
  readonly warnings: number
  /** The failed or warning checks and the client's last stderr line, for failed scenarios. */
  readonly detail?: string
}

/** The outcome of one run; `available` is false when the installed suite does not know the run's spec version. */
export interface RunOutcome {
  readonly run: Run
  readonly available: boolean
  readonly note?: string
  readonly results: ReadonlyArray<ScenarioResult>
}

/** An entry of expected-failures.json: a scenario known to fail, and why. */
export interface ExpectedFailure {
  readonly suite: string
  readonly scenario: string
  readonly reason: string
}

const require = createRequire(import.meta.url)

/** The installed suite's version and the path of its CLI. */
export const suiteCli = (): { readonly version: string; readonly path: string } => {
  const manifestPath = require.resolve("@modelcontextprotocol/conformance/package.json")
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as {
    version: string
    bin: Record<string, string>
  }
  const bin = manifest.bin.conformance
  if (bin === undefined) throw new Error("@modelcontextprotocol/conformance declares no conformance binary")
  return { version: manifest.version, path: join(dirname(manifestPath), bin) }
}

/** Options of {@link executeRun}. */
export interface ExecuteOptions {
  /** The client command the suite runs, with the server URL appended; split on spaces by the suite. */
  readonly clientCommand: string
  /** Where the suite writes each scenario's checks.json, stdout.txt and stderr.txt. */
  readonly outputDir: string
  readonly timeoutMs: number
}

const SUMMARY_LINE = /^([✓✗]) (\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?$/gmu
const RESULT_DIR = /^(.*)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/u

const runProcess = (
  args: ReadonlyArray<string>,
): Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    child.on("error", reject)
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }))
  })

interface Check {
  readonly id: string
  readonly status: string
  readonly description?: string
}

/** Finds the result directory the suite wrote for a scenario (`<scenario>-<timestamp>`). */
const resultDirectory = async (outputDir: string, scenario: string): Promise<string | undefined> => {
  const parent = join(outputDir, dirname(scenario))
  const entries = await readdir(parent).catch(() => [] as string[])
  const match = entries.find((entry) => RESULT_DIR.exec(entry)?.[1] === basename(scenario))
  return match === undefined ? undefined : join(parent, match)
}

const oneLine = (text: string): string => text.replace(/\s+/gu, " ").trim()

/** Why a scenario failed: its failed and warning checks, then the client's last line on stderr. */
const failureDetail = async (outputDir: string, scenario: string): Promise<string | undefined> => {
  const directory = await resultDirectory(outputDir, scenario)
  if (directory === undefined) return undefined
  const checks = JSON.parse(await readFile(join(directory, "checks.json"), "utf8")) as ReadonlyArray<Check>
  const bad = checks
    .filter((check) => check.status === "FAILURE" || check.status === "WARNING")
    .map((check) => `${check.status === "WARNING" ? "warning" : "failed"} ${check.id}: ${check.description ?? ""}`)
  const stderr = await readFile(join(directory, "stderr.txt"), "utf8").catch(() => "")
  const lastLine = stderr
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .at(-1)
  const parts = [...new Set(bad)]
  if (lastLine !== undefined) parts.push(`client: ${lastLine}`)
  return parts.length === 0 ? undefined : oneLine(parts.join("; "))
}

/**
 * Runs one suite through the suite's CLI (`conformance client --suite ... -o ...`) and reads the per-scenario
 * outcome from its summary, with details from the result files for failed scenarios.
 */
export const executeRun = async (run: Run, options: ExecuteOptions): Promise<RunOutcome> => {
  const cli = suiteCli()
  const outputDir = join(options.outputDir, run.label.replace(/[^a-z0-9.-]+/giu, "_"))
  const args = [
    cli.path,
    "client",
    "--command",
    options.clientCommand,
    "--suite",
    run.suite,
    "--timeout",
    String(options.timeoutMs),
    "-o",
    outputDir,
    ...(run.specVersion !== undefined ? ["--spec-version", run.specVersion] : []),
  ]
  const { code, stdout, stderr } = await runProcess(args)
  if (run.specVersion !== undefined && stderr.includes("Unknown spec version")) {
    return {
      run,
      available: false,
      note: `@modelcontextprotocol/conformance ${cli.version} has no spec version ${run.specVersion} (${oneLine(stderr.split("\n").find((line) => line.startsWith("Valid versions")) ?? "")})`,
      results: [],
    }
  }
  const results: ScenarioResult[] = []
  for (const match of stdout.matchAll(SUMMARY_LINE)) {
    const [, mark, scenario = "", passed = "0", failed = "0", warnings = "0"] = match
    if (run.include !== undefined && !run.include(scenario)) continue
    const ok = mark === "✓"
    const detail = ok ? undefined : await failureDetail(outputDir, scenario)
    results.push({
      run: run.label,
      scenario,
      passed: ok,
      checksPassed: Number(passed),
      checksFailed: Number(failed),
      warnings: Number(warnings),
      ...(detail !== undefined ? { detail } : {}),
    })
  }
  if (!stdout.includes("=== SUITE SUMMARY ===")) {
    throw new Error(`the conformance suite "${run.label}" ended (exit ${code}) without a summary: ${oneLine(stderr)}`)
  }
  return { run, available: true, results }
}

/**
 * The authorization-server scenarios (`conformance authorization --url <issuer> --client-id ... --resource ...`:
 * `authorization-server-metadata-endpoint` and `authorization-code-grant`), to be run against
 * apps/authorization-server with a registered test client. Not wired yet: the app does not exist.
 */
export const runAuthorizationServerScenarios = async (issuer: string): Promise<RunOutcome> => {
  throw new Error(
    `the authorization-server scenarios are not wired yet (requested for ${issuer}): apps/authorization-server does not exist; @modelcontextprotocol/conformance ${suiteCli().version} runs them with \`conformance authorization\``,
  )
}

/** Parses and checks expected-failures.json. */
export const parseExpectedFailures = (text: string): ReadonlyArray<ExpectedFailure> => {
  const parsed = JSON.parse(text) as unknown
  if (!Array.isArray(parsed)) throw new Error("expected-failures.json must be a JSON array")
  return parsed.map((entry: unknown, index) => {
    const { suite, scenario, reason } = (entry ?? {}) as Record<string, unknown>
    if (typeof suite !== "string" || typeof scenario !== "string" || typeof reason !== "string" || reason === "") {
      throw new Error(`expected-failures.json entry ${index} needs string "suite", "scenario" and a non-empty "reason"`)
    }
    return { suite, scenario, reason }
  })
}

/** How the outcomes differ from the expected failures. */
export interface Comparison {
  readonly unexpectedFailures: ReadonlyArray<ScenarioResult>
  /** Listed as expected failures but passed: the entry must be removed. */
  readonly unexpectedPasses: ReadonlyArray<ScenarioResult>
  /** Listed for a run that ran, but no such scenario ran. */
  readonly staleEntries: ReadonlyArray<ExpectedFailure>
  /** Runs the installed suite could not run (it does not know their spec version): the pin is too old. */
  readonly unavailableRuns: ReadonlyArray<RunOutcome>
}

const keyOf = (suite: string, scenario: string): string => `${suite}\u0000${scenario}`

/** Compares outcomes with the expected failures; only runs that ran are judged. */
export const compare = (outcomes: ReadonlyArray<RunOutcome>, expected: ReadonlyArray<ExpectedFailure>): Comparison => {
  const listed = new Set(expected.map((entry) => keyOf(entry.suite, entry.scenario)))
  const results = outcomes.flatMap((outcome) => outcome.results)
  const seen = new Set(results.map((result) => keyOf(result.run, result.scenario)))
  const ran = new Set(outcomes.filter((outcome) => outcome.available).map((outcome) => outcome.run.label))
  return {
    unexpectedFailures: results.filter((r) => !r.passed && !listed.has(keyOf(r.run, r.scenario))),
    unexpectedPasses: results.filter((r) => r.passed && listed.has(keyOf(r.run, r.scenario))),
    staleEntries: expected.filter((e) => ran.has(e.suite) && !seen.has(keyOf(e.suite, e.scenario))),
    unavailableRuns: outcomes.filter((outcome) => !outcome.available),
  }
}

const cell = (text: string): string => text.replace(/\|/gu, "\\|").replace(/\s+/gu, " ").trim()

/** Renders the results table for docs/conformance.md. */
export const renderMarkdown = (
  outcomes: ReadonlyArray<RunOutcome>,
  expected: ReadonlyArray<ExpectedFailure>,
  suiteVersion: string,
): string => {
  const reasons = new Map(expected.map((entry) => [keyOf(entry.suite, entry.scenario), entry.reason]))
  const results = outcomes.flatMap((outcome) => outcome.results)
  const passed = results.filter((r) => r.passed).length
  const expectedFailed = results.filter((r) => !r.passed && reasons.has(keyOf(r.run, r.scenario))).length
  const lines = [
    "# Conformance",
    "",
    `Results of the official MCP conformance suite (\`@modelcontextprotocol/conformance\` ${suiteVersion}) against`,
    "Keyway's conformance client (`tools/conformance`: `@keyway/client` with the headless user agent, and the official",
    "MCP SDK v2 client). Generated by `node tools/conformance/dist/run.js` (after `npm run build`); do not edit by hand.",
    "Expected failures, each with its reason, are listed in `tools/conformance/expected-failures.json`.",
    "",
    `**${passed} of ${results.length} scenarios pass**; ${expectedFailed} fail as expected; ${results.length - passed - expectedFailed} fail unexpectedly.`,
  ]
  for (const outcome of outcomes) {
    lines.push("", `## \`conformance client --suite ${outcome.run.label}\``, "")
    if (!outcome.available) {
      lines.push(`Not run: ${outcome.note ?? "unavailable"}.`)
      continue
    }
    if (outcome.run.include !== undefined) lines.push("Only the authorization scenarios (`auth/*`) of this suite.", "")
    lines.push("| Scenario | Result | Checks passed / failed / warnings | Notes |", "| --- | --- | --- | --- |")
    for (const r of outcome.results) {
      const reason = reasons.get(keyOf(r.run, r.scenario))
      const result = r.passed
        ? reason === undefined
          ? "pass"
          : "**unexpected pass**"
        : reason === undefined
          ? "**unexpected failure**"
          : "expected failure"
      // Details carry ephemeral ports, so only unexpected failures show them; expected ones show their reason.
      const notes = reason ?? (r.passed ? "" : (r.detail ?? ""))
      lines.push(
        `| \`${r.scenario}\` | ${result} | ${r.checksPassed} / ${r.checksFailed} / ${r.warnings} | ${cell(notes)} |`,
      )
    }
  }
  lines.push(
    "",
    "## Authorization-server scenarios",
    "",
    "Not run yet: the suite runs them with `conformance authorization` against an issuer URL and a registered client,",
    "and they need `apps/authorization-server` (`runAuthorizationServerScenarios` in `tools/conformance/src/runner.ts`",
    "is where they go).",
    "",
  )
  return lines.join("\n")
}
