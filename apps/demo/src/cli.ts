/**
 * The command line of `npm run demo`: parsing and usage.
 *
 * @module
 */
import { parseArgs } from "node:util"

/** What the command line asks for. */
export type Command =
  | { readonly kind: "help" }
  | {
      readonly kind: "demo"
      readonly browser: boolean
      /** `default`: the user's flow; the others: a machine client with an extension grant. */
      readonly scenario: Scenario
      readonly asPort?: number
      readonly mcpPort?: number
    }
  | { readonly kind: "serve"; readonly asPort?: number; readonly mcpPort?: number }

/**
 * The demo runs: the user's authorization code flow, a machine client's extension grant, or the MCP server calling
 * another API for its user (`downstream`).
 */
export const SCENARIOS = [
  "default",
  "client-credentials",
  "workload-identity",
  "enterprise",
  "dpop",
  "downstream",
  "connected-account",
  "device",
] as const

/** One of {@link SCENARIOS}. */
export type Scenario = (typeof SCENARIOS)[number]

/** A command line that cannot be run; the message says why. */
export class UsageError extends Error {
  override readonly name = "UsageError"
}

/** The help text. */
export const USAGE = `Usage: npm run demo -- [options]

Starts the Keyway authorization server (fresh SQLite in a temporary directory) and the notes MCP server on loopback,
runs an MCP client through the whole authorization flow, and prints a step-by-step transcript (tokens redacted).

Options:
  --browser         do the login and consent in your system browser ($BROWSER, else the platform's opener)
  --scenario <s>    default (a user authorizes the client); client-credentials (a machine client with the OAuth
                    client credentials extension) or workload-identity (a workload presenting the JWT its platform
                    issued it, workload identity federation): no user, no browser; enterprise (the user signs in once
                    at an enterprise identity provider; enterprise-managed authorization, no consent page); dpop (the
                    machine client's tokens bound to its key with DPoP, nonces at both servers); downstream (the
                    notes MCP server calls a calendar API for the signed-in user with a token it obtained by token
                    exchange, RFC 8693; the client is the default run's, unchanged); connected-account (the
                    user's own account at a third-party code host, connected through URL-mode elicitation and
                    kept in the notes server's encrypted vault); device (the agent has no
                    browser: it shows a code the demo user enters on the authorization server's page, RFC 8628)
  --serve           only start the two servers and keep them running until SIGINT or SIGTERM; prints one JSON line
                    on stdout: {"authorizationServer", "mcpServer", "users", "clients"}, and on stderr the
                    verdict of keyway-doctor on the stack for each MCP revision (the test user's login included)
  --as-port <n>     port of the authorization server (default: a free one)
  --mcp-port <n>    port of the MCP server (default: a free one)
  -h, --help        show this help
`

const port = (flag: string, value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  if (!/^\d+$/u.test(value) || Number(value) > 65535) {
    throw new UsageError(`${flag} must be a port number from 0 to 65535, got ${JSON.stringify(value)}`)
  }
  return Number(value)
}

/** Parses the arguments after `npm run demo --`. */
export const parseCommandLine = (argv: ReadonlyArray<string>): Command => {
  let values: {
    browser?: boolean
    serve?: boolean
    scenario?: string
    "as-port"?: string
    "mcp-port"?: string
    help?: boolean
  }
  try {
    ;({ values } = parseArgs({
      args: [...argv],
      options: {
        browser: { type: "boolean" },
        serve: { type: "boolean" },
        scenario: { type: "string" },
        "as-port": { type: "string" },
        "mcp-port": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }))
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
  if (values.help === true) return { kind: "help" }
  const asPort = port("--as-port", values["as-port"])
  const mcpPort = port("--mcp-port", values["mcp-port"])
  if (asPort !== undefined && asPort !== 0 && asPort === mcpPort) {
    throw new UsageError(`--as-port and --mcp-port must differ (both are ${asPort})`)
  }
  const ports = { ...(asPort === undefined ? {} : { asPort }), ...(mcpPort === undefined ? {} : { mcpPort }) }
  const scenario = values.scenario ?? "default"
  if (!(SCENARIOS as ReadonlyArray<string>).includes(scenario)) {
    throw new UsageError(`--scenario must be one of ${SCENARIOS.join(", ")}, got ${JSON.stringify(scenario)}`)
  }
  if (values.serve === true) {
    if (values.browser === true) throw new UsageError("--browser and --serve cannot be combined")
    if (values.scenario !== undefined) throw new UsageError("--scenario and --serve cannot be combined")
    return { kind: "serve", ...ports }
  }
  if (
    (scenario === "enterprise" ||
      scenario === "downstream" ||
      scenario === "connected-account" ||
      scenario === "device") &&
    values.browser === true
  ) {
    throw new UsageError(
      `--scenario ${scenario} signs the demo user in without a browser; it cannot be combined with --browser`,
    )
  }
  if (scenario !== "default" && values.browser === true) {
    throw new UsageError(`--scenario ${scenario} has no user and no browser; it cannot be combined with --browser`)
  }
  return { kind: "demo", browser: values.browser === true, scenario: scenario as Scenario, ...ports }
}
