/**
 * The user agent of CLIs and desktop apps on Node.js: the system browser plus a loopback redirect listener
 * (`node:http`, `node:child_process`), with every agent of the main entry besides.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html | RFC 8252 (OAuth 2.0 for native apps)}
 * @module
 */
import { accessSync, constants } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { delimiter, join } from "node:path"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AuthError } from "../AuthError.js"
import { browserUnavailable, DEFAULT_SUCCESS_PAGE, openerCommand } from "../internal/browser.js"
import { type Session, UserAgent } from "../UserAgent.js"

export * from "../UserAgent.js"

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
export const openSystemBrowser = async (url: string): Promise<void> => {
  // Loaded when a browser is opened: node:child_process is not needed to load the client or to run it otherwise.
  const { spawn } = await import("node:child_process")
  return new Promise<void>((resolve, reject) => {
    const [program, args] = openerCommand(url)
    const child = spawn(program, [...args], { stdio: "ignore", detached: true })
    child.on("error", (error) => reject(new Error(`could not start ${program}: ${error.message}`)))
    child.on("spawn", () => {
      child.unref()
      resolve()
    })
  })
}

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
      resume(Effect.succeed({ redirectUri, run, close, inProcess: true }))
    })
  })
  const visit = (url: string) =>
    Effect.tryPromise({
      try: () => Promise.resolve(opener(url)),
      catch: (cause) =>
        new AuthError({
          step: "authorization",
          reason: "user-agent-failed",
          url: url.split("?")[0] ?? url,
          message: `could not open the browser: ${cause instanceof Error ? cause.message : String(cause)}`,
        }),
    })
  return UserAgent.of({ open, visit })
}

/**
 * A system browser with a loopback listener as a layer; see {@link browser}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3}
 */
export const layerBrowser = (options: BrowserOptions = {}): Layer.Layer<UserAgent> =>
  Layer.succeed(UserAgent, browser(options))

/** Whether an executable of that name is on `$PATH`. */
const onPath = (name: string): boolean =>
  (process.env.PATH ?? "").split(delimiter).some((dir) => {
    if (dir === "") return false
    try {
      accessSync(join(dir, name), constants.X_OK)
      return true
    } catch {
      return false
    }
  })

/**
 * Why {@link openSystemBrowser} cannot show a page to the user of this process, or undefined when it can: the rules
 * of `UserAgent.browserUnavailable` on this process's environment and platform, with `xdg-open` looked up on `$PATH`.
 */
export const systemBrowserUnavailable = (): string | undefined =>
  browserUnavailable(process.env, process.platform, onPath)
