/**
 * The command line of keyway-mcp: `list-tools <url>`, `call <url> <tool> [json args]`, `login <url>`,
 * `logout <url>`, with `--headless`, `--scope <scopes>`, `--tokens <file>` and `--json`.
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

/** Options shared by every command. */
export interface Options {
  /** Follow the authorization server's redirects without a browser (automation, servers that need no login). */
  readonly headless: boolean
  readonly scope: string | undefined
  /** The token file; the user's config directory by default. */
  readonly tokens: string | undefined
  /** Print machine-readable JSON instead of text. */
  readonly json: boolean
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
  logout <url>                     forget the tokens held for <url>

options:
  --headless        follow the authorization server's redirects without opening a browser
  --scope <scopes>  request these scopes (space-separated) instead of the server's; offline_access is
                    added when the authorization server offers it
  --tokens <file>   token file (default $XDG_CONFIG_HOME/keyway/tokens.json or ~/.config/keyway/tokens.json)
  --json            print JSON
  -h, --help        show this help

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

/** Parses the arguments after the program name. */
export const parseCommandLine = (argv: ReadonlyArray<string>): { command: Command; options: Options } => {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof spec; allowPositionals: true }>>
  const spec = {
    headless: { type: "boolean", default: false },
    scope: { type: "string" },
    tokens: { type: "string" },
    json: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  } as const
  try {
    parsed = parseArgs({ args: [...argv], options: spec, allowPositionals: true })
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
  const { values, positionals } = parsed
  const options: Options = {
    headless: values.headless,
    scope: values.scope,
    tokens: values.tokens,
    json: values.json,
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
