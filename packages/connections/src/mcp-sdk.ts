/**
 * The adapter for tool handlers of the official MCP SDK server: `withConnection` gives a handler the provider's
 * `fetch` for the caller, or answers the URL-mode elicitation that connects the account, as the request's revision
 * wants it. On 2025-11-25 (and 2025-06-18 clients that declare `elicitation.url`): the `-32042`
 * `URLElicitationRequiredError`, then `notifications/elicitation/complete` when the callback finishes. On 2026-07-28:
 * an `InputRequiredResult` with the URL elicitation and a `requestState`, and on the retry the tool's result.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP 2025-11-25 URL-mode elicitation}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr | MCP 2026-07-28 multi-round-trip requests}
 * @module
 */
import { authenticatedOf } from "@keyway/mcp-sdk-server"
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  type InputRequiredResult,
  inputRequired,
  type McpServer,
  PROTOCOL_VERSION_META_KEY,
  type Server,
  type ServerContext,
  UrlElicitationRequiredError,
} from "@modelcontextprotocol/server"
import { ConnectionRequired, type ConnectionsClient, type ProviderFetch, type User } from "./Connections.js"

/** Options of {@link withConnection}. */
export interface WithConnectionOptions {
  /**
   * The server of the session (2025-era serving): its client's declared capabilities say whether URL elicitation is
   * supported, and the completion notification goes out through it. Without it, 2025-era clients get a tool error.
   */
  readonly server?: McpServer | Server
  /** Milliseconds a 2026-07-28 retry waits for the callback to finish before asking again (default 30000). */
  readonly retryWait?: number
}

/** The key of the URL elicitation in the `inputRequests` of a 2026-07-28 `InputRequiredResult`. */
export const INPUT_KEY = "connect"

const toolError = (text: string): CallToolResult => ({ content: [{ type: "text", text }], isError: true })

const unsupported = (provider: string): CallToolResult =>
  toolError(
    `This tool needs your ${provider} account connected to this MCP server, which takes a step in your browser: this MCP client does not support URL-mode elicitation (MCP 2025-11-25), so use a client that does.`,
  )

/** Resolves when the callback of `elicitationId` finished for this user and provider, or after `ms`. */
const completion = (
  connections: ConnectionsClient,
  elicitationId: string,
  user: User,
  provider: string,
  ms: number,
): { readonly done: Promise<void>; readonly cancel: () => void } => {
  let cancel = () => {}
  const done = new Promise<void>((resolve) => {
    const timer = setTimeout(finish, ms)
    const off = connections.onComplete((id, who, p) => {
      if (id === elicitationId && who.issuer === user.issuer && who.subject === user.subject && p === provider) finish()
    })
    function finish() {
      clearTimeout(timer)
      off()
      resolve()
    }
    cancel = finish
  })
  return { done, cancel }
}

/**
 * Wraps an SDK tool handler (`(args, ctx)` or `(ctx)`) so that it receives the provider's `fetch` for the caller as
 * its first argument. The caller is the verified MCP token's `iss` and `sub` (`authenticatedOf` of
 * `@keyway/mcp-sdk-server`); a request without them gets a tool error. A client that declared no URL elicitation gets
 * a tool error that says what is needed.
 *
 * The 2026-07-28 `requestState` holds only the elicitation's ID: it decides nothing but which completion a retry waits
 * for, since the connection is looked up for the verified caller of the retry itself.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-elicitation-required-error | MCP URLElicitationRequiredError}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#completion-notifications-for-url-mode-elicitation | MCP completion notifications}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr | MCP 2026-07-28 multi-round-trip requests}
 */
export const withConnection =
  <Args extends ReadonlyArray<unknown>>(
    connections: ConnectionsClient,
    provider: string,
    handler: (fetch: ProviderFetch, ...args: Args) => CallToolResult | Promise<CallToolResult>,
    options: WithConnectionOptions = {},
  ) =>
  async (...args: Args): Promise<CallToolResult | InputRequiredResult> => {
    const ctx = args[args.length - 1] as ServerContext
    const token = authenticatedOf(ctx)?.token
    if (token?.issuer === undefined || token.subject === undefined) {
      return toolError(
        `This tool uses your ${provider} account, so it needs a signed-in user (a token with iss and sub).`,
      )
    }
    const user: User = { issuer: token.issuer, subject: token.subject }
    const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined
    const modern = envelope?.[PROTOCOL_VERSION_META_KEY] !== undefined
    const retryOf = modern ? ctx.mcpReq.requestState<unknown>() : undefined
    const answer = (ctx.mcpReq.inputResponses?.[INPUT_KEY] ?? undefined) as { action?: unknown } | undefined
    // A retry after the user accepted: wait (a while) for the callback when it has not finished yet.
    const waiting =
      typeof retryOf === "string" && answer?.action === "accept"
        ? completion(connections, retryOf, user, provider, options.retryWait ?? 30_000)
        : undefined
    const attempt = async (): Promise<ProviderFetch | ConnectionRequired> => {
      try {
        return await connections.fetch(user, provider)
      } catch (e) {
        if (e instanceof ConnectionRequired) return e
        throw e
      }
    }
    let result = await attempt()
    if (result instanceof ConnectionRequired && waiting !== undefined) {
      await waiting.done
      result = await attempt()
    }
    waiting?.cancel()
    if (!(result instanceof ConnectionRequired)) return await handler(result, ...args)
    const { elicitation } = result
    if (modern) {
      const capabilities = envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined
      if (capabilities?.elicitation?.url === undefined) return unsupported(provider)
      return inputRequired({
        inputRequests: { [INPUT_KEY]: inputRequired.elicitUrl({ message: elicitation.message, url: elicitation.url }) },
        requestState: elicitation.elicitationId,
      })
    }
    const server =
      options.server === undefined ? undefined : "server" in options.server ? options.server.server : options.server
    if (server?.getClientCapabilities()?.elicitation?.url === undefined) return unsupported(provider)
    const notify = server.createElicitationCompletionNotifier(elicitation.elicitationId)
    const off = connections.onComplete((id) => {
      if (id !== elicitation.elicitationId) return
      off()
      notify().catch(() => undefined)
    })
    throw new UrlElicitationRequiredError([elicitation], elicitation.message)
  }
