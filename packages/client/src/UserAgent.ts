/**
 * How the authorization request reaches the user and the response comes back: a redirect of the page for web apps
 * (the callback page finishes with `complete(url)`), a headless agent that follows redirects itself (automation,
 * tests, servers that approve without interaction), a test user that also signs in and consents on Keyway's
 * authorization server (tests and automation only), or two phases for web apps that navigate themselves (begin
 * returns the URL, complete takes the callback). These run on any runtime with Web-standard APIs; the system browser
 * with a loopback redirect listener (CLIs, desktop apps) needs Node.js and is in `@keyway/client/node`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html | RFC 8252 (OAuth 2.0 for native apps)}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-browser-based-apps | OAuth 2.0 for Browser-Based Applications}
 * @module
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AuthError } from "./AuthError.js"
import { browserUnavailable as whyNoBrowser } from "./internal/browser.js"
import { type Jar, makeJar } from "./internal/cookies.js"
import { alertOf, firstForm, pageErrorOf, titleOf } from "./internal/forms.js"
import { discard, type FetchLike, send } from "./internal/http.js"

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
  /**
   * True when `run` brings the redirect back to this process without the process or page being left (a loopback
   * listener, an agent that follows the redirects itself). The pending authorization, `state` and PKCE verifier,
   * then stays in memory instead of the token store; it is stored only when `run` fails with `interaction-required`,
   * so that `complete()` can still finish it. Absent or false: stored before `run` (a page that navigates away).
   */
  readonly inProcess?: boolean
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
    /**
     * Shows the user a page of another party, with nothing to bring back: a URL-mode elicitation's URL (MCP
     * 2025-11-25 client/elicitation). Absent when the agent cannot show a page by itself.
     */
    readonly visit?: (url: string) => Effect.Effect<void, AuthError>
  }
>()("@keyway/client/UserAgent") {
  /** The test user; see {@link testUser}. Not for production. */
  static readonly layerTestUser = (options: TestUserOptions): Layer.Layer<UserAgent> =>
    Layer.succeed(UserAgent, testUser(options))
  /** A headless agent; see {@link headless}. */
  static readonly layerHeadless = (options: HeadlessOptions = {}): Layer.Layer<UserAgent> =>
    Layer.succeed(UserAgent, headless(options))
  /** The first phase of a web app; see {@link twoPhase}. */
  static readonly layerTwoPhase = (options: TwoPhaseOptions): Layer.Layer<UserAgent> =>
    Layer.succeed(UserAgent, twoPhase(options))
  /** A web app's page redirect; see {@link redirect}. */
  static readonly layerRedirect = (options: RedirectOptions): Layer.Layer<UserAgent> =>
    Layer.succeed(UserAgent, redirect(options))
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
  /**
   * The fetch the agent loads the authorization server's pages with (default the global fetch): a test's
   * recording fetch, or one that reaches a server by another route.
   */
  readonly fetch?: FetchLike
}

/** A page the agent stopped on: a response that is not a redirect. */
interface Page {
  readonly url: URL
  readonly status: number
  readonly html: string
}

/** What the agent sends next: a GET of a redirect's target, or a form post. */
type Hop = { readonly url: URL; readonly body?: URLSearchParams }

/**
 * Loads the authorization URL and follows redirects (carrying the agent's cookies) until one points at the
 * redirect URI; a page that is not a redirect goes to `answer`, which returns the form post to send, undefined when
 * the agent is done on that page (a visit), or fails.
 */
