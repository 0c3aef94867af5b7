/**
 * Runs the official MCP conformance suite's client scenarios against Keyway's conformance client, collects the
 * outcome of every scenario, compares it with the expected failures, and renders the results table.
 *
 * @see {@link https://github.com/modelcontextprotocol/conformance | MCP conformance suite}
 * @module
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { badChecks, oneLine, readChecks, resultDirectory, unknownSpecVersion } from "./internal/results.js"

/**
 * One invocation of the suite's client mode: a suite, optionally restricted to a spec version, and which of its
 * scenarios are in scope. `label` names the run in the expected-failures file and in the results table.
 */
export interface ClientRun {
  readonly command: "client"
  readonly label: string
  readonly suite: string
  readonly specVersion?: string
  /**
   * Scenarios to run one by one with `--force` instead of the whole suite: the suite leaves out scenarios that are not
   * on a spec version's timeline (the extensions) when a spec version is given, and forces only single scenarios.
   */
  readonly forced?: ReadonlyArray<string>
  /** Scenarios outside this filter are run by the suite (it cannot select them) but not reported. */
  readonly include?: (scenario: string) => boolean
}

/**
 * One invocation of the suite's authorization-server mode (`conformance authorization --spec-version ...`)
 * against Keyway's authorization server. `label` names the run in the expected-failures file and in the table.
 */
export interface AuthorizationRun {
  readonly command: "authorization"
  readonly label: string
  readonly specVersion: string
}

/** A run of the suite: its client mode or its authorization-server mode. */
export type Run = ClientRun | AuthorizationRun

const isAuthorizationScenario = (scenario: string): boolean => scenario.startsWith("auth/")

/**
 * The client runs: the authorization scenarios at the default wire and at 2026-07-28, the authorization scenarios
 * of the draft suite, the 2025-03-26 back-compatibility scenarios, and the extension scenarios.
 */
/** The extension scenarios of the pinned suite (`conformance client --suite extensions`). */
const EXTENSION_SCENARIOS = [
  "auth/client-credentials-jwt",
  "auth/client-credentials-basic",
  "auth/enterprise-managed-authorization",
  "auth/dpop",
  "auth/dpop-nonce",
  "auth/wif-jwt-bearer",
]

export const CLIENT_RUNS: ReadonlyArray<ClientRun> = [
  { command: "client", label: "auth", suite: "auth" },
  { command: "client", label: "auth --spec-version 2026-07-28", suite: "auth", specVersion: "2026-07-28" },
  { command: "client", label: "draft", suite: "draft", include: isAuthorizationScenario },
  { command: "client", label: "backcompat", suite: "backcompat" },
  { command: "client", label: "extensions", suite: "extensions" },
  {
    command: "client",
    label: "extensions --spec-version 2026-07-28",
    suite: "extensions",
    specVersion: "2026-07-28",
    forced: EXTENSION_SCENARIOS,
  },
]

/**
 * The authorization-server runs: every spec version the suite's authorization-server scenarios apply to. The
 * scenarios are the same in each; the checks differ (client ID metadata document support is checked from
 * 2025-11-25 on).
 */
export const AUTHORIZATION_RUNS: ReadonlyArray<AuthorizationRun> = [
  "2025-03-26",
  "2025-06-18",
  "2025-11-25",
  "2026-07-28",
].map((specVersion) => ({
  command: "authorization",
  label: `authorization --spec-version ${specVersion}`,
  specVersion,
}))

/** Every run, in the order `npm run conformance` runs them. */
export const ALL_RUNS: ReadonlyArray<Run> = [...CLIENT_RUNS, ...AUTHORIZATION_RUNS]

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

