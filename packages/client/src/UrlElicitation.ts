/**
 * URL-mode elicitation on the client side: an MCP server asks the user to open a page of its own (to connect an
 * account at a third party, to enter a secret) that must not pass through the client. The client shows which server
 * asks, the target host and the full URL, asks the user's consent, opens the URL in the user agent, and answers
 * `accept`, `decline` or `cancel`. On 2025-11-25 a request that needs such an elicitation fails with -32042 and the
 * server later sends `notifications/elicitation/complete`; {@link makeCompletions} waits for those with a time
 * limit. On 2026-07-28 the answer rides the retried request (multi round-trip requests) and the server decides.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP 2025-11-25 URL-mode elicitation}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/client/elicitation#url-mode-elicitation-requests | MCP 2026-07-28 URL-mode elicitation}
 * @module
 */
import { SecureUrl } from "@keyway/core"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { UserAgent } from "./UserAgent.js"

/**
 * One URL-mode elicitation as the server sent it, with the name of the server that sent it.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP 2025-11-25 URL-mode elicitation}
 */
export interface Request {
  /** The server that asks: its name or title as it introduced itself, or its URL. */
  readonly server: string
  readonly message: string
  readonly url: string
  /** The elicitation's identifier (2025-11-25); 2026-07-28 has none. */
  readonly elicitationId?: string | undefined
}

/**
 * What the user is shown before consenting.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#safe-url-handling | MCP 2025-11-25 safe URL handling}
 */
export interface Prompt {
  readonly server: string
  /** The URL's host in ASCII (an internationalized name as punycode), with its port when it has one. */
  readonly host: string
  /** The full URL, to be shown for examination. */
  readonly url: string
  readonly message: string
  readonly elicitationId?: string | undefined
  /** True when a label of the host is punycode (`xn--`): a name that may imitate another; warn the user. */
  readonly punycode: boolean
}

/**
 * The three answers of an elicitation.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#response-actions | MCP 2025-11-25 response actions}
 */
export type Action = "accept" | "decline" | "cancel"

/**
 * The answer to send back, and why when it is not `accept` for a reason the user did not choose (a refused URL, a
 * browser that could not be opened).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#response-actions | MCP 2025-11-25 response actions}
 */
export interface Answer {
  readonly action: Action
  readonly reason?: string
}

/**
 * How an elicitation is presented.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#safe-url-handling | MCP 2025-11-25 safe URL handling}
 */
export interface Options {
  /** Shows the prompt and returns the user's choice; the URL is opened only after `accept`. */
  readonly consent: (prompt: Prompt) => Action | Promise<Action>
  /** The user agent whose `visit` opens the URL (the same one the client authorizes with). */
  readonly userAgent?: UserAgent["Service"]
  /** Opens the URL; used instead of the user agent when given. */
  readonly open?: (url: string) => void | Promise<void>
}

/**
 * The prompt for a request, or the reason it is refused: a string that is not a URL, a scheme other than https
 * (http only on a loopback host, core's `SecureUrl` policy), or a URL with a user name or password, which can make
 * a host look like another (`https://bank.example@evil.example`).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#safe-url-handling | MCP 2025-11-25 safe URL handling}
 */
export const prompt = (request: Request): { readonly prompt: Prompt } | { readonly refused: string } => {
  const url = URL.parse(request.url)
  if (url === null) return { refused: `${request.server} asked to open "${request.url}", which is not a URL` }
  if (url.username !== "" || url.password !== "") {
    return {
      refused: `${request.server} asked to open a URL with a user name or password before its host (${url.host}); it was not opened`,
    }
  }
  if (!SecureUrl.isAllowed(url, { httpLoopback: true })) {
    return {
      refused: `${request.server} asked to open ${url.protocol}//${url.host}, which is neither https nor http on a loopback host; it was not opened`,
    }
  }
  return {
    prompt: {
      server: request.server,
      host: url.host,
      url: url.href,
      message: request.message,
      elicitationId: request.elicitationId,
      punycode: url.hostname.split(".").some((label) => label.startsWith("xn--")),
    },
  }
}

/**
 * Presents one elicitation: refuses an unsafe URL (decline, with the reason), asks consent, opens the URL through
 * `open` or the user agent's `visit` after `accept`, and answers. A URL that could not be opened answers `cancel`
 * with the reason. Never fails: every outcome is an answer for the server.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#safe-url-handling | MCP 2025-11-25 safe URL handling}
 */
