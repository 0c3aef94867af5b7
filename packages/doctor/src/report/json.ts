/**
 * The JSON report, for machines: the findings with their checks' titles, reasons and fixes, a verdict per revision,
 * and why the diagnosis stopped when it did. {@link reportSchema} is its schema (version 1).
 *
 * @module
 */
import { Revision } from "@keyway/core"
import { z } from "zod"
import { type Diagnosis, catalog as doctorCatalog } from "../diagnose.js"
import type { CheckEntry } from "../Finding.js"
import { entryOf, verdicts } from "./verdict.js"

const status = z.enum(["pass", "warn", "fail"])
const revision = z.enum(Revision.all)

/** One HTTP exchange of a finding (see `Exchange`). */
export const exchangeSchema = z.object({
  method: z.string(),
  url: z.string(),
  requestHeaders: z.record(z.string(), z.string()).optional(),
  status: z.number().int().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  body: z.string().optional(),
  error: z.string().optional(),
})

/** One finding with its check's catalog entry (`why`, `fix` and `spec` absent for a check the catalog lacks). */
export const findingSchema = z.object({
  check: z.string(),
  status,
  server: z.string(),
  revisions: z.array(revision),
  title: z.string(),
  detail: z.string(),
  why: z.string().optional(),
  fix: z.string().optional(),
  spec: z.string().optional(),
  exchanges: z.array(exchangeSchema),
})

/**
 * The JSON report (`keyway-doctor --json`), version 1: `target` (the MCP server URL as given), `revisions` (those
 * checked), `findings` in report order, `verdicts` (per revision, the worst status of the findings that concern it;
 * `fail` for all when the diagnosis stopped) and `stopped` (why the diagnosis could not go on, when it could not).
 */
export const reportSchema = z.object({
  version: z.literal(1),
  target: z.string(),
  revisions: z.array(revision),
  findings: z.array(findingSchema),
  verdicts: z.partialRecord(revision, status),
  stopped: z.string().optional(),
})

/** The JSON report's type. */
export type Report = z.infer<typeof reportSchema>

/** Options of {@link toReport}. */
export interface JsonOptions {
  /** The checks' titles, reasons and fixes; the doctor's own catalog by default. */
  readonly catalog?: Readonly<Record<string, CheckEntry>>
}

/** The JSON report of a diagnosis, as a value (serialize it with `JSON.stringify`). */
export const toReport = (diagnosis: Diagnosis, options: JsonOptions = {}): Report => {
  const catalog = options.catalog ?? doctorCatalog
  return {
    version: 1,
    target: diagnosis.target,
    revisions: [...diagnosis.revisions],
    findings: diagnosis.findings.map((finding) => {
      const entry = entryOf(catalog, finding.check)
      return {
        check: finding.check,
        status: finding.status,
        server: finding.server,
        revisions: [...finding.revisions],
        title: entry?.title ?? finding.check,
        detail: finding.detail,
        ...(entry === undefined ? {} : { why: entry.why, fix: entry.fix, spec: entry.spec }),
        exchanges: finding.exchanges.map((exchange) => ({
          ...exchange,
          ...(exchange.requestHeaders === undefined ? {} : { requestHeaders: { ...exchange.requestHeaders } }),
          ...(exchange.headers === undefined ? {} : { headers: { ...exchange.headers } }),
        })),
      }
    }),
    verdicts: { ...verdicts(diagnosis) },
    ...(diagnosis.stopped === undefined ? {} : { stopped: diagnosis.stopped }),
  }
}

/** The JSON report as text: indented, ending with a newline. */
export const formatJson = (diagnosis: Diagnosis, options: JsonOptions = {}): string =>
  `${JSON.stringify(toReport(diagnosis, options), null, 2)}\n`