/** A scenario's line in the suite's summary; authorization-server mode prints no warnings count. */
export const SUMMARY_LINE = /^([✓✗]) (\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?$/gmu

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

/** Why a scenario failed: its failed and warning checks, then the client's last line on stderr. */
const failureDetail = async (outputDir: string, scenario: string): Promise<string | undefined> => {
  const directory = await resultDirectory(outputDir, scenario)
  if (directory === undefined) return undefined
  const parts = [...badChecks(await readChecks(directory))]
  const stderr = await readFile(join(directory, "stderr.txt"), "utf8").catch(() => "")
  const lastLine = stderr
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .at(-1)
  if (lastLine !== undefined) parts.push(`client: ${lastLine}`)
  return parts.length === 0 ? undefined : oneLine(parts.join("; "))
}

/** One scenario's result, with the details of its result files when it failed. */
const resultOf = async (
  run: ClientRun,
  outputDir: string,
  scenario: string,
  ok: boolean,
  counts: { readonly passed: string; readonly failed: string; readonly warnings: string },
): Promise<ScenarioResult> => {
  const detail = ok ? undefined : await failureDetail(outputDir, scenario)
  return {
    run: run.label,
    scenario,
    passed: ok,
    checksPassed: Number(counts.passed),
    checksFailed: Number(counts.failed),
    warnings: Number(counts.warnings),
    ...(detail !== undefined ? { detail } : {}),
  }
}

/**
 * Runs one suite through the suite's CLI (`conformance client --suite ... -o ...`) and reads the per-scenario
 * outcome from its summary, with details from the result files for failed scenarios.
 */
export const executeRun = async (run: ClientRun, options: ExecuteOptions): Promise<RunOutcome> => {
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
  if (run.forced !== undefined) return executeForced(run, run.forced, args, outputDir)
  const { code, stdout, stderr } = await runProcess(args)
  const unknown = unknownSpecVersion(stderr, cli.version, run.specVersion)
  if (unknown !== undefined) return { run, available: false, note: unknown, results: [] }
  const results: ScenarioResult[] = []
  for (const match of stdout.matchAll(SUMMARY_LINE)) {
    const [, mark, scenario = "", passed = "0", failed = "0", warnings = "0"] = match
    if (run.include !== undefined && !run.include(scenario)) continue
    results.push(await resultOf(run, outputDir, scenario, mark === "✓", { passed, failed, warnings }))
  }
  if (!stdout.includes("=== SUITE SUMMARY ===")) {
    throw new Error(`the conformance suite "${run.label}" ended (exit ${code}) without a summary: ${oneLine(stderr)}`)
  }
  return { run, available: true, results }
}

/** A single scenario's summary in the suite's output. */
const SCENARIO_SUMMARY = /^Passed: (\d+)\/\d+, (\d+) failed, (\d+) warnings$/mu

/** Runs each scenario on its own (`--scenario ... --force`), with the run's other arguments. */
const executeForced = async (
  run: ClientRun,
  scenarios: ReadonlyArray<string>,
  suiteArgs: ReadonlyArray<string>,
  outputDir: string,
): Promise<RunOutcome> => {
  const results: ScenarioResult[] = []
  for (const scenario of scenarios) {
    const args = suiteArgs.map((arg, i) =>
      suiteArgs[i - 1] === "--suite" ? scenario : arg === "--suite" ? "--scenario" : arg,
    )
    const { code, stdout, stderr } = await runProcess([...args, "--force"])
    const unknown = unknownSpecVersion(stderr, suiteCli().version, run.specVersion)
    if (unknown !== undefined) return { run, available: false, note: unknown, results: [] }
    // A single scenario's summary goes to either stream, depending on how the suite's output is attached.
    const output = `${stdout}\n${stderr}`
    const summary = SCENARIO_SUMMARY.exec(output)
    if (summary === null) {
      throw new Error(`the conformance scenario ${scenario} ended (exit ${code}) without a summary: ${oneLine(stderr)}`)
    }
    const [, passed = "0", failed = "0", warnings = "0"] = summary
    const ok = failed === "0" && warnings === "0" && output.includes("OVERALL: PASSED")
    results.push(await resultOf(run, outputDir, scenario, ok, { passed, failed, warnings }))
  }
  return { run, available: true, results }
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

/** The suite command line a run stands for. */
const heading = (run: Run): string =>
  run.command === "client" ? `conformance client --suite ${run.label}` : `conformance ${run.label}`

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
    "Keyway's conformance client (`conformance client`: `tools/conformance`, built on `@keyway/client` with the",
    "headless user agent and the official MCP SDK v2 client) and against Keyway's authorization server",
    "(`conformance authorization`: `apps/authorization-server` with SQLite in a fresh directory, a registered public",
    "test client, and the login and consent played by headless Chromium; see `tools/conformance/README.md`).",
    "Generated by `node tools/conformance/dist/run.js` (after `npm run build`); do not edit by hand. Expected",
    "failures, each with its reason, are listed in `tools/conformance/expected-failures.json`.",
    "",
    `**${passed} of ${results.length} scenarios pass**; ${expectedFailed} fail as expected; ${results.length - passed - expectedFailed} fail unexpectedly.`,
  ]
  for (const outcome of outcomes) {
    lines.push("", `## \`${heading(outcome.run)}\``, "")
    if (!outcome.available) {
      lines.push(`Not run: ${outcome.note ?? "unavailable"}.`)
      continue
    }
    if (outcome.run.command === "client" && outcome.run.include !== undefined)
      lines.push("Only the authorization scenarios (`auth/*`) of this suite.", "")
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
  lines.push("")
  return lines.join("\n")
}