export const present = Effect.fn("UrlElicitation.present")(function* (request: Request, options: Options) {
  const checked = prompt(request)
  if ("refused" in checked) return { action: "decline", reason: checked.refused } satisfies Answer as Answer
  const action = yield* Effect.tryPromise(() => Promise.resolve(options.consent(checked.prompt))).pipe(
    Effect.orElseSucceed((): Action => "cancel"),
  )
  if (action !== "accept") return { action } satisfies Answer as Answer
  const { open } = options
  const visit = options.userAgent?.visit
  const opened: Effect.Effect<void, string> =
    open !== undefined
      ? Effect.tryPromise({
          try: () => Promise.resolve(open(checked.prompt.url)),
          catch: (cause) => (cause instanceof Error ? cause.message : String(cause)),
        })
      : visit !== undefined
        ? Effect.mapError(visit(checked.prompt.url), (error) => error.message)
        : Effect.fail("this client has no way to open a page")
  return yield* opened.pipe(
    Effect.as<Answer>({ action: "accept" }),
    Effect.catch((reason) =>
      Effect.succeed<Answer>({ action: "cancel", reason: `${checked.prompt.url} could not be opened: ${reason}` }),
    ),
  )
})

/**
 * Why waiting for completions stopped: the time limit passed before every elicitation was completed.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#completion-notifications-for-url-mode-elicitation | MCP 2025-11-25 completion notifications}
 */
export class CompletionTimeout extends Schema.TaggedError<CompletionTimeout>()("UrlElicitationTimeout", {
  elicitationIds: Schema.Array(Schema.String),
  message: Schema.String,
}) {}

/**
 * The completion notifications of one connection, by elicitation ID.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#completion-notifications-for-url-mode-elicitation | MCP 2025-11-25 completion notifications}
 */
export interface Completions {
  /** Starts expecting an ID (before its URL is opened, so that a quick notification is not missed). */
  readonly expect: (elicitationId: string) => void
  /** Stops expecting an ID (declined or cancelled). */
  readonly forget: (elicitationId: string) => void
  /** A notification arrived; IDs not expected, or already completed, are ignored. */
  readonly complete: (elicitationId: string) => void
  /** Waits until every expected ID in the list is completed, at most `timeoutMs` (default 5 minutes). */
  readonly wait: (elicitationIds: ReadonlyArray<string>, timeoutMs?: number) => Effect.Effect<void, CompletionTimeout>
  /**
   * The plain face of `wait`: resolves when every ID is completed; rejects with {@link CompletionTimeout} after the
   * time limit, or with the signal's reason when it aborts first.
   */
  readonly until: (
    elicitationIds: ReadonlyArray<string>,
    options?: { readonly timeoutMs?: number | undefined; readonly signal?: AbortSignal | undefined },
  ) => Promise<void>
}

/** The default time limit for completions: 5 minutes. */
export const DEFAULT_TIMEOUT_MS = 5 * 60_000

/**
 * A tracker of completion notifications. Waits run on Effect's clock (TestClock in tests).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#completion-notifications-for-url-mode-elicitation | MCP 2025-11-25 completion notifications}
 */
export const makeCompletions = (): Completions => {
  const pending = new Map<string, Deferred.Deferred<void>>()
  const completions: Completions = {
    expect: (id) => {
      if (!pending.has(id)) pending.set(id, Deferred.makeUnsafe<void>())
    },
    forget: (id) => void pending.delete(id),
    complete: (id) => {
      const deferred = pending.get(id)
      if (deferred !== undefined) Deferred.doneUnsafe(deferred, Effect.void)
    },
    wait: (ids, timeoutMs = DEFAULT_TIMEOUT_MS) => {
      const waiting = ids.flatMap((id) => {
        const deferred = pending.get(id)
        return deferred === undefined ? [] : [Deferred.await(deferred)]
      })
      return Effect.all(waiting, { concurrency: "unbounded", discard: true }).pipe(
        Effect.timeoutOrElse({
          duration: Duration.millis(timeoutMs),
          orElse: () =>
            Effect.fail(
              new CompletionTimeout({
                elicitationIds: [...ids],
                message: `the server did not report the elicitation${ids.length === 1 ? "" : "s"} ${ids.join(", ")} complete within ${Math.round(timeoutMs / 1000)} seconds`,
              }),
            ),
        }),
        Effect.ensuring(
          Effect.sync(() => {
            for (const id of ids) pending.delete(id)
          }),
        ),
      )
    },
    until: (ids, options = {}) => {
      const { signal } = options
      if (signal?.aborted === true) {
        for (const id of ids) pending.delete(id)
        return Promise.reject(signal.reason)
      }
      return Effect.runPromise(completions.wait(ids, options.timeoutMs), signal === undefined ? {} : { signal }).catch(
        (error: unknown) => {
          throw signal?.aborted === true ? signal.reason : error
        },
      )
    },
  }
  return completions
}

/**
 * The plain face of {@link present}: a function from a request to a Promise of the answer.
 *
 * @example
 * ```ts
 * const elicit = createUrlElicitation({ userAgent, consent: async (p) => (await ask(p)) ? "accept" : "decline" })
 * const answer = await elicit({ server: "files", message: "Connect your drive", url })
 * ```
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP 2025-11-25 URL-mode elicitation}
 */
export const createUrlElicitation =
  (options: Options) =>
  (request: Request): Promise<Answer> =>
    Effect.runPromise(present(request, options))