const drive = Effect.fnUntraced(function* (
  authorizationUrl: string,
  settings: {
    /** Undefined for a visit, which ends on a page rather than at a redirect URI. */
    readonly redirectUri: string | undefined
    readonly maxHops: number
    readonly fetch: FetchLike
    readonly jar: Jar
    readonly answer: (page: Page) => Effect.Effect<Hop | undefined, AuthError>
  },
) {
  const target = settings.redirectUri === undefined ? undefined : new URL(settings.redirectUri)
  let next: Hop = { url: new URL(authorizationUrl) }
  for (let hop = 0; hop <= settings.maxHops; hop++) {
    const current = next.url
    const headers = new Headers()
    const cookie = settings.jar.header(current)
    if (cookie !== undefined) headers.set("cookie", cookie)
    if (next.body !== undefined) {
      headers.set("content-type", "application/x-www-form-urlencoded")
      // What a browser sends with a form post; authorization servers refuse cross-origin ones.
      headers.set("origin", current.origin)
    }
    const response = yield* send(settings.fetch, "authorization", current.href, {
      method: next.body === undefined ? "GET" : "POST",
      headers,
      ...(next.body === undefined ? {} : { body: next.body.toString() }),
    })
    settings.jar.store(current, response.headers.getSetCookie(), yield* Clock.currentTimeMillis)
    const location = response.headers.get("location")
    if (response.status >= 300 && response.status <= 399 && location !== null) {
      discard(response)
      const to = URL.parse(location, current)
      if (to === null) break
      if (target !== undefined && isRedirectTarget(to, target)) return to.href
      next = { url: to }
      continue
    }
    const html = yield* Effect.promise(() => response.text().catch(() => ""))
    const shown = pageErrorOf(html)
    // The authorization server does not know the client (it may have lost or removed a registration): not a page
    // for a person, but the client's to learn, so that it can register again.
    if (shown?.error === "invalid_client") {
      return yield* new AuthError({
        step: "authorization",
        reason: "authorization-error",
        url: `${current.origin}${current.pathname}`,
        status: response.status,
        error: "invalid_client",
        message: `${current.origin}${current.pathname} answered HTTP ${response.status} invalid_client${shown.description === "" ? "" : `: ${shown.description}`}; the authorization server does not know the client`,
      })
    }
    const hop = yield* settings.answer({ url: current, status: response.status, html })
    if (hop === undefined) return current.href
    next = hop
  }
  return yield* new AuthError({
    step: "authorization",
    reason: "redirect-loop",
    url: authorizationUrl.split("?")[0] ?? authorizationUrl,
    message:
      settings.redirectUri === undefined
        ? `${authorizationUrl.split("?")[0] ?? authorizationUrl} still redirected after ${settings.maxHops} redirects; the page is redirecting in a loop`
        : `the authorization request did not come back to ${settings.redirectUri} within ${settings.maxHops} redirects; the authorization server is redirecting in a loop`,
  })
})

const needsPerson = (page: Page, what: string) =>
  new AuthError({
    step: "authorization",
    reason: "interaction-required",
    url: page.url.href,
    status: page.status,
    message: `${page.url.origin}${page.url.pathname} answered HTTP ${page.status} instead of redirecting; ${what}`,
  })

/** The end of a visit: a page that loaded (2xx) is where the user was sent; any other status is a failure. */
const visited = (page: Page): Effect.Effect<undefined, AuthError> =>
  page.status >= 200 && page.status <= 299
    ? Effect.succeed(undefined)
    : Effect.fail(
        new AuthError({
          step: "authorization",
          reason: "user-agent-failed",
          url: `${page.url.origin}${page.url.pathname}`,
          status: page.status,
          message: `${page.url.origin}${page.url.pathname} answered HTTP ${page.status}; the page could not be shown`,
        }),
      )

/**
 * A user agent without a user: GETs the authorization URL, follows `Location` headers by hand until one points at
 * the redirect URI, and returns that URL. It keeps cookies per host for its whole lifetime, like a browser: a later
 * authorization (a step-up) finds the session of an earlier one. A page that needs interaction, or more redirects
 * than allowed, fails with a typed error; {@link testUser} is the agent that also signs in and consents. The error
 * page Keyway's authorization server shows for a client it does not know (`data-error="invalid_client"`) fails with
 * `authorization-error` and the OAuth error `invalid_client`, so that the client can register anew.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const headless = (options: HeadlessOptions = {}): UserAgent["Service"] => {
  const redirectUri = options.redirectUri ?? "http://127.0.0.1/callback"
  const jar = makeJar()
  const settings = {
    redirectUri,
    maxHops: options.maxRedirects ?? 10,
    fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    jar,
    answer: (page: Page) =>
      Effect.fail(needsPerson(page, "the authorization server needs a person, use the browser user agent")),
  } satisfies Parameters<typeof drive>[1]
  return UserAgent.of({
    open: Effect.succeed({
      redirectUri,
      run: (url: string) => drive(url, settings),
      close: Effect.void,
      inProcess: true,
    }),
    visit: (url: string) => Effect.asVoid(drive(url, { ...settings, redirectUri: undefined, answer: visited })),
  })
}

/**
 * Options of {@link testUser}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 */
