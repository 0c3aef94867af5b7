/**
 * How the authorization request reaches the user and the response comes back: a system browser with a loopback
 * redirect listener (CLIs, desktop apps), a headless agent that follows redirects itself (automation, tests, servers
 * that approve without interaction), or two phases for web apps (begin returns the URL, complete takes the callback).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html | RFC 8252 (OAuth 2.0 for native apps)}
 * @module
 */
import { spawn } from "node:child_process"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Context, Duration, Effect, Layer } from "effect"
import { AuthError } from "./AuthError.js"
import { DEFAULT_SUCCESS_PAGE, openerCommand } from "./internal/browser.js"
import { type FetchLike, send } from "./internal/http.js"

/**
 * One authorization attempt's user agent: the redirect URI to register and request, and a way to run the request.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 */
export interface Session {
  readonly redirectUri: string
  /** Shows the authorization URL to the user agent and resolves with the full URL the server redirected back to. */
  readonly run: (authorizationUrl: string) => Effect.Effect<string, AuthError>
  /** Releases what the session holds (the loopback listener). */
  readonly close: Effect.Effect<void>
}

/**
 * The user agent as an Effect service.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html | RFC 8252}
 */
export class UserAgent extends Context.Service<
  UserAgent,
  {
    readonly open: Effect.Effect<Session, AuthError>
  }
>()("@keyway/client/UserAgent") {
  /** A headless agent; see {@link headless}. */
  static readonly layerHeadless = (options: HeadlessOptions = {}): Layer.Layer<UserAgent> =>
    Layer.succeed(UserAgent, headless(options))
  /** A system browser with a loopback listener; see {@link browser}. */
  static readonly layerBrowser = (options: BrowserOptions = {}): Layer.Layer<UserAgent> =>
    Layer.succeed(UserAgent, browser(options))
  /** The first phase of a web app; see {@link twoPhase}. */
  static readonly layerTwoPhase = (options: TwoPhaseOptions): Layer.Layer<UserAgent> =>
    Layer.succeed(UserAgent, twoPhase(options))
}

/** Whether a URL is the redirect URI (same scheme, host, port and path; the query carries the response). */
const isRedirectTarget = (candidate: URL, redirectUri: URL): boolean =>
  candidate.protocol === redirectUri.protocol &&
  candidate.host === redirectUri.host &&
  candidate.pathname === redirectUri.pathname

/**
 * Options of the headless agent.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 */
export interface HeadlessOptions {
  /** The redirect URI to request; it is never listened on. Default "http://127.0.0.1/callback". */
  readonly redirectUri?: string
  /** Redirects to follow before giving up (default 10). */
  readonly maxRedirects?: number
  /** The fetch to use (default the global fetch). */
  readonly fetch?: FetchLike
}

/**
 * A user agent without a user: GETs the authorization URL, follows `Location` headers by hand (carrying cookies
 * per host) until one points at the redirect URI, and returns that URL. A page that needs interaction, or more
 * redirects than allowed, fails with a typed error.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const headless = (options: HeadlessOptions = {}): UserAgent["Service"] => {
  const redirectUri = options.redirectUri ?? "http://127.0.0.1/callback"
  const maxRedirects = options.maxRedirects ?? 10
  const fetchFn: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const run = Effect.fnUntraced(function* (authorizationUrl: string) {
    const target = new URL(redirectUri)
    const cookies = new Map<string, Map<string, string>>()
    let current = new URL(authorizationUrl)
    for (let hop = 0; hop <= maxRedirects; hop++) {
      const jar = cookies.get(current.host)
      const cookie = jar === undefined ? undefined : [...jar].map(([k, v]) => `${k}=${v}`).join("; ")
      const response = yield* send(fetchFn, "authorization", current.href, {
        headers: cookie !== undefined ? { cookie } : {},
      })
      yield* Effect.promise(() => response.body?.cancel() ?? Promise.resolve())
      for (const line of response.headers.getSetCookie()) {
        const [pair] = line.split(";")
        const eq = pair?.indexOf("=") ?? -1
        if (pair === undefined || eq <= 0) continue
        const store = cookies.get(current.host) ?? new Map<string, string>()
        store.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim())
        cookies.set(current.host, store)
      }
      const location = response.headers.get("location")
      if (response.status < 300 || response.status > 399 || location === null) {
        return yield* new AuthError({
          step: "authorization",
          reason: "interaction-required",
          url: current.href,
          status: response.status,
          message: `${current.origin}${current.pathname} answered HTTP ${response.status} instead of redirecting; the authorization server needs a person, use the browser user agent`,
        })
      }
      const next = URL.parse(location, current)
      if (next === null) break
      if (isRedirectTarget(next, target)) return next.href
      current = next
    }
    return yield* new AuthError({
      step: "authorization",
      reason: "redirect-loop",
      url: authorizationUrl.split("?")[0] ?? authorizationUrl,
      message: `the authorization request did not come back to ${redirectUri} within ${maxRedirects} redirects; the authorization server is redirecting in a loop`,
    })
  })
  return UserAgent.of({
    open: Effect.succeed({ redirectUri, run, close: Effect.void }),
  })
}

/**
 * Options of the browser agent.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 */
