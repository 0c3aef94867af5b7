import { describe, expect, it } from "vitest"
import { parseArguments, UsageError } from "../src/internal/args.ts"

const URL = "https://mcp.example.com/mcp"

const refusal = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) => {
  try {
    parseArguments(args, env)
  } catch (e) {
    if (e instanceof UsageError) return e.message
    throw e
  }
  throw new Error(`${JSON.stringify(args)} was accepted`)
}

describe("the command line's arguments", () => {
  it("a URL alone: every revision, the text report", () => {
    expect(parseArguments([URL], {})).toEqual({ kind: "diagnose", target: URL, options: {}, json: false })
  })

  it("reads every option, in either form, and keeps the revisions in their order, each once", () => {
    expect(
      parseArguments(
        [
          "--revision=2026-07-28",
          "--revision",
          "2025-06-18",
          "--revision",
          "2026-07-28",
          "--login=test-user",
          "--username",
          "alice",
          "--password=correct horse",
          "--other-resource",
          "https://archive.example.com/mcp",
          "--client-credentials",
          "reporter",
          "--cimd",
          "--json",
          "--html",
          "out/report.html",
          "--timeout",
          "2500",
          URL,
        ],
        { KEYWAY_DOCTOR_CLIENT_SECRET: "s3cret" },
      ),
    ).toEqual({
      kind: "diagnose",
      target: URL,
      options: {
        revisions: ["2025-06-18", "2026-07-28"],
        login: { kind: "test-user", username: "alice", password: "correct horse" },
        otherResource: "https://archive.example.com/mcp",
        clientCredentials: { clientId: "reporter", clientSecret: "s3cret" },
        clientIdMetadataDocument: true,
        timeoutMs: 2500,
      },
      json: true,
      html: "out/report.html",
    })
    expect(parseArguments(["--login", URL], {})).toEqual({
      kind: "diagnose",
      target: URL,
      options: { login: { kind: "browser" } },
      json: false,
    })
    expect(parseArguments(["--", "https://mcp.example.com/-mcp"], {})).toMatchObject({
      target: "https://mcp.example.com/-mcp",
    })
  })

  it("--help wins over everything else but an unknown option", () => {
    expect(parseArguments(["--help", URL], {})).toEqual({ kind: "help" })
    expect(parseArguments(["-h"], {})).toEqual({ kind: "help" })
  })

  it.each([
    [[], "name the MCP server URL (keyway-doctor --help)"],
    [[URL, "https://other.example.com/mcp"], 'one MCP server URL only, not also "https://other.example.com/mcp"'],
    [["mcp.example.com/mcp"], 'the MCP server URL "mcp.example.com/mcp" is not an http or https URL'],
    [["--verbose", URL], "unknown option --verbose"],
    [["--json=yes", URL], "--json takes no value"],
    [[URL, "--html"], "--html needs a value"],
    [["--html=", URL], "--html needs a value"],
    [["--html", "a.html", "--html", "b.html", URL], "--html is given more than once"],
    [["--timeout", "0", URL], '--timeout "0" is not a positive whole number of milliseconds'],
    [["--timeout", "1.5", URL], '--timeout "1.5" is not a positive whole number of milliseconds'],
    [["--login", "--username", "alice", URL], "--username goes with --login=test-user"],
    [["--password", "x", URL], "--password goes with --login=test-user"],
    [["--login=test-user", "--password", "x", URL], "--login=test-user needs --username"],
    [["--login=", URL], '--login takes browser or test-user, not ""'],
    [["--login=popup", URL], '--login takes browser or test-user, not "popup"'],
    [["ftp://mcp.example.com/mcp"], 'the MCP server URL "ftp://mcp.example.com/mcp" is not an http or https URL'],
    [["--timeout", "soon", URL], '--timeout "soon" is not a positive whole number of milliseconds'],
    [["--login=test-user", "--username", "alice", URL], "--login=test-user needs --password"],
    [
      ["--login", "--other-resource", "archive.example.com/mcp", URL],
      '--other-resource "archive.example.com/mcp" is not an http or https URL',
    ],
    [["--other-resource", "https://archive.example.com/mcp", URL], "--other-resource goes with --login"],
    [
      ["--revision", "2024-11-05", URL],
      '--revision "2024-11-05" is not an MCP revision (2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)',
    ],
  ])("%j is refused: %s", (args, message) => {
    expect(refusal(args)).toBe(message)
  })

  it("takes the client secret from the environment only", () => {
    expect(refusal(["--client-credentials", "reporter", URL], { KEYWAY_DOCTOR_CLIENT_SECRET: "" })).toBe(
      "--client-credentials needs the secret in the environment variable KEYWAY_DOCTOR_CLIENT_SECRET",
    )
    expect(refusal(["--client-secret", "s3cret", URL])).toBe("unknown option --client-secret")
  })
})
