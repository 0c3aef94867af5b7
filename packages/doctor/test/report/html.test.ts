import { describe, expect, it } from "vitest"
import { type Diagnosis, escapeHtml, formatHtml, walkOf } from "../../src/index.ts"
import { asExchange, CATALOG, DIAGNOSIS, metadataExchange, TARGET, unauthenticated } from "./diagnosis.ts"

const HOSTILE = '<script>alert("x")</script>'

describe("the HTML report", () => {
  it("is one self-contained page: inline CSS, no script, no external asset", () => {
    const page = formatHtml(DIAGNOSIS, { catalog: CATALOG })
    expect(page.startsWith("<!doctype html>\n")).toBe(true)
    expect(page).toContain("<style>")
    expect(page).not.toMatch(/<script|<link|<img|<iframe|\ssrc=|url\(|@import/iu)
    expect(page).toContain("<h1>keyway-doctor: <code>https://mcp.example.com/mcp</code></h1>")
    expect(page).toContain('<tr><td>2025-06-18</td><td><span class="badge fail">FAIL</span> fails: 1 failure</td></tr>')
    expect(page).toContain('<tr><td>2025-03-26</td><td><span class="badge pass">PASS</span> works</td></tr>')
  })

  it("escapes every value a server sent, so an answer with markup shows as text", () => {
    const hostile: Diagnosis = {
      target: TARGET,
      revisions: ["2025-11-25"],
      findings: [
        {
          check: "prm.resource",
          status: "fail",
          server: TARGET,
          revisions: ["2025-11-25"],
          detail: `resource is "${HOSTILE}" but the server URL is "${TARGET}"`,
          exchanges: [
            {
              ...metadataExchange,
              headers: { "content-type": HOSTILE },
              body: `{"resource":"${HOSTILE}"}`,
            },
          ],
        },
      ],
    }
    const page = formatHtml(hostile, { catalog: CATALOG })
    expect(page).not.toContain("<script")
    expect(page).toContain("resource is &quot;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&quot;")
    expect(page).toContain("content-type: &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;")
    expect(escapeHtml(`a&b<c>"d"'e'`)).toBe("a&amp;b&lt;c&gt;&quot;d&quot;&#39;e&#39;")
  })

  it("draws each revision's walk: its requests in order, each once, and where the client stops", () => {
    expect(walkOf(DIAGNOSIS, "2025-11-25", CATALOG)).toEqual({
      revision: "2025-11-25",
      steps: [
        { exchange: unauthenticated("2025-11-25"), status: "warn", failures: [] },
        {
          exchange: metadataExchange,
          status: "fail",
          failures: ["The protected resource metadata names this server as its resource"],
        },
        { exchange: asExchange, status: "pass", failures: [] },
      ],
      stopsAt: 1,
      reason: "The protected resource metadata names this server as its resource",
    })
    // The 2025-03-26 client sends its own protocol version and meets no failure.
    expect(walkOf(DIAGNOSIS, "2025-03-26", CATALOG)).toEqual({
      revision: "2025-03-26",
      steps: [
        { exchange: unauthenticated("2025-03-26"), status: "pass", failures: [] },
        { exchange: asExchange, status: "pass", failures: [] },
      ],
    })
    const page = formatHtml(DIAGNOSIS, { catalog: CATALOG })
    expect(page).toContain(
      "✕ a client of 2025-11-25 stops here: The protected resource metadata names this server as its resource",
    )
    expect(page).toContain(
      '<li class="fail"><code>GET https://mcp.example.com/.well-known/oauth-protected-resource/mcp → 200</code> <strong>the client stops here: The protected resource metadata names this server as its resource</strong></li>',
    )
    expect(page).toContain("<h3>2025-03-26</h3>")
    expect(page).toContain("<p>The walk goes through.</p>")
    expect(page.match(/<svg /gu)?.length).toBe(4)
  })

  it("stops the walk at the last request when the diagnosis stopped", () => {
    const stopped: Diagnosis = {
      target: "http://127.0.0.1:9/mcp",
      revisions: ["2026-07-28"],
      findings: [
        {
          check: "mcp.reachable",
          status: "fail",
          server: "http://127.0.0.1:9/mcp",
          revisions: ["2026-07-28"],
          detail: "no answer",
          exchanges: [{ method: "POST", url: "http://127.0.0.1:9/mcp", error: "connect ECONNREFUSED 127.0.0.1:9" }],
        },
      ],
      stopped: "the MCP server did not answer",
    }
    expect(walkOf(stopped, "2026-07-28", {})).toEqual({
      revision: "2026-07-28",
      steps: [
        {
          exchange: { method: "POST", url: "http://127.0.0.1:9/mcp", error: "connect ECONNREFUSED 127.0.0.1:9" },
          status: "fail",
          failures: ["mcp.reachable"],
        },
      ],
      stopsAt: 0,
      reason: "mcp.reachable",
    })
    const page = formatHtml(stopped, { catalog: {} })
    expect(page).toContain("<p><strong>Stopped:</strong> the MCP server did not answer</p>")
    expect(page).toContain("no answer: connect ECONNREFUSED 127.0.0.1:9")
  })
})
