/**
 * The text report, for a person: the findings grouped by server, one line each, with what was seen, why it matters,
 * the fix, the spec section and the exchanges under every warning and failure; then one verdict line per revision.
 *
 * @module
 */
import type { Revision } from "@keyway/core"
import { type Diagnosis, catalog as doctorCatalog } from "../diagnose.js"
import type { CheckEntry, Exchange, Finding, Status } from "../Finding.js"
import { byServer, entryOf, verdictWords } from "./verdict.js"

/** Options of {@link formatText}. */
export interface TextOptions {
  /** Colour the status words with ANSI escapes; off by default (see {@link useColor}). */
  readonly color?: boolean
  /** The checks' titles, reasons and fixes; the doctor's own catalog by default. */
  readonly catalog?: Readonly<Record<string, CheckEntry>>
}

/**
 * Whether to colour the report: only on a terminal, and never when `NO_COLOR` is set to a non-empty value.
 *
 * @see {@link https://no-color.org/ | NO_COLOR}
 */
export const useColor = (stream: { readonly isTTY?: boolean }, env: Readonly<Record<string, string | undefined>>) =>
  stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === "")

const COLORS: Readonly<Record<Status, string>> = { pass: "\u001b[32m", warn: "\u001b[33m", fail: "\u001b[31m" }
const RESET = "\u001b[0m"
const INDENT = "        "

/**
 * One exchange as a line: `GET https://x/.well-known/... → 200`, the Origin of a browser's request, or why no answer
 * came.
 */
export const exchangeLine = (exchange: Exchange): string => {
  const answer =
    exchange.status === undefined
      ? `no answer (${exchange.error ?? "unknown error"})`
      : [
          String(exchange.status),
          ...(exchange.headers?.location === undefined ? [] : [`location: ${exchange.headers.location}`]),
          ...(exchange.error === undefined ? [] : [exchange.error]),
        ].join(", ")
  // A request with an Origin is a browser's (CORS); it is told apart from the same request without one.
  const origin = exchange.requestHeaders?.origin
  return `${exchange.method} ${exchange.url}${origin === undefined ? "" : ` (origin ${origin})`} → ${answer}`
}

const revisionsNote = (finding: Finding, selected: ReadonlyArray<Revision.Revision>) =>
  finding.revisions.length === selected.length && selected.every((revision) => finding.revisions.includes(revision))
    ? ""
    : `  (${finding.revisions.join(", ")})`

/** The text report of a diagnosis, lines ending with a newline. */
export const formatText = (diagnosis: Diagnosis, options: TextOptions = {}): string => {
  const catalog = options.catalog ?? doctorCatalog
  const paint = (status: Status) => {
    const word = status.toUpperCase()
    return options.color === true ? `${COLORS[status]}${word}${RESET}` : word
  }
  const lines: Array<string> = [`keyway-doctor ${diagnosis.target}`, `revisions: ${diagnosis.revisions.join(", ")}`]
  for (const { server, findings } of byServer(diagnosis)) {
    lines.push("", `${server} (${server === diagnosis.target ? "MCP server" : "authorization server"})`)
    const repeated = new Set(
      findings.map((finding) => finding.check).filter((check, i, checks) => checks.indexOf(check) !== i),
    )
    for (const finding of findings) {
      const entry = entryOf(catalog, finding.check)
      const title = entry?.title ?? finding.check
      lines.push(`  ${paint(finding.status)}  ${title}${revisionsNote(finding, diagnosis.revisions)}`)
      if (finding.status === "pass") {
        // A check that passes more than once on a server (one finding per client, say) says what each one is about.
        if (repeated.has(finding.check)) lines.push(`${INDENT}${finding.detail}`)
        continue
      }
      lines.push(`${INDENT}seen: ${finding.detail}`)
      if (entry !== undefined) {
        lines.push(`${INDENT}why:  ${entry.why}`, `${INDENT}fix:  ${entry.fix}`, `${INDENT}spec: ${entry.spec}`)
      }
      for (const exchange of finding.exchanges) lines.push(`${INDENT}${exchangeLine(exchange)}`)
    }
  }
  lines.push("")
  if (diagnosis.stopped !== undefined) lines.push(`stopped: ${diagnosis.stopped}`)
  for (const revision of diagnosis.revisions) lines.push(`${revision}: ${verdictWords(diagnosis, revision)[1]}`)
  return `${lines.join("\n")}\n`
}
