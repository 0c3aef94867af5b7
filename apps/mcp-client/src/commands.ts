/**
 * The commands of keyway-mcp, over the official MCP SDK client and an authorized transport from Keyway.
 *
 * @module
 */
import { type AuthClient, createAuthClient, type Extension, isAuthError, UserAgent } from "@keyway/client/node"
import { deviceAuthorization, printTo } from "@keyway/ext-device-authorization/client"
import { createTransport, type UrlElicitationHandle, urlElicitation } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import type { Command, Options } from "./args.js"
import { type Terminal, terminalElicitation } from "./elicitation.js"
import { describeError } from "./errors.js"

/** Where a command writes: results on `out`, progress and notices on `err`. */
export interface Io {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
}

/** The environment of a command. */
export interface Environment extends Io {
  /** The token file. */
  readonly tokensFile: string
  /** Opens a URL in the user's browser. */
  readonly openBrowser: (url: string) => Promise<void> | void
  /** Why no browser can open here, or undefined when one can; a browser is assumed when absent. */
  readonly browserUnavailable?: () => string | undefined
  /** Whether `err` writes to a terminal, which can show a QR code. */
  readonly errIsTerminal?: boolean
  /** The terminal's questions and browser for the pages MCP servers ask to open. */
  readonly elicitation?: Omit<Terminal, "err">
}

/** A tool call whose result says it failed (`isError`); its text is the message. */
export class ToolError extends Error {
  override readonly name = "ToolError"
}

const NAME = "keyway-mcp"
const VERSION = "0.0.0"

/**
 * The device authorization grant (RFC 8628) with `--device`, or without `--headless` where no browser can open (said
 * on stderr when it is about to be used): the URI and the code, and on a terminal the QR code, go to stderr.
 */
const deviceFlow = (options: Options, env: Environment): ReadonlyArray<Extension.ClientExtension> => {
  if (options.headless) return []
  const noBrowser = options.device ? undefined : env.browserUnavailable?.()
  if (!options.device && noBrowser === undefined) return []
  const print = printTo({ write: env.err, isTTY: env.errIsTerminal === true })
  return [
    deviceAuthorization({
      show: (code) => {
        if (noBrowser !== undefined) env.err(`No browser can open here (${noBrowser}): authorize on another device.\n`)
        print(code)
      },
    }),
  ]
}

const authClient = (options: Options, env: Environment): AuthClient.PlainAuthClient => {
  const userAgent = options.headless
    ? UserAgent.headless()
    : UserAgent.browser({
        openBrowser: (url) => {
          env.err(`Opening the authorization page in your browser. If it does not open, visit:\n  ${url}\n`)
          return env.openBrowser(url)
        },
      })
  const client = options.client
  return createAuthClient({
    clientName: NAME,
    store: { file: env.tokensFile },
    userAgent,
    extensions: deviceFlow(options, env),
    ...(options.scope !== undefined ? { scope: options.scope } : {}),
    ...(client === undefined
      ? {}
      : {
          clients: [
            {
              issuer: client.issuer,
              client_id: client.clientId,
              ...(client.clientSecret === undefined ? {} : { client_secret: client.clientSecret }),
            },
          ],
          // The authorization server the client is registered with, among those the MCP server names; one it does
          // not name is refused rather than used.
          chooseAuthorizationServer: () => client.issuer,
        }),
  })
}

/**
 * Revokes the tokens held for a server at their authorization server (RFC 7009), then forgets them whatever the
 * outcome: a server without a revocation endpoint, or one that refuses, leaves them valid there until they expire,
 * which the user is told.
 */
const logout = async (url: string, auth: AuthClient.PlainAuthClient, env: Environment) => {
  const held = await auth.tokens(url)
  if (held === undefined) {
    env.out(`No tokens were held for ${url}.\n`)
    return
  }
  const revoked = await auth.revoke(url).then(
    () => undefined,
    (error: unknown) => error,
  )
  await auth.logout(url)
  if (revoked === undefined) {
    env.out(`Logged out of ${url}: the tokens were revoked at ${held.issuer} and forgotten here.\n`)
    return
  }
  const reason = isAuthError(revoked) ? revoked.message.replace(/\s+/gu, " ") : describeError(revoked)
  env.err(`keyway-mcp: the tokens could not be revoked at ${held.issuer}: ${reason}\n`)
  env.out(
    `Logged out of ${url}: the tokens were forgotten here, but not revoked at ${held.issuer}; they stay valid there until they expire.\n`,
  )
}

