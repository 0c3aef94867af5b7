/**
 * The Keyway doctor: why an MCP server, or the authorization server behind it, fails with real MCP clients. It walks
 * from the MCP server to its authorization servers as a client of each MCP revision does, checks every rule on the
 * way, and reports each finding with what was sent and seen, why it matters and the fix.
 *
 * @packageDocumentation
 */
export { catalog, type Diagnosis, diagnose, stages } from "./diagnose.js"
export type { CheckEntry, Exchange, Finding, Status } from "./Finding.js"
export { createProbe, type Probe, type ProbeOptions, type Seen } from "./Probe.js"
export {
  escapeHtml,
  formatHtml,
  type HtmlOptions,
  type RevisionWalk,
  type WalkStep,
  walkOf,
} from "./report/html.js"
export {
  exchangeSchema,
  findingSchema,
  formatJson,
  type JsonOptions,
  type Report,
  reportSchema,
  toReport,
} from "./report/json.js"
export { exchangeLine, formatText, type TextOptions, useColor } from "./report/text.js"
export { byServer, entryOf, exitCode, failuresOf, verdictOf, verdicts, verdictWords } from "./report/verdict.js"
export type { AuthorizationServerFound, DiagnoseOptions, Stage, Walk } from "./Walk.js"