export interface BrowserOptions {
  /** Opens a URL in the user's browser; {@link openSystemBrowser} by default (`$BROWSER`, else open, xdg-open, start). */
  readonly openBrowser?: (url: string) => Promise<void> | void
  /** Loopback port; 0 (default) picks a free one. */
  readonly port?: number
  /** Callback path (default "/callback"). */
  readonly path?: string
  /** How long to wait for the user, in milliseconds (default 5 minutes). */
  readonly timeoutMs?: number
  /** HTML shown after the redirect; a friendly "you can close this tab" page by default. */
  readonly successPage?: string
}

/**
 * Opens `url` in the system browser (the command in `$BROWSER` when set, else `open` on macOS, `start` on Windows,
 * `xdg-open` elsewhere); resolves once the opener process has started, rejects with the reason when it cannot be
 * started. The default of {@link BrowserOptions.openBrowser}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-4.1 | RFC 8252 §4.1}
 */
export const openSystemBrowser = (url: string): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    const [program, args] = openerCommand(url)
    const child = spawn(program, [...args], { stdio: "ignore", detached: true })
    child.on("error", (error) => reject(new Error(`could not start ${program}: ${error.message}`)))
    child.on("spawn", () => {
      child.unref()
      resolve()
    })
  })

/**
 * A system browser plus a loopback redirect listener on 127.0.0.1 (an ephemeral port by default). The listener
 * answers the first request to the callback path with a page saying the tab can be closed, and hands the full
 * callback URL to the flow, which validates it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-8.3 | RFC 8252 §8.3}
 */
export const browser = (options: BrowserOptions = {}): UserAgent["Service"] => {
  const path = options.path ?? "/callback"
  const opener = options.openBrowser ?? openSystemBrowser
  const timeoutMs = options.timeoutMs ?? 5 * 60_000
  const page = options.successPage ?? DEFAULT_SUCCESS_PAGE
  const open = Effect.callback<Session, AuthError>((resume) => {
    let deliver: ((url: string) => void) | undefined
    const received: Array<string> = []
    const server = createServer((request: IncomingMessage, response: ServerResponse) => {
      const url = new URL(request.url ?? "/", `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
      if (request.method !== "GET" || url.pathname !== path) {
        response.writeHead(404, { "content-type": "text/plain" }).end("Not Found")
        return
      }
      response
        .writeHead(200, {
          "content-type": "text/html; charset=utf-8",
          "cache-control": "no-store",
          "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        })
        .end(page)
      if (deliver !== undefined) deliver(url.href)
      else received.push(url.href)
    })
    server.on("error", (cause) =>
      resume(
        Effect.fail(
          new AuthError({
            step: "authorization",
            reason: "user-agent-failed",
            url: `http://127.0.0.1:${options.port ?? 0}${path}`,
            message: `could not listen for the redirect on 127.0.0.1: ${cause.message}`,
          }),
        ),
      ),
    )
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      const redirectUri = `http://127.0.0.1:${port}${path}`
      const close = Effect.promise(
        () =>
          new Promise<void>((done) => {
            server.close(() => done())
            server.closeAllConnections()
          }),
      )
      const run = (authorizationUrl: string) =>
        Effect.callback<string, AuthError>((resumeRun) => {
          deliver = (url) => resumeRun(Effect.succeed(url))
          const early = received.shift()
          if (early !== undefined) deliver(early)
          Promise.resolve()
            .then(() => opener(authorizationUrl))
            .catch((cause: unknown) => {
              resumeRun(
                Effect.fail(
                  new AuthError({
                    step: "authorization",
                    reason: "user-agent-failed",
                    url: authorizationUrl.split("?")[0] ?? authorizationUrl,
                    message: `could not open the browser: ${cause instanceof Error ? cause.message : String(cause)}`,
                  }),
                ),
              )
            })
        }).pipe(
          // An Effect timer, so the wait follows the Effect clock (TestClock in tests).
          Effect.timeoutOrElse({
            duration: Duration.millis(timeoutMs),
            orElse: () =>
              Effect.fail(
                new AuthError({
                  step: "authorization",
                  reason: "user-agent-failed",
                  url: redirectUri,
                  message: `no authorization response reached ${redirectUri} within ${Math.round(timeoutMs / 1000)} seconds; complete the login in the browser`,
                }),
              ),
          }),
        )
      resume(Effect.succeed({ redirectUri, run, close }))
    })
  })
  return UserAgent.of({ open })
}

/**
 * Options of the two-phase agent.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 */
export interface TwoPhaseOptions {
  /** The web app's own redirect URI (https, or http on localhost during development). */
  readonly redirectUri: string
}

/**
 * The first phase for web apps: instead of running the request, fails with `interaction-required` carrying the
 * authorization URL (in `url`); the app redirects the user there and later calls `complete(callbackUrl)`.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 */
export const twoPhase = (options: TwoPhaseOptions): UserAgent["Service"] =>
  UserAgent.of({
    open: Effect.succeed({
      redirectUri: options.redirectUri,
      run: (authorizationUrl) =>
        Effect.fail(
          new AuthError({
            step: "authorization",
            reason: "interaction-required",
            url: authorizationUrl,
            message: `the user must authorize at the URL in this error's url; redirect them there, then call complete() with the callback URL`,
          }),
        ),
      close: Effect.void,
    }),
  })
