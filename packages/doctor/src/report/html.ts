/**
 * The HTML report: one self-contained page (inline CSS, no script, no external asset) with the verdicts, the findings
 * by server, and for each revision the discovery walk drawn as a sequence of requests: what a client of that revision
 * asks, of which server, in order, what each answered, and where the client stops. Every value from a server is
 * escaped, so a hostile answer shows as text.
 *
 * @module
 */
import type { Revision } from "@keyway/core"
import { type Diagnosis, catalog as doctorCatalog } from "../diagnose.js"
import type { CheckEntry, Exchange, Finding, Status } from "../Finding.js"
import { exchangeLine } from "./text.js"
import { byServer, entryOf, verdictWords } from "./verdict.js"

/** Options of {@link formatHtml}. */
export interface HtmlOptions {
  /** The checks' titles, reasons and fixes; the doctor's own catalog by default. */
  readonly catalog?: Readonly<Record<string, CheckEntry>>
}

/** Text made safe for HTML content and attribute values. */
export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/gu, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c)

/** One request of a revision's walk. */
export interface WalkStep {
  readonly exchange: Exchange
  /** The worst status of the findings (of this revision) resting on it. */
  readonly status: Status
  /** The failing checks' titles, when it fails. */
  readonly failures: ReadonlyArray<string>
}

/** A revision's discovery walk: its requests in order and the one where a client of that revision stops. */
export interface RevisionWalk {
  readonly revision: Revision.Revision
  readonly steps: ReadonlyArray<WalkStep>
  /** The index of the step where the client stops, when it does. */
  readonly stopsAt?: number
  /** Why it stops there. */
  readonly reason?: string
}

const RANK: Readonly<Record<Status, number>> = { pass: 0, warn: 1, fail: 2 }

const keyOf = (exchange: Exchange) =>
  JSON.stringify([exchange.method, exchange.url, exchange.status ?? null, exchange.requestHeaders ?? {}])

/**
 * The walk of one revision, built from the exchanges of the findings that concern it, in report order, each request
 * once; a request made with another revision's `MCP-Protocol-Version` belongs to that revision's walk. The client
 * stops at the first request a failing check rests on, or at the last one when the diagnosis stopped.
 */
export const walkOf = (
  diagnosis: Diagnosis,
  revision: Revision.Revision,
  catalog: Readonly<Record<string, CheckEntry>>,
): RevisionWalk => {
  const steps = new Map<string, { exchange: Exchange; status: Status; failures: Array<string> }>()
  for (const finding of diagnosis.findings) {
    if (!finding.revisions.includes(revision)) continue
    for (const exchange of finding.exchanges) {
      const version = exchange.requestHeaders?.["mcp-protocol-version"]
      if (version !== undefined && version !== revision) continue
      const key = keyOf(exchange)
      const step = steps.get(key) ?? { exchange, status: "pass" as Status, failures: [] }
      if (RANK[finding.status] > RANK[step.status]) step.status = finding.status
      if (finding.status === "fail") step.failures.push(entryOf(catalog, finding.check)?.title ?? finding.check)
      steps.set(key, step)
    }
  }
  const list = [...steps.values()]
  const failing = list.findIndex((step) => step.status === "fail")
  if (failing >= 0) {
    return { revision, steps: list, stopsAt: failing, reason: list[failing]?.failures.join("; ") ?? "" }
  }
  if (diagnosis.stopped !== undefined) {
    return {
      revision,
      steps: list,
      ...(list.length === 0 ? {} : { stopsAt: list.length - 1 }),
      reason: diagnosis.stopped,
    }
  }
  return { revision, steps: list }
}

const originOf = (url: string) => {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}
const pathOf = (url: string) => {
  try {
    const parsed = new URL(url)
    return `${parsed.pathname}${parsed.search}`
  } catch {
    return url
  }
}
const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

const LANE = 440
const ROW = 26
const TOP = 56

