import { describe, expect, it } from "vitest"
import { parseCommandLine, UsageError } from "../src/cli.js"

describe("parseCommandLine", () => {
  it("runs the headless demo by default, on free ports", () => {
    expect(parseCommandLine([])).toEqual({ kind: "demo", browser: false, scenario: "default" })
  })

  it("reads --browser, --serve and the ports", () => {
    expect(parseCommandLine(["--browser"])).toEqual({ kind: "demo", browser: true, scenario: "default" })
    expect(parseCommandLine(["--scenario", "client-credentials"])).toEqual({
      kind: "demo",
      browser: false,
      scenario: "client-credentials",
    })
    expect(parseCommandLine(["--scenario", "dpop"])).toEqual({ kind: "demo", browser: false, scenario: "dpop" })
    expect(parseCommandLine(["--scenario", "connected-account"])).toEqual({
      kind: "demo",
      browser: false,
      scenario: "connected-account",
    })
    expect(parseCommandLine(["--scenario", "downstream", "--mcp-port", "9100"])).toEqual({
      kind: "demo",
      browser: false,
      scenario: "downstream",
      mcpPort: 9100,
    })
    expect(parseCommandLine(["--scenario", "device"])).toEqual({ kind: "demo", browser: false, scenario: "device" })
    expect(parseCommandLine(["--serve", "--as-port", "9000", "--mcp-port", "9100"])).toEqual({
      kind: "serve",
      asPort: 9000,
      mcpPort: 9100,
    })
    expect(parseCommandLine(["--as-port=0", "--mcp-port=0"])).toEqual({
      kind: "demo",
      browser: false,
      scenario: "default",
      asPort: 0,
      mcpPort: 0,
    })
    expect(parseCommandLine(["-h"])).toEqual({ kind: "help" })
    expect(parseCommandLine(["--serve", "--help"])).toEqual({ kind: "help" })
  })

  it.each([
    [["--as-port", "http"], '--as-port must be a port number from 0 to 65535, got "http"'],
    [["--mcp-port", "65536"], '--mcp-port must be a port number from 0 to 65535, got "65536"'],
    [
      ["--mcp-port", "-1"],
      "Option '--mcp-port' argument is ambiguous.\nDid you forget to specify the option argument for '--mcp-port'?\nTo specify an option argument starting with a dash use '--mcp-port=-XYZ'.",
    ],
    [["--as-port", "9000", "--mcp-port", "9000"], "--as-port and --mcp-port must differ (both are 9000)"],
    [["--serve", "--browser"], "--browser and --serve cannot be combined"],
    [
      ["--scenario", "nope"],
      '--scenario must be one of default, client-credentials, workload-identity, enterprise, dpop, downstream, connected-account, device, got "nope"',
    ],
    [
      ["--scenario", "dpop", "--browser"],
      "--scenario dpop has no user and no browser; it cannot be combined with --browser",
    ],
    [["--scenario", "default", "--serve"], "--scenario and --serve cannot be combined"],
    [
      ["--scenario", "client-credentials", "--browser"],
      "--scenario client-credentials has no user and no browser; it cannot be combined with --browser",
    ],
    [
      ["--scenario", "enterprise", "--browser"],
      "--scenario enterprise signs the demo user in without a browser; it cannot be combined with --browser",
    ],
    [
      ["--scenario", "downstream", "--browser"],
      "--scenario downstream signs the demo user in without a browser; it cannot be combined with --browser",
    ],
    [["--scenario", "downstream", "--serve"], "--scenario and --serve cannot be combined"],
    [
      ["--scenario", "connected-account", "--browser"],
      "--scenario connected-account signs the demo user in without a browser; it cannot be combined with --browser",
    ],
    [
      ["--scenario", "device", "--browser"],
      "--scenario device signs the demo user in without a browser; it cannot be combined with --browser",
    ],
    [["--verbose"], "Unknown option '--verbose'"],
    [["extra"], "Unexpected argument 'extra'. This command does not take positional arguments"],
  ])("refuses %j", (argv, message) => {
    const run = () => parseCommandLine(argv)
    expect(run).toThrow(UsageError)
    // An error instance makes toThrow compare the whole message, not a substring.
    expect(run).toThrow(new UsageError(message))
  })
})