export interface TestUserOptions extends HeadlessOptions {
  /** The user to sign in as. */
  readonly username: string
  readonly password: string
  /** What the user answers on the consent page (default "approve"). */
  readonly decision?: "approve" | "deny"
}

/**
 * **For tests and automation only, never in production.** A headless user that signs in and answers the consent
 * page of Keyway's authorization server (`@keyway/authorization-server` and the runnable server), so tests, CI and
 * scripted agents can run the whole authorization code flow without a browser. It is {@link headless} (cookies kept
 * across authorizations, so a step-up does not sign in again) plus two answers: on a page whose form has a password
 * field it fills in the username (the form's `username` field, else its first text or email field) and password and
 * submits; on a page whose form has submit buttons it presses `decision=approve` (or `deny`), else the first button.
 * A sign-in that comes back with the login form again fails with the page's alert text; the error page for an unknown
 * client fails as {@link headless} does; any other page fails with `interaction-required`. It reads server-rendered
 * forms with regular expressions, runs no script, and sends the password to whatever page asks for it: give it test
 * credentials only. Give the client a store that lasts between runs, so that it registers once and reuses the
 * registration: authorization servers limit dynamic registrations per address.
 *
 * @example
 * ```ts
 * import { createAuthClient, UserAgent } from "@keyway/client/node"
 *
 * const auth = createAuthClient({
 *   userAgent: UserAgent.testUser({ username: "alice", password: "test password" }),
 *   store: { file: `${homedir()}/.my-tests/auth.json` },
 * })
 * ```
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 */
export const testUser = (options: TestUserOptions): UserAgent["Service"] => {
  const redirectUri = options.redirectUri ?? "http://127.0.0.1/callback"
  const jar = makeJar()
  const decision = options.decision ?? "approve"
  // A visit ends on the first page without a form to answer; an authorization never does.
  const answering = (visit: boolean) => {
    let signIns = 0
    return (page: Page): Effect.Effect<Hop | undefined, AuthError> => {
      const form = firstForm(page.html)
      if (visit && (form === undefined || form.method !== "post")) return visited(page)
      if (form === undefined || form.method !== "post") {
        const title = titleOf(page.html)
        return Effect.fail(
          needsPerson(page, `the test user found no form to answer${title === undefined ? "" : ` on "${title}"`}`),
        )
      }
      const action = URL.parse(form.action === "" ? page.url.href : form.action, page.url)
      if (action === null) return Effect.fail(needsPerson(page, `the form's action "${form.action}" is not a URL`))
      const body = new URLSearchParams()
      for (const input of form.inputs) body.append(input.name, input.value)
      if (form.inputs.some((input) => input.type === "password")) {
        signIns += 1
        if (signIns > 1) {
          return Effect.fail(
            new AuthError({
              step: "authorization",
              reason: "user-agent-failed",
              url: `${page.url.origin}${page.url.pathname}`,
              message: `the test user could not sign in as "${options.username}": ${alertOf(page.html) ?? "the login form came back"}`,
            }),
          )
        }
        const login =
          form.inputs.find((input) => input.name === "username") ??
          form.inputs.find((input) => input.type === "text" || input.type === "email")
        if (login !== undefined) body.set(login.name, options.username)
        for (const input of form.inputs) if (input.type === "password") body.set(input.name, options.password)
        return Effect.succeed({ url: action, body })
      }
      const button =
        form.buttons.find((candidate) => candidate.name === "decision" && candidate.value === decision) ??
        form.buttons[0]
      if (button?.name !== undefined) body.set(button.name, button.value)
      return Effect.succeed({ url: action, body })
    }
  }
  const settings = {
    maxHops: options.maxRedirects ?? 20,
    fetch: options.fetch ?? (((input, init) => globalThis.fetch(input, init)) satisfies FetchLike),
    jar,
  }
  const run = (authorizationUrl: string) =>
    drive(authorizationUrl, { ...settings, redirectUri, answer: answering(false) })
  return UserAgent.of({
    open: Effect.succeed({ redirectUri, run, close: Effect.void, inProcess: true }),
    visit: (url: string) => Effect.asVoid(drive(url, { ...settings, redirectUri: undefined, answer: answering(true) })),
  })
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

/**
 * Options of the redirect agent.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 */
export interface RedirectOptions {
  /** The web app's callback page (https, or http on loopback during development), registered with the server. */
  readonly redirectUri: string
  /** Takes the page to the authorization URL; `location.assign(url)` by default. */
  readonly navigate?: (url: string) => void
  /**
   * Shows another party's page (a URL-mode elicitation) without leaving this one, whose calls are waiting for it;
   * `window.open(url, "_blank", "noopener,noreferrer")` by default.
   */
  readonly openWindow?: (url: string) => void
}

/**
 * The user agent of a web app in the browser: the page itself goes to the authorization server. Running a request
 * navigates there (`location.assign`) and fails with `interaction-required` (the page is leaving; the `url` of the
 * error is the authorization URL), which keeps the pending authorization, its `state` and PKCE verifier, in the
 * token store: with `TokenStore.webStorage()` that is the tab's `sessionStorage`, which survives the round trip
 * and nothing longer. The callback page finishes with `complete(location.href)`.
 *
 * @example
 * ```ts
 * const auth = createAuthClient({
 *   applicationType: "web",
 *   userAgent: UserAgent.redirect({ redirectUri: `${location.origin}/callback` }),
 *   store: TokenStore.webStorage(),
 * })
 * // On the callback page:
 * await auth.complete(location.href)
 * ```
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-browser-based-apps#section-6.3 | OAuth 2.0 for Browser-Based Applications §6.3}
 */
export const redirect = (options: RedirectOptions): UserAgent["Service"] => {
  const navigate = options.navigate ?? ((url: string) => globalThis.location.assign(url))
  const openWindow = options.openWindow ?? ((url: string) => void globalThis.open(url, "_blank", "noopener,noreferrer"))
  return UserAgent.of({
    visit: (url) => Effect.sync(() => openWindow(url)),
    open: Effect.succeed({
      redirectUri: options.redirectUri,
      run: (authorizationUrl) =>
        Effect.suspend(() => {
          navigate(authorizationUrl)
          return Effect.fail(
            new AuthError({
              step: "authorization",
              reason: "interaction-required",
              url: authorizationUrl,
              message: `the page is going to the authorization server; the callback page ${options.redirectUri} finishes the authorization with complete(location.href)`,
            }),
          )
        }),
      close: Effect.void,
    }),
  })
}

/**
 * Why no system browser can open in an environment (its variables and `process.platform`), or undefined when one
 * can: `$BROWSER` names one; Windows has one; macOS has one outside SSH sessions; elsewhere a graphical session is
 * needed (`DISPLAY` or `WAYLAND_DISPLAY`) and, when `hasProgram` can tell, `xdg-open`. A client picks a flow that
 * needs no browser here (the device authorization grant) instead of one that cannot finish. `systemBrowserUnavailable`
 * of `@keyway/client/node` asks about the running process.
 */
export const browserUnavailable = (
  env: Readonly<Record<string, string | undefined>>,
  platform: string,
  hasProgram?: (name: string) => boolean,
): string | undefined => whyNoBrowser(env, platform, hasProgram)
