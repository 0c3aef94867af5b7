import { describe, expect, it } from "vitest"
import { parseContext } from "../src/context.js"
import { ALL_RUNS, compare, parseExpectedFailures, type RunOutcome, renderMarkdown } from "../src/runner.js"

const run = (label: string) => ALL_RUNS.find((r) => r.label === label)!

const outcome = (label: string, results: ReadonlyArray<[string, boolean]>): RunOutcome => ({
  run: run(label),
  available: true,
  results: results.map(([scenario, passed]) => ({
    run: label,
    scenario,
    passed,
    checksPassed: passed ? 5 : 3,
    checksFailed: passed ? 0 : 2,
    warnings: 0,
    ...(passed ? {} : { detail: `failed check of ${scenario}` }),
  })),
})

describe("parseExpectedFailures", () => {
  it("reads entries with suite, scenario and reason", () => {
    expect(parseExpectedFailures('[{"suite":"auth","scenario":"auth/x","reason":"not built"}]')).toEqual([
      { suite: "auth", scenario: "auth/x", reason: "not built" },
    ])
  })

  it("rejects an entry without a reason", () => {
    expect(() => parseExpectedFailures('[{"suite":"auth","scenario":"auth/x","reason":""}]')).toThrow(
      'expected-failures.json entry 0 needs string "suite", "scenario" and a non-empty "reason"',
    )
  })

  it("rejects a file that is not an array", () => {
    expect(() => parseExpectedFailures("{}")).toThrow("expected-failures.json must be a JSON array")
  })
})

describe("compare", () => {
  const expected = parseExpectedFailures(
    JSON.stringify([
      { suite: "auth", scenario: "auth/listed-fails", reason: "r1" },
      { suite: "auth", scenario: "auth/listed-passes", reason: "r2" },
      { suite: "auth", scenario: "auth/gone", reason: "r3" },
      { suite: "backcompat", scenario: "auth/not-run", reason: "r4" },
      { suite: "auth --spec-version 2026-07-28", scenario: "auth/unavailable", reason: "r5" },
    ]),
  )
  const outcomes: ReadonlyArray<RunOutcome> = [
    outcome("auth", [
      ["auth/ok", true],
      ["auth/listed-fails", false],
      ["auth/listed-passes", true],
      ["auth/new-failure", false],
    ]),
    { run: run("auth --spec-version 2026-07-28"), available: false, note: "no such version", results: [] },
  ]

  it("flags unexpected failures, unexpected passes and stale entries of runs that ran", () => {
    const result = compare(outcomes, expected)
    expect(result.unexpectedFailures.map((r) => r.scenario)).toEqual(["auth/new-failure"])
    expect(result.unexpectedPasses.map((r) => r.scenario)).toEqual(["auth/listed-passes"])
    expect(result.staleEntries.map((e) => e.scenario)).toEqual(["auth/gone"])
    expect(result.unavailableRuns.map((o) => o.run.label)).toEqual(["auth --spec-version 2026-07-28"])
  })

  it("finds nothing to flag when the outcomes are as expected", () => {
    const result = compare([outcome("auth", [["auth/ok", true]])], [])
    expect(result).toEqual({ unexpectedFailures: [], unexpectedPasses: [], staleEntries: [], unavailableRuns: [] })
  })

  it("renders one table row per scenario with its verdict", () => {
    const markdown = renderMarkdown(outcomes, expected, "9.9.9")
    expect(markdown).toContain("`@modelcontextprotocol/conformance` 9.9.9")
    expect(markdown).toContain("**2 of 4 scenarios pass**; 1 fail as expected; 1 fail unexpectedly.")
    expect(markdown).toContain("| `auth/ok` | pass | 5 / 0 / 0 |  |")
    expect(markdown).toContain("| `auth/listed-fails` | expected failure | 3 / 2 / 0 | r1 |")
    expect(markdown).toContain("| `auth/listed-passes` | **unexpected pass** | 5 / 0 / 0 | r2 |")
    expect(markdown).toContain(
      "| `auth/new-failure` | **unexpected failure** | 3 / 2 / 0 | failed check of auth/new-failure |",
    )
    expect(markdown).toContain(
      "## `conformance client --suite auth --spec-version 2026-07-28`\n\nNot run: no such version.",
    )
  })

  it("heads an authorization-server run with its command line", () => {
    const markdown = renderMarkdown(
      [outcome("authorization --spec-version 2025-11-25", [["authorization-code-grant", true]])],
      [],
      "9.9.9",
    )
    expect(markdown).toContain(
      "## `conformance authorization --spec-version 2025-11-25`\n\n| Scenario | Result | Checks passed / failed / warnings | Notes |",
    )
    expect(markdown).toContain("| `authorization-code-grant` | pass | 5 / 0 / 0 |  |")
  })
})

describe("parseContext", () => {
  it("keeps the credential fields and ignores others", () => {
    expect(parseContext('{"name":"auth/x","client_id":"c","client_secret":"s","other":1}')).toEqual({
      name: "auth/x",
      client_id: "c",
      client_secret: "s",
    })
  })

  it("keeps the workload's JWT of the workload identity scenarios", () => {
    expect(
      parseContext('{"name":"auth/wif-jwt-bearer","client_id":"w","valid_jwt":"a.b.c","expired_jwt":"d.e.f"}'),
    ).toEqual({
      name: "auth/wif-jwt-bearer",
      client_id: "w",
      valid_jwt: "a.b.c",
    })
  })

  it("treats an absent context as empty", () => {
    expect(parseContext(undefined)).toEqual({})
  })

  it("rejects a context that is not a JSON object", () => {
    expect(() => parseContext("[1]")).toThrow("MCP_CONFORMANCE_CONTEXT is not a JSON object")
  })
})
