import { describe, expect, it } from "vitest"
import { formatJson, reportSchema } from "../../src/index.ts"
import { CATALOG, DIAGNOSIS, metadataExchange } from "./diagnosis.ts"

describe("the JSON report", () => {
  it("parses against its schema, with the checks' texts and a verdict per revision", () => {
    const report = reportSchema.parse(JSON.parse(formatJson(DIAGNOSIS, { catalog: CATALOG })))
    expect(report.version).toBe(1)
    expect(report.target).toBe("https://mcp.example.com/mcp")
    expect(report.revisions).toEqual(["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"])
    expect(report.verdicts).toEqual({
      "2025-03-26": "pass",
      "2025-06-18": "fail",
      "2025-11-25": "fail",
      "2026-07-28": "fail",
    })
    expect(report.stopped).toBeUndefined()
    expect(report.findings.map((finding) => [finding.check, finding.status, finding.server])).toEqual([
      ["mcp.reachable", "pass", "https://mcp.example.com/mcp"],
      ["challenge.scope", "warn", "https://mcp.example.com/mcp"],
      ["prm.resource", "fail", "https://mcp.example.com/mcp"],
      ["as.pkce-s256", "pass", "https://auth.example.com"],
    ])
    expect(report.findings[2]).toEqual({
      check: "prm.resource",
      status: "fail",
      server: "https://mcp.example.com/mcp",
      revisions: ["2025-06-18", "2025-11-25", "2026-07-28"],
      title: "The protected resource metadata names this server as its resource",
      detail: 'resource is "https://mcp.example.com/mcp/" but the server URL is "https://mcp.example.com/mcp"',
      why: "Clients refuse metadata whose resource is not the server they asked (MCP 2025-06-18 and later; RFC 9728 §3.3).",
      fix: "Set resource to the exact URL clients use, https://mcp.example.com/mcp.",
      spec: "https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3",
      exchanges: [metadataExchange],
    })
  })

  it("gives a check missing from the catalog its ID as title and no why, fix or spec; says why it stopped", () => {
    const report = reportSchema.parse(
      JSON.parse(
        formatJson(
          {
            target: "http://127.0.0.1:9/mcp",
            revisions: ["2026-07-28"],
            findings: [
              {
                check: "mcp.reachable",
                status: "fail",
                server: "http://127.0.0.1:9/mcp",
                revisions: ["2026-07-28"],
                detail: "connect ECONNREFUSED 127.0.0.1:9",
                exchanges: [
                  { method: "POST", url: "http://127.0.0.1:9/mcp", error: "connect ECONNREFUSED 127.0.0.1:9" },
                ],
              },
            ],
            stopped: "the MCP server did not answer",
          },
          { catalog: {} },
        ),
      ),
    )
    expect(report).toEqual({
      version: 1,
      target: "http://127.0.0.1:9/mcp",
      revisions: ["2026-07-28"],
      findings: [
        {
          check: "mcp.reachable",
          status: "fail",
          server: "http://127.0.0.1:9/mcp",
          revisions: ["2026-07-28"],
          title: "mcp.reachable",
          detail: "connect ECONNREFUSED 127.0.0.1:9",
          exchanges: [{ method: "POST", url: "http://127.0.0.1:9/mcp", error: "connect ECONNREFUSED 127.0.0.1:9" }],
        },
      ],
      verdicts: { "2026-07-28": "fail" },
      stopped: "the MCP server did not answer",
    })
  })

  it("the schema refuses a report of another version or with an unknown status", () => {
    const report = JSON.parse(formatJson(DIAGNOSIS, { catalog: CATALOG })) as Record<string, unknown>
    expect(reportSchema.safeParse({ ...report, version: 2 }).success).toBe(false)
    expect(reportSchema.safeParse({ ...report, verdicts: { "2025-11-25": "ok" } }).success).toBe(false)
    expect(reportSchema.safeParse({ ...report, revisions: ["2024-11-05"] }).success).toBe(false)
  })
})
