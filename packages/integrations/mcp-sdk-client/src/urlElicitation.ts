/**
 * URL-mode elicitation for the official MCP SDK v2 client, on both revisions: the `elicitation/create` handler
 * (a server's request on 2025-11-25, an embedded input request of the SDK's multi-round-trip driver on 2026-07-28)
 * and, on 2025-11-25, the retry of a request that failed with -32042 once the server reports completion.
 *
 * @module
 */
import { UrlElicitation } from "@keyway/client"
import {
  type CallToolRequest,
  type CallToolResult,
  type Client,
  type ElicitRequest,
  type ElicitResult,
  ProtocolError,
  ProtocolErrorCode,
  type RequestOptions,
  UrlElicitationRequiredError,
} from "@modelcontextprotocol/client"

/**
 * Options of {@link urlElicitation}: how elicitations are presented (`UrlElicitation.Options` of `@keyway/client`), and more.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation | MCP 2025-11-25 elicitation}
 */
export interface UrlElicitationOptions extends UrlElicitation.Options {
  /** The name shown as the server that asks; by default the title or name the server introduced itself with. */
  readonly serverName?: string
  /** Handles form-mode elicitations; when given, the client declares form mode too. */
  readonly form?: (request: ElicitRequest) => Promise<ElicitResult>
  /** How long to wait for the completion notifications of a -32042 error, in milliseconds (default 5 minutes). */
  readonly timeoutMs?: number
}

/**
 * Why a request that needed URL-mode elicitations was not retried: an elicitation was declined or cancelled (the
 * answer's reason, such as a refused URL, is in the message), the server did not report completion in time, or it
 * asked again after the retry.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-elicitation-required-error | MCP 2025-11-25 URLElicitationRequiredError}
 */
export class UrlElicitationFailed extends Error {
  override readonly name = "UrlElicitationFailed"
  constructor(
    readonly reason: "declined" | "cancelled" | "timeout" | "repeated",
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/**
 * What {@link urlElicitation} returns: ways to run requests that may fail with -32042.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-elicitation-required-error | MCP 2025-11-25 URLElicitationRequiredError}
 */
export interface UrlElicitationHandle {
  /**
   * Runs `request`; when it fails with -32042 (`UrlElicitationRequiredError`), presents each elicitation, waits for
   * `notifications/elicitation/complete` for each accepted one (within the time limit and `signal`), and runs
   * `request` once more. A second -32042 fails with {@link UrlElicitationFailed} (`repeated`).
   */
  readonly retrying: <A>(
    request: () => Promise<A>,
    options?: { readonly signal?: AbortSignal | undefined; readonly timeoutMs?: number | undefined },
  ) => Promise<A>
  /** `client.callTool` through {@link UrlElicitationHandle.retrying}, with the same signal. */
  readonly callTool: (params: CallToolRequest["params"], options?: RequestOptions) => Promise<CallToolResult>
}

const present = (
  client: Client,
  options: UrlElicitationOptions,
  request: { readonly message: string; readonly url: string; readonly elicitationId?: string | undefined },
): Promise<UrlElicitation.Answer> => {
  const server = client.getServerVersion()
  return UrlElicitation.createUrlElicitation(options)({
    server: options.serverName ?? server?.title ?? server?.name ?? "the MCP server",
    ...request,
  })
}

/**
 * Adds URL-mode elicitation to an SDK client; call it before `connect`. It declares `elicitation: { url: {} }`
 * (with `form: {}` when `options.form` handles forms), answers `elicitation/create` in URL mode with the user's
 * consent and opens the URL in the user agent, and tracks `notifications/elicitation/complete` (replacing any
 * handler of that notification). On 2026-07-28 the SDK's multi-round-trip driver sends the same handler's answer
 * with the retried request and its `requestState`; the server decides whether the interaction is complete.
 *
 * @example
 * ```ts
 * const client = new Client({ name: "my-agent", version: "1.0.0" })
 * const elicit = urlElicitation(client, { userAgent, consent: async (p) => (await ask(p)) ? "accept" : "decline" })
 * await client.connect(createTransport(url, auth))
 * const result = await elicit.callTool({ name: "list-files", arguments: {} })
 * ```
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP 2025-11-25 URL-mode elicitation}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr | MCP 2026-07-28 multi round-trip requests}
 */
export const urlElicitation = (client: Client, options: UrlElicitationOptions): UrlElicitationHandle => {
  const { form } = options
  client.registerCapabilities({ elicitation: form === undefined ? { url: {} } : { form: {}, url: {} } })
  const completions = UrlElicitation.makeCompletions()
  client.setNotificationHandler("notifications/elicitation/complete", (notification) => {
    completions.complete(notification.params.elicitationId)
  })
  client.setRequestHandler("elicitation/create", async (request) => {
    const params = request.params
    if (params.mode === "url") {
      const answer = await present(client, options, params)
      return { action: answer.action }
    }
    if (form === undefined) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, "Client does not support form-mode elicitation requests")
    }
    return form(request)
  })

  const retrying: UrlElicitationHandle["retrying"] = async (request, runOptions = {}) => {
    const first = await request().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    )
    if ("value" in first) return first.value
    if (!(first.error instanceof UrlElicitationRequiredError)) throw first.error
    const accepted: Array<string> = []
    for (const elicitation of first.error.elicitations) {
      completions.expect(elicitation.elicitationId)
      const answer = await present(client, options, elicitation)
      if (answer.action !== "accept") {
        for (const id of [...accepted, elicitation.elicitationId]) completions.forget(id)
        throw new UrlElicitationFailed(
          answer.action === "decline" ? "declined" : "cancelled",
          `the elicitation ${elicitation.elicitationId} was ${answer.action === "decline" ? "declined" : "cancelled"}${answer.reason === undefined ? "" : `: ${answer.reason}`}`,
          { cause: first.error },
        )
      }
      accepted.push(elicitation.elicitationId)
    }
    await completions
      .until(accepted, { timeoutMs: runOptions.timeoutMs ?? options.timeoutMs, signal: runOptions.signal })
      .catch((error: unknown) => {
        if (error instanceof UrlElicitation.CompletionTimeout) {
          throw new UrlElicitationFailed("timeout", error.message, { cause: first.error })
        }
        throw error
      })
    return request().catch((error: unknown) => {
      if (error instanceof UrlElicitationRequiredError) {
        throw new UrlElicitationFailed(
          "repeated",
          `the server asked again for URL elicitation after ${accepted.join(", ")} completed; the request is not retried twice`,
          { cause: error },
        )
      }
      throw error
    })
  }

  return {
    retrying,
    callTool: (params, requestOptions) =>
      retrying(() => client.callTool(params, requestOptions) as Promise<CallToolResult>, {
        signal: requestOptions?.signal,
      }),
  }
}
