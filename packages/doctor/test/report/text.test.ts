import { describe, expect, it } from "vitest"
import { exchangeLine, exitCode, formatText, useColor, verdicts } from "../../src/index.ts"
import { CATALOG, DIAGNOSIS, ISSUER, TARGET } from "./diagnosis.ts"

describe("the text report", () => {
  it("groups the findings by server, details warnings and failures, and ends with a verdict per revision", () => {
    expect(formatText(DIAGNOSIS, { catalog: CATALOG })).toBe(`keyway-doctor https://mcp.example.com/mcp
revisions: 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28

https://mcp.example.com/mcp (MCP server)
  PASS  The MCP server answers
  WARN  The 401 challenge names the scope to ask for  (2025-11-25, 2026-07-28)
        seen: The Bearer challenge has no scope.
        why:  Without scope, clients of 2025-11-25 ask for every scope of the metadata or none.
        fix:  Add scope="..." to the Bearer challenge.
        spec: https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-selection-strategy
        POST https://mcp.example.com/mcp → 401
  FAIL  The protected resource metadata names this server as its resource  (2025-06-18, 2025-11-25, 2026-07-28)
        seen: resource is "https://mcp.example.com/mcp/" but the server URL is "https://mcp.example.com/mcp"
        why:  Clients refuse metadata whose resource is not the server they asked (MCP 2025-06-18 and later; RFC 9728 §3.3).
        fix:  Set resource to the exact URL clients use, https://mcp.example.com/mcp.
        spec: https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3
        GET https://mcp.example.com/.well-known/oauth-protected-resource/mcp → 200

https://auth.example.com (authorization server)
  PASS  The authorization server supports PKCE with S256

2025-03-26: works
2025-06-18: fails: 1 failure
2025-11-25: fails: 1 failure
2026-07-28: fails: 1 failure
`)
  })

  it("says when no answer came, where a redirect points, and names a check missing from the catalog by its ID", () => {
    const text = formatText(
      {
        target: TARGET,
        revisions: ["2025-11-25"],
        findings: [
          {
            check: "prm.no-redirect",
            status: "warn",
            server: TARGET,
            revisions: ["2025-11-25"],
            detail: "The metadata redirects within its origin.",
            exchanges: [
              {
                method: "GET",
                url: "https://mcp.example.com/.well-known/oauth-protected-resource",
                status: 301,
                headers: { location: "https://mcp.example.com/prm.json" },
              },
              { method: "GET", url: "https://mcp.example.com/prm.json", error: "connect ECONNREFUSED 127.0.0.1:443" },
            ],
          },
        ],
      },
      { catalog: CATALOG },
    )
    expect(text.split("\n").slice(4, 8)).toEqual([
      "  WARN  prm.no-redirect",
      "        seen: The metadata redirects within its origin.",
      "        GET https://mcp.example.com/.well-known/oauth-protected-resource → 301, location: https://mcp.example.com/prm.json",
      "        GET https://mcp.example.com/prm.json → no answer (connect ECONNREFUSED 127.0.0.1:443)",
    ])
    expect(text.endsWith("\n2025-11-25: works with warnings\n")).toBe(true)
  })

  it("tells apart the passes of one check on one server by their detail", () => {
    const twice = (client: string, url: string) => ({
      check: "registration.hosted-callbacks",
      status: "pass" as const,
      server: ISSUER,
      revisions: ["2025-11-25" as const],
      detail: `https://auth.example.com/register registered ${client}'s callback ${url}`,
      exchanges: [],
    })
    const text = formatText(
      {
        target: TARGET,
        revisions: ["2025-11-25"],
        findings: [
          twice("Claude", "https://claude.ai/api/mcp/auth_callback"),
          twice("VS Code", "https://vscode.dev/redirect"),
        ],
      },
      { catalog: {} },
    )
    expect(text.split("\n").slice(3, 8)).toEqual([
      "https://auth.example.com (authorization server)",
      "  PASS  registration.hosted-callbacks",
      "        https://auth.example.com/register registered Claude's callback https://claude.ai/api/mcp/auth_callback",
      "  PASS  registration.hosted-callbacks",
      "        https://auth.example.com/register registered VS Code's callback https://vscode.dev/redirect",
    ])
  })

  it("tells a browser's request (with an Origin) from the same request without one", () => {
    expect(
      exchangeLine({
        method: "OPTIONS",
        url: "https://mcp.example.com/mcp",
        requestHeaders: { origin: "https://inspector.example", "access-control-request-method": "POST" },
        status: 204,
        headers: { "access-control-allow-origin": "*" },
      }),
    ).toBe("OPTIONS https://mcp.example.com/mcp (origin https://inspector.example) → 204")
  })

  it("says the diagnosis could not run when it stopped", () => {
    const stopped = {
      target: TARGET,
      revisions: ["2025-06-18", "2025-11-25"] as const,
      findings: [],
      stopped: "the MCP server did not answer: connect ECONNREFUSED 127.0.0.1:9",
    }
    expect(formatText(stopped, { catalog: CATALOG })).toBe(`keyway-doctor https://mcp.example.com/mcp
revisions: 2025-06-18, 2025-11-25

stopped: the MCP server did not answer: connect ECONNREFUSED 127.0.0.1:9
2025-06-18: could not run
2025-11-25: could not run
`)
    expect(exitCode(stopped)).toBe(2)
    expect(verdicts(stopped)).toEqual({ "2025-06-18": "fail", "2025-11-25": "fail" })
  })

  it("colours the status words only when asked", () => {
    const coloured = formatText(DIAGNOSIS, { catalog: CATALOG, color: true })
    expect(coloured).toContain("  \u001b[32mPASS\u001b[0m  The MCP server answers\n")
    expect(coloured).toContain("  \u001b[33mWARN\u001b[0m  The 401 challenge")
    expect(coloured).toContain("  \u001b[31mFAIL\u001b[0m  The protected resource metadata")
    expect(formatText(DIAGNOSIS, { catalog: CATALOG })).not.toContain("\u001b[")
  })

  it("colours on a terminal only, and never with NO_COLOR set", () => {
    expect(useColor({ isTTY: true }, {})).toBe(true)
    expect(useColor({ isTTY: true }, { NO_COLOR: "1" })).toBe(false)
    expect(useColor({ isTTY: true }, { NO_COLOR: "" })).toBe(true)
    expect(useColor({ isTTY: false }, {})).toBe(false)
    expect(useColor({}, {})).toBe(false)
  })
})

describe("the verdicts and the exit code", () => {
  it("takes the worst status per revision; a failure exits 1, warnings alone exit 0", () => {
    expect(verdicts(DIAGNOSIS)).toEqual({
      "2025-03-26": "pass",
      "2025-06-18": "fail",
      "2025-11-25": "fail",
      "2026-07-28": "fail",
    })
    expect(exitCode(DIAGNOSIS)).toBe(1)
    const warnings = { ...DIAGNOSIS, findings: DIAGNOSIS.findings.filter((finding) => finding.status !== "fail") }
    expect(verdicts(warnings)).toEqual({
      "2025-03-26": "pass",
      "2025-06-18": "pass",
      "2025-11-25": "warn",
      "2026-07-28": "warn",
    })
    expect(exitCode(warnings)).toBe(0)
  })
})
