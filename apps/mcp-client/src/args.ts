/**
 * The command line of keyway-mcp: `list-tools <url>`, `call <url> <tool> [json args]`, `login <url>`,
 * `logout <url>`, with `--headless` or `--device`, `--scope <scopes>`, `--tokens <file>`, `--json`, and a pre-registered client
 * (`--client-id`, `--issuer`, `--client-secret` or `$KEYWAY_MCP_CLIENT_SECRET`).
 *
 * @module
 */
import { parseArgs } from "node:util"

/** What to do. */
export type Command =
  | { readonly kind: "help" }
  | { readonly kind: "list-tools"; readonly url: string }
  | {
      readonly kind: "call"
      readonly url: string
      readonly tool: string
      readonly arguments: Readonly<Record<string, unknown>>
    }
  | { readonly kind: "login"; readonly url: string }
  | { readonly kind: "logout"; readonly url: string }

/** A client registered beforehand with one authorization server, used there instead of registering. */
export interface PreRegistered {
  readonly clientId: string
  /** The issuer of the authorization server it is registered with; it is never used with another. */
  readonly issuer: string
  /** Absent for a public client. */
  readonly clientSecret: string | undefined
}

/** The environment variable the client secret is read from when `--client-secret` is not given. */
export const CLIENT_SECRET_VARIABLE = "KEYWAY_MCP_CLIENT_SECRET"

/** Options shared by every command. */
export interface Options {
  /** Follow the authorization server's redirects without a browser (automation, servers that need no login). */
  readonly headless: boolean
  /** Authorize with a code the user enters on another device (RFC 8628) instead of a browser here. */
  readonly device: boolean
  readonly scope: string | undefined
  /** The token file; the user's config directory by default. */
  readonly tokens: string | undefined
  /** Print machine-readable JSON instead of text. */
  readonly json: boolean
  /** A pre-registered client instead of dynamic registration. */
  readonly client: PreRegistered | undefined
  /** Accept a server's request to open a page (URL-mode elicitation) without asking. */
  readonly yes: boolean
}

/** A command line that cannot be run; the message says why. */
export class UsageError extends Error {
  override readonly name = "UsageError"
}

/** The usage text. */
export const USAGE = `usage: keyway-mcp <command> [options]

commands:
  list-tools <url>                 list the tools of the MCP server at <url>
  call <url> <tool> [json args]    call a tool, with its arguments as a JSON object
  login <url>                      authorize now and keep the tokens
  logout <url>                     revoke the tokens held for <url> at the authorization server, and
                                   forget them

options:
  --headless            follow the authorization server's redirects without opening a browser
  --device              authorize on another device: print a URL and a code to enter there (the
                        default where no browser can open, e.g. over SSH without a display)
  --scope <scopes>      request these scopes (space-separated) instead of the server's; offline_access is
                        added when the authorization server offers it
  --tokens <file>       token file (default $XDG_CONFIG_HOME/keyway/tokens.json or ~/.config/keyway/tokens.json)
  --client-id <id>      use this client, registered beforehand, instead of registering (with --issuer)
  --issuer <url>        the authorization server the client is registered with (its issuer identifier)
  --client-secret <s>   the client's secret; better from $${CLIENT_SECRET_VARIABLE}, since other users
                        can see a command line (ps)
  --json                print JSON
  --yes                 open the pages MCP servers ask to open (URL-mode elicitation) without asking
  -h, --help            show this help

The browser is the system's default, or the command in $BROWSER.`

const validUrl = (raw: string | undefined, command: string): string => {
  if (raw === undefined) throw new UsageError(`${command} needs the MCP server URL`)
  const url = URL.parse(raw)
  if (url === null || (url.protocol !== "https:" && url.protocol !== "http:")) {
    throw new UsageError(`"${raw}" is not an http(s) URL`)
  }
  return raw
}

const toolArguments = (raw: string | undefined): Record<string, unknown> => {
  if (raw === undefined) return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    throw new UsageError(`the tool arguments are not valid JSON: ${raw}`)
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`the tool arguments must be a JSON object, got: ${raw}`)
  }
  return parsed as Record<string, unknown>
}

/** The pre-registered client of the flags (the secret from the environment when no flag gives it), if any. */
const preRegistered = (
  values: {
    readonly "client-id"?: string | undefined
    readonly "client-secret"?: string | undefined
    readonly issuer?: string | undefined
  },
  env: Readonly<Record<string, string | undefined>>,
): PreRegistered | undefined => {
  const clientId = values["client-id"]
  if (clientId === undefined) {
    if (values["client-secret"] !== undefined) throw new UsageError("--client-secret goes with --client-id")
    if (values.issuer !== undefined) throw new UsageError("--issuer goes with --client-id")
    return undefined
  }
  if (clientId === "") throw new UsageError("--client-id is empty")
  const issuer = values.issuer
  if (issuer === undefined) {
    throw new UsageError(
      "--client-id needs --issuer, the authorization server the client is registered with (a client is never used with another)",
    )
  }
  const secret = values["client-secret"] ?? env[CLIENT_SECRET_VARIABLE]
  const url = URL.parse(issuer)
  if (url === null || (url.protocol !== "https:" && url.protocol !== "http:")) {
    throw new UsageError(`--issuer "${issuer}" is not an http(s) URL`)
  }
  return { clientId, issuer, clientSecret: secret === "" ? undefined : secret }
}

/** Parses the arguments after the program name; `env` gives the client secret when no flag does. */
export const parseCommandLine = (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>> = {},
): { command: Command; options: Options } => {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof spec; allowPositionals: true }>>
  const spec = {
    headless: { type: "boolean", default: false },
    device: { type: "boolean", default: false },
    scope: { type: "string" },
    tokens: { type: "string" },
    "client-id": { type: "string" },
    "client-secret": { type: "string" },
    issuer: { type: "string" },
    json: { type: "boolean", default: false },
    yes: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  } as const
  try {
    parsed = parseArgs({ args: [...argv], options: spec, allowPositionals: true })
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
  const { values, positionals } = parsed
  if (values.headless && values.device) {
    throw new UsageError("--headless and --device are two ways to authorize: give one of them")
  }
  const options: Options = {
    headless: values.headless,
    device: values.device,
    scope: values.scope,
    tokens: values.tokens,
    json: values.json,
    client: preRegistered(values, env),
    yes: values.yes,
  }
  const [name, ...rest] = positionals
  if (values.help || name === undefined || name === "help") return { command: { kind: "help" }, options }
  const extra = (count: number) => {
    if (rest.length > count) throw new UsageError(`${name} takes ${count} argument(s), got: ${rest.join(" ")}`)
  }
  switch (name) {
    case "list-tools":
    case "login":
    case "logout":
      extra(1)
      return { command: { kind: name, url: validUrl(rest[0], name) }, options }
    case "call": {
      extra(3)
      const url = validUrl(rest[0], name)
      const tool = rest[1]
      if (tool === undefined || tool === "") throw new UsageError("call needs a tool name")
      return { command: { kind: "call", url, tool, arguments: toolArguments(rest[2]) }, options }
    }
    default:
      throw new UsageError(`unknown command "${name}" (list-tools, call, login, logout)`)
  }
}