const withClient = async <A>(
  url: string,
  auth: AuthClient.PlainAuthClient,
  elicitation: { readonly env: Environment; readonly yes: boolean },
  use: (client: Client, elicit: UrlElicitationHandle) => Promise<A>,
): Promise<A> => {
  // "auto" probes for the stateless 2026-07-28 wire and falls back to the initialize handshake for older servers.
  const client = new Client({ name: NAME, version: VERSION }, { versionNegotiation: { mode: "auto" } })
  const terminal = elicitation.env.elicitation ?? { ask: undefined, openBrowser: undefined }
  const elicit = urlElicitation(client, terminalElicitation({ ...terminal, err: elicitation.env.err }, elicitation.yes))
  try {
    await client.connect(createTransport(url, auth))
    return await use(client, elicit)
  } finally {
    await client.close().catch(() => undefined)
  }
}

type Content = { readonly type: string } & Record<string, unknown>

const renderContent = (item: Content): string => {
  switch (item.type) {
    case "text":
      return String(item.text)
    case "image":
    case "audio":
      return `[${item.type} ${String(item.mimeType)}, ${String(item.data).length} base64 characters]`
    case "resource_link":
      return `[resource ${String(item.uri)}]`
    case "resource": {
      const resource = item.resource as { uri?: unknown; text?: unknown } | undefined
      return typeof resource?.text === "string" ? resource.text : `[resource ${String(resource?.uri)}]`
    }
    default:
      return JSON.stringify(item)
  }
}

const describeExpiry = (expiresAt: number | undefined): string =>
  expiresAt === undefined ? "no stated expiry" : `expires ${new Date(expiresAt).toISOString()}`

/** Runs a command; resolves when done, rejects with a typed or SDK error. */
export const runCommand = async (command: Exclude<Command, { kind: "help" }>, options: Options, env: Environment) => {
  const auth = authClient(options, env)
  try {
    switch (command.kind) {
      case "list-tools": {
        const tools = await withClient(command.url, auth, { env, yes: options.yes }, async (client) => {
          const all: Array<{ name: string; description?: string | undefined }> = []
          let cursor: string | undefined
          do {
            const page = await client.listTools(cursor !== undefined ? { cursor } : {})
            all.push(...page.tools)
            cursor = page.nextCursor
          } while (cursor !== undefined)
          return all
        })
        if (options.json) return env.out(`${JSON.stringify(tools, null, 2)}\n`)
        const width = Math.max(0, ...tools.map((tool) => tool.name.length))
        for (const tool of tools) {
          const description = tool.description?.replace(/\s+/gu, " ").trim()
          env.out(`${description ? `${tool.name.padEnd(width)}  ${description}` : tool.name}\n`)
        }
        if (tools.length === 0) env.err("The server has no tools.\n")
        return
      }
      case "call": {
        const result = await withClient(command.url, auth, { env, yes: options.yes }, (_client, elicit) =>
          elicit.callTool({ name: command.tool, arguments: { ...command.arguments } }),
        )
        if (options.json) env.out(`${JSON.stringify(result, null, 2)}\n`)
        const content = (Array.isArray(result.content) ? result.content : []) as ReadonlyArray<Content>
        const text = content.map(renderContent).join("\n")
        if (result.isError === true) throw new ToolError(`the tool ${command.tool} failed: ${text || "no message"}`)
        if (options.json) return
        if (text !== "") env.out(`${text}\n`)
        else if (result.structuredContent !== undefined) env.out(`${JSON.stringify(result.structuredContent)}\n`)
        return
      }
      case "login": {
        const tokens = await auth.authorize(command.url, options.scope !== undefined ? { scope: options.scope } : {})
        env.out(
          `Logged in to ${command.url} (scope: ${tokens.scope || "none"}; ${describeExpiry(tokens.expires_at)}${tokens.refresh_token !== undefined ? "; refreshable" : ""}). Tokens saved in ${env.tokensFile}.\n`,
        )
        return
      }
      case "logout":
        return await logout(command.url, auth, env)
    }
  } finally {
    await auth.dispose()
  }
}
