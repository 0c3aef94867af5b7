/**
 * The command line's arguments: parsed into diagnosis options, or refused with one line naming the bad argument.
 *
 * @module
 */
import { Revision } from "@keyway/core"
import type { DiagnoseOptions } from "../Walk.js"

/** The usage text of `keyway-doctor --help`. */
export const USAGE = `usage: keyway-doctor [options] <mcp-server-url>

Tells why an MCP server, or the authorization server behind it, fails with real MCP clients.

options:
  --revision <rev>           check for this MCP revision only (repeatable; ${Revision.all.join(", ")})
  --login[=browser|test-user]
                             sign in and run the whole flow (browser by default)
  --username <name>          the test user's name (with --login=test-user)
  --password <password>      the test user's password (with --login=test-user)
  --other-resource <url>     another resource the same authorization server serves (with --login): a token for it
                             must be refused by the MCP server (the audience check)
  --client-credentials <id>  make a real client credentials token request as this client; the secret is read
                             from the environment variable KEYWAY_DOCTOR_CLIENT_SECRET
  --cimd                     host a client ID metadata document on a loopback URL and try it
  --json                     print the JSON report instead of the text report
  --html <file>              also write the HTML report to <file>
  --timeout <ms>             per request (default 10000)
  -h, --help                 print this help

exit codes: 0 every check passes (warnings allowed), 1 a check fails, 2 could not run
`

/** What the command line asks for. */
export type Command =
  | { readonly kind: "help" }
  | {
      readonly kind: "diagnose"
      readonly target: string
      readonly options: DiagnoseOptions
      readonly json: boolean
      readonly html?: string
    }

/** A usage error: its message is one line naming the bad argument. */
export class UsageError extends Error {
  override readonly name = "UsageError"
}

const VALUED = new Set([
  "--revision",
  "--username",
  "--password",
  "--other-resource",
  "--client-credentials",
  "--html",
  "--timeout",
])
const FLAGS = new Set(["--cimd", "--json", "--help", "-h", "--login"])

/**
 * Parses the arguments (without `node` and the script). `env` supplies `KEYWAY_DOCTOR_CLIENT_SECRET`: the secret is
 * never taken from the command line, where other users of the machine see it.
 */
export const parseArguments = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
): Command => {
  const values = new Map<string, Array<string>>()
  const flags = new Set<string>()
  const positionals: Array<string> = []
  let login: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? ""
    if (arg === "--") {
      positionals.push(...args.slice(i + 1))
      break
    }
    if (!arg.startsWith("-") || arg === "-") {
      positionals.push(arg)
      continue
    }
    const equals = arg.indexOf("=")
    const name = equals < 0 ? arg : arg.slice(0, equals)
    if (name === "--login") {
      login = equals < 0 ? "browser" : arg.slice(equals + 1)
      if (login !== "browser" && login !== "test-user") {
        throw new UsageError(`--login takes browser or test-user, not "${login}"`)
      }
      continue
    }
    if (VALUED.has(name)) {
      const value = equals < 0 ? args[++i] : arg.slice(equals + 1)
      if (value === undefined || value === "") throw new UsageError(`${name} needs a value`)
      values.set(name, [...(values.get(name) ?? []), value])
      continue
    }
    if (FLAGS.has(name) && equals < 0) {
      flags.add(name)
      continue
    }
    throw new UsageError(FLAGS.has(name) ? `${name} takes no value` : `unknown option ${name}`)
  }
  if (flags.has("--help") || flags.has("-h")) return { kind: "help" }
  const single = (name: string) => {
    const given = values.get(name)
    if (given !== undefined && given.length > 1) throw new UsageError(`${name} is given more than once`)
    return given?.[0]
  }

  if (positionals.length === 0) throw new UsageError("name the MCP server URL (keyway-doctor --help)")
  if (positionals.length > 1) throw new UsageError(`one MCP server URL only, not also "${positionals[1]}"`)
  const target = positionals[0] ?? ""
  const url = URL.parse(target)
  if (url === null || (url.protocol !== "https:" && url.protocol !== "http:")) {
    throw new UsageError(`the MCP server URL "${target}" is not an http or https URL`)
  }

  const revisions: Array<Revision.Revision> = []
  for (const revision of values.get("--revision") ?? []) {
    if (!Revision.isRevision(revision)) {
      throw new UsageError(`--revision "${revision}" is not an MCP revision (${Revision.all.join(", ")})`)
    }
    if (!revisions.includes(revision)) revisions.push(revision)
  }

  const username = single("--username")
  const password = single("--password")
  if (login !== "test-user" && (username !== undefined || password !== undefined)) {
    throw new UsageError(`${username === undefined ? "--password" : "--username"} goes with --login=test-user`)
  }
  if (login === "test-user" && (username === undefined || password === undefined)) {
    throw new UsageError(`--login=test-user needs ${username === undefined ? "--username" : "--password"}`)
  }

  const otherResource = single("--other-resource")
  if (otherResource !== undefined) {
    const other = URL.parse(otherResource)
    if (other === null || (other.protocol !== "https:" && other.protocol !== "http:")) {
      throw new UsageError(`--other-resource "${otherResource}" is not an http or https URL`)
    }
    if (login === undefined) throw new UsageError("--other-resource goes with --login")
  }

  const clientId = single("--client-credentials")
  const clientSecret = env.KEYWAY_DOCTOR_CLIENT_SECRET
  if (clientId !== undefined && (clientSecret === undefined || clientSecret === "")) {
    throw new UsageError(
      "--client-credentials needs the secret in the environment variable KEYWAY_DOCTOR_CLIENT_SECRET",
    )
  }

  const timeout = single("--timeout")
  const timeoutMs = timeout === undefined ? undefined : Number(timeout)
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
    throw new UsageError(`--timeout "${timeout}" is not a positive whole number of milliseconds`)
  }
  const html = single("--html")

  const options: DiagnoseOptions = {
    ...(revisions.length === 0 ? {} : { revisions: Revision.all.filter((revision) => revisions.includes(revision)) }),
    ...(login === undefined
      ? {}
      : {
          login:
            login === "browser"
              ? { kind: "browser" as const }
              : { kind: "test-user" as const, username: username ?? "", password: password ?? "" },
        }),
    ...(otherResource === undefined ? {} : { otherResource }),
    ...(clientId === undefined ? {} : { clientCredentials: { clientId, clientSecret: clientSecret ?? "" } }),
    ...(flags.has("--cimd") ? { clientIdMetadataDocument: true } : {}),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  }
  return { kind: "diagnose", target, options, json: flags.has("--json"), ...(html === undefined ? {} : { html }) }
}