/** The walk as an SVG sequence diagram: the client and each server a lifeline, each request an arrow and its answer. */
const sequence = (walk: RevisionWalk): string => {
  const origins = [...new Set(walk.steps.map((step) => originOf(step.exchange.url)))]
  const laneX = (i: number) => 90 + i * LANE
  const width = laneX(origins.length) + 110
  const height = TOP + walk.steps.length * 2 * ROW + (walk.stopsAt === undefined ? 0 : ROW) + 30
  const parts: Array<string> = []
  const lanes = ["client", ...origins]
  lanes.forEach((name, i) => {
    parts.push(
      `<text x="${laneX(i)}" y="20" class="lane">${escapeHtml(clip(name, 40))}<title>${escapeHtml(name)}</title></text>`,
      `<line x1="${laneX(i)}" y1="30" x2="${laneX(i)}" y2="${height - 10}" class="life"/>`,
    )
  })
  walk.steps.forEach((step, n) => {
    const x = laneX(origins.indexOf(originOf(step.exchange.url)) + 1)
    // The line saying where the client stops takes a row of its own, below its step.
    const y = TOP + n * 2 * ROW + (walk.stopsAt !== undefined && n > walk.stopsAt ? ROW : 0)
    const after = walk.stopsAt !== undefined && n > walk.stopsAt ? " after" : ""
    const answer =
      step.exchange.status === undefined
        ? `no answer: ${step.exchange.error ?? "unknown error"}`
        : `${step.exchange.status}${step.exchange.headers?.location === undefined ? "" : ` → ${step.exchange.headers.location}`}`
    const request = `${step.exchange.method} ${pathOf(step.exchange.url)}${step.exchange.requestHeaders?.origin === undefined ? "" : " (origin)"}`
    parts.push(
      `<g class="step ${step.status}${after}">`,
      `<line x1="${laneX(0)}" y1="${y}" x2="${x - 6}" y2="${y}" class="req"/>`,
      `<polygon points="${x - 6},${y - 4} ${x},${y} ${x - 6},${y + 4}" class="head"/>`,
      `<text x="${laneX(0) + 8}" y="${y - 5}">${n + 1}. ${escapeHtml(clip(request, 58))}<title>${escapeHtml(step.exchange.url)}</title></text>`,
      `<line x1="${x}" y1="${y + ROW}" x2="${laneX(0) + 6}" y2="${y + ROW}" class="res"/>`,
      `<polygon points="${laneX(0) + 6},${y + ROW - 4} ${laneX(0)},${y + ROW} ${laneX(0) + 6},${y + ROW + 4}" class="head"/>`,
      `<text x="${x - 8}" y="${y + ROW - 5}" class="status">${escapeHtml(clip(answer, 58))}</text>`,
      "</g>",
    )
    if (n === walk.stopsAt) {
      parts.push(
        `<text x="${laneX(0) + 8}" y="${y + ROW + 20}" class="stop">✕ a client of ${walk.revision} stops here: ${escapeHtml(clip(walk.reason ?? "", 70))}</text>`,
      )
    }
  })
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="the requests of a ${walk.revision} client">${parts.join("")}</svg>`
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#1d2330}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ccd}h3{font-size:1rem}
code,pre{font:12px/1.4 ui-monospace,monospace;overflow-wrap:anywhere}pre{background:#f4f5f8;padding:.5rem;overflow:auto;white-space:pre-wrap}
.badge{display:inline-block;min-width:3.2em;text-align:center;font-weight:700;border-radius:3px;padding:0 .3em;color:#fff}
.badge.pass{background:#2e7d32}.badge.warn{background:#b26a00}.badge.fail{background:#c62828}
ul.findings{list-style:none;padding:0}ul.findings>li{margin:.35rem 0}
.revs{color:#667;font-size:.9em}dl{margin:.3rem 0 .3rem 1.5rem}dt{font-weight:600}dd{margin:0 0 .3rem 1rem}
table.verdicts td{padding:.15rem .8rem .15rem 0}
svg{display:block;margin:.5rem 0;max-width:100%;height:auto}svg text{font:12px ui-monospace,monospace;fill:#1d2330}
svg .lane{font-weight:700;text-anchor:middle}svg .life{stroke:#99a;stroke-dasharray:3 3}
svg .req{stroke:#1d2330}svg .res{stroke:#1d2330;stroke-dasharray:5 3}svg .head{fill:#1d2330}
svg .status{text-anchor:end}svg .warn .status{fill:#b26a00}svg .fail .status{fill:#c62828;font-weight:700}
svg .fail line{stroke:#c62828}svg .fail polygon{fill:#c62828}svg .after{opacity:.35}svg .stop{fill:#c62828;font-weight:700}
`

const headersList = (headers: Readonly<Record<string, string>>) =>
  Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}`)
    .join("\n")

const exchangeHtml = (exchange: Exchange) => {
  const inner = [
    exchange.requestHeaders === undefined ? "" : `sent:\n${headersList(exchange.requestHeaders)}`,
    exchange.headers === undefined ? "" : `received:\n${headersList(exchange.headers)}`,
    exchange.body === undefined ? "" : `body:\n${exchange.body}`,
  ].filter((part) => part !== "")
  return `<li><code>${escapeHtml(exchangeLine(exchange))}</code>${inner.length === 0 ? "" : `<pre>${escapeHtml(inner.join("\n\n"))}</pre>`}</li>`
}

const findingHtml = (finding: Finding, diagnosis: Diagnosis, catalog: Readonly<Record<string, CheckEntry>>) => {
  const entry = entryOf(catalog, finding.check)
  const all = diagnosis.revisions.every((revision) => finding.revisions.includes(revision))
  const head = `<span class="badge ${finding.status}">${finding.status.toUpperCase()}</span> ${escapeHtml(entry?.title ?? finding.check)} <code class="revs">${escapeHtml(finding.check)}</code>${all ? "" : ` <span class="revs">(${escapeHtml(finding.revisions.join(", "))})</span>`}`
  const fields: Array<[string, string]> = [["seen", escapeHtml(finding.detail)]]
  if (entry !== undefined && finding.status !== "pass") {
    fields.push(
      ["why", escapeHtml(entry.why)],
      ["fix", escapeHtml(entry.fix)],
      ["spec", `<a href="${escapeHtml(entry.spec)}">${escapeHtml(entry.spec)}</a>`],
    )
  }
  const exchanges =
    finding.exchanges.length === 0
      ? ""
      : `<dt>exchanges</dt><dd><ol>${finding.exchanges.map(exchangeHtml).join("")}</ol></dd>`
  const body = `<dl>${fields.map(([name, value]) => `<dt>${name}</dt><dd>${value}</dd>`).join("")}${exchanges}</dl>`
  return `<li><details${finding.status === "pass" ? "" : " open"}><summary>${head}</summary>${body}</details></li>`
}

const walkHtml = (walk: RevisionWalk) => {
  const list = walk.steps
    .map((step, n) => {
      const stop = n === walk.stopsAt ? ` <strong>the client stops here: ${escapeHtml(walk.reason ?? "")}</strong>` : ""
      return `<li class="${step.status}"><code>${escapeHtml(exchangeLine(step.exchange))}</code>${stop}</li>`
    })
    .join("")
  const end =
    walk.stopsAt === undefined
      ? walk.reason === undefined
        ? "<p>The walk goes through.</p>"
        : `<p>The walk stops before any request: ${escapeHtml(walk.reason)}</p>`
      : ""
  return `<h3>${walk.revision}</h3>${walk.steps.length === 0 ? "" : sequence(walk)}<ol>${list}</ol>${end}`
}

/** The HTML report of a diagnosis: one self-contained page. */
export const formatHtml = (diagnosis: Diagnosis, options: HtmlOptions = {}): string => {
  const catalog = options.catalog ?? doctorCatalog
  const verdictRows = diagnosis.revisions
    .map((revision) => {
      const [status, text] = verdictWords(diagnosis, revision)
      return `<tr><td>${revision}</td><td><span class="badge ${status}">${status.toUpperCase()}</span> ${text}</td></tr>`
    })
    .join("")
  const servers = byServer(diagnosis)
    .map(
      ({ server, findings }) =>
        `<h3>${escapeHtml(server)} <span class="revs">(${server === diagnosis.target ? "MCP server" : "authorization server"})</span></h3><ul class="findings">${findings.map((finding) => findingHtml(finding, diagnosis, catalog)).join("")}</ul>`,
    )
    .join("")
  const walks = diagnosis.revisions.map((revision) => walkHtml(walkOf(diagnosis, revision, catalog))).join("")
  const stopped =
    diagnosis.stopped === undefined ? "" : `<p><strong>Stopped:</strong> ${escapeHtml(diagnosis.stopped)}</p>`
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>keyway-doctor: ${escapeHtml(diagnosis.target)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>keyway-doctor: <code>${escapeHtml(diagnosis.target)}</code></h1>
${stopped}<h2>Verdicts</h2>
<table class="verdicts">${verdictRows}</table>
<h2>Findings</h2>
${servers}
<h2>The discovery walk</h2>
<p>What a client of each revision asks, in order, and where it stops. Dashed arrows are the answers.</p>
${walks}
</body>
</html>
`
}
