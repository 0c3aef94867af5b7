/**
 * The adapter for tool handlers of the official MCP SDK server: `withConnection` gives a handler the provider's
 * `fetch` for the caller, or answers the URL-mode elicitation that connects the account, as the request's revision
 * wants it. On 2025-11-25 (and 2025-06-18 clients that declare `elicitation.url`): the `-32042`
 * `URLElicitationRequiredError`, then `notifications/elicitation/complete` when the callback finishes. On 2026-07-28:
 * an `InputRequiredResult` with the URL elicitation and a `requestState`, and on the retry the tool's result.
 * {@link connectionTools} takes the SDK server once and gives `withConnection(provider, handler)`.
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

/** Options of {@link connectionTools}. */
export interface ConnectionToolsOptions {
  /**
   * The SDK server the tools are registered on (the one of the session, or of the request under
   * `createMcpHandler`). On 2025-era requests its client's declared capabilities say whether URL elicitation is
   * supported, and the completion notification goes out through it.
   */
  readonly server: McpServer | Server
  /**
   * Milliseconds a 2026-07-28 retry waits for the connect flow to finish before answering another input-required
   * result (default 30000). Measured on the connections' `Clock`.
   */
  readonly retryWait?: number
}

/** What {@link connectionTools} gives: the wrapper of tool handlers that use a provider's account. */
export interface ConnectionTools {
  /**
   * Wraps an SDK tool handler (`(args, ctx)` or `(ctx)`) so that it receives the provider's `fetch` for the caller
   * as its first argument, or answers the URL-mode elicitation that connects the account.
   */
  readonly withConnection: <Args extends ReadonlyArray<unknown>>(
    provider: string,
    handler: (fetch: ProviderFetch, ...args: Args) => CallToolResult | Promise<CallToolResult>,
  ) => (...args: Args) => Promise<CallToolResult | InputRequiredResult>
}

/** The key of the URL elicitation in the `inputRequests` of a 2026-07-28 `InputRequiredResult`. */
export const INPUT_KEY = "connect"

const toolError = (text: string): CallToolResult => ({ content: [{ type: "text", text }], isError: true })

const unsupported = (provider: string): CallToolResult =>
  toolError(
    `This tool needs your ${provider} account connected to this MCP server, which takes a step in your browser: this MCP client does not support URL-mode elicitation (MCP 2025-11-25), so use a client that does.`,
  )

/**
 * Tool wrappers for one SDK server: `withConnection(provider, handler)` gives a handler the provider's `fetch` for
 * the caller. The caller is the verified MCP token's `iss` and `sub` (`authenticatedOf` of `@keyway/mcp-sdk-server`);
 * a request without them gets a tool error, and so does a client that declared no URL elicitation (the text says
 * what is needed).
 *
 * Without a usable connection the answer follows the request's revision. 2025-11-25 (and 2025-06-18 clients that
 * declare `elicitation.url`): the `-32042` `URLElicitationRequiredError` with the elicitation, then
 * `notifications/elicitation/complete` through `server` when the callback finishes, which needs a sessionful
 * transport; the server waits for that callback until the flow expires (`flowTtl`) or the session closes (its
 * `onclose`, which it chains: set yours before). 2026-07-28: an `InputRequiredResult` with the `elicitation/create` (mode `url`) input request and a
 * `requestState`; its retry with `action: "accept"` waits up to `retryWait` for the callback, then answers the tool's
 * result or another input-required result. The `requestState` holds only the elicitation's ID: it decides nothing
 * but which completion a retry waits for, since the connection is looked up for the verified caller of the retry.
 *
 * @example
 * ```ts
 * const mcp = createMcpHandler(() => {
 *   const server = new McpServer({ name: "notes", version: "1.0.0" })
 *   const { withConnection } = connectionTools(connections, { server })
 *   server.registerTool("my_repos", { description: "Your repositories" },
 *     withConnection("github", async (fetch) => ({ content: [{ type: "text", text: await (await fetch("/user/repos")).text() }] })))
 *   return server
 * })
 * ```
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-elicitation-required-error | MCP URLElicitationRequiredError}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#completion-notifications-for-url-mode-elicitation | MCP completion notifications}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr | MCP 2026-07-28 multi-round-trip requests}
 */
export const connectionTools = (connections: ConnectionsClient, options: ConnectionToolsOptions): ConnectionTools => {
  const server = "server" in options.server ? options.server.server : options.server
  const retryWait = options.retryWait ?? 30_000
  // The session's end stops the waits for completions it can no longer be told of (an onclose set before is kept).
  const closed = new AbortController()
  const previousOnClose = server.onclose
  server.onclose = () => {
    closed.abort()
    previousOnClose?.()
  }
  const orRequired = (attempt: Promise<ProviderFetch>): Promise<ProviderFetch | ConnectionRequired> =>
    attempt.catch((e: unknown) => {
      if (e instanceof ConnectionRequired) return e
      throw e
    })
  const withConnection =
    <Args extends ReadonlyArray<unknown>>(
      provider: string,
      handler: (fetch: ProviderFetch, ...args: Args) => CallToolResult | Promise<CallToolResult>,
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
      // A retry whose answer is decline or cancel ends the rounds: asking again would loop until the client gives up.
      if (typeof retryOf === "string" && answer !== undefined && answer.action !== "accept") {
        return toolError(
          `Your ${provider} account was not connected (the elicitation was answered ${JSON.stringify(answer.action)}), so this tool cannot run. Call it again to connect.`,
        )
      }
      // A retry after the user accepted waits (a while) for the callback when it has not finished yet.
      const result = await orRequired(
        typeof retryOf === "string" && answer?.action === "accept"
          ? connections.fetchWhenConnected(user, provider, retryOf, retryWait)
          : connections.fetch(user, provider),
      )
      if (!(result instanceof ConnectionRequired)) return await handler(result, ...args)
      const { elicitation } = result
      if (modern) {
        const capabilities = envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined
        if (capabilities?.elicitation?.url === undefined) return unsupported(provider)
        return inputRequired({
          inputRequests: {
            [INPUT_KEY]: inputRequired.elicitUrl({ message: elicitation.message, url: elicitation.url }),
          },
          requestState: elicitation.elicitationId,
        })
      }
      if (server.getClientCapabilities()?.elicitation?.url === undefined) return unsupported(provider)
      const notify = server.createElicitationCompletionNotifier(elicitation.elicitationId)
      // Waits for the callback no longer than the flow lives, nor than the session that would be told.
      void connections.completion(elicitation.elicitationId, closed.signal).then((completed) => {
        if (completed) notify().catch(() => undefined)
      })
      throw new UrlElicitationRequiredError([elicitation], elicitation.message)
    }
  return { withConnection }
}
