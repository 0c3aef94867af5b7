// Types of summary.mjs for the TypeScript tests that import it (tools/testing/test/bootstrap-summary.test.ts).

/** The fields of vitest's JSON report that the summary reads. */
export interface VitestJson {
  readonly success?: boolean
  readonly numPassedTests?: number
  readonly numFailedTests?: number
  readonly numPendingTests?: number
  readonly numTodoTests?: number
  readonly testResults?: ReadonlyArray<{
    readonly name: string
    readonly status: string
    readonly assertionResults?: ReadonlyArray<{ readonly fullName: string; readonly status: string }>
  }>
}

export interface VitestReport {
  readonly path: string
  readonly data: VitestJson
}

export interface Summary {
  readonly passed: number
  readonly failed: number
  readonly skipped: number
  readonly lines: ReadonlyArray<string>
}

export declare const findReports: (root: string) => string[]
export declare const summarize: (reports: ReadonlyArray<VitestReport>, failedSteps: ReadonlyArray<string>) => Summary
export declare const summaryText: (summary: Summary) => string
export declare const summarizeTree: (root: string, failedSteps: ReadonlyArray<string>) => Summary
