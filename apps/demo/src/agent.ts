/**
 * User agents of the demo. The scripted user is a small browser that follows redirects, keeps cookies, signs in as
 * the demo user on the login page and answers the consent page, narrating what it sees; the narrated agent wraps
 * any other user agent (the system browser) to show the authorization request and the response it brings back.
 *
 * @module
 */
import { KeywayAuthError, type UserAgent } from "@keyway/client"
import { Effect } from "effect"
import { dataTexts, firstForm, textOf, titleOf } from "./html.js"
import type { ConsentView, Narrator, STEPS } from "./narrator.js"
import { type Exchange, type FetchLike, statusText } from "./recorder.js"

/** Options of {@link scriptedUser}. */
export interface ScriptedUserOptions {
  readonly narrator: Narrator
  readonly username: string
  readonly password: string
  /** The redirect URI to request; it is intercepted, never listened on. Default `http://127.0.0.1/callback`. */
  readonly redirectUri?: string
  /** What the user answers on the consent page (default Approve). */
  readonly decision?: "Approve" | "Deny"
  readonly fetch?: FetchLike
}

/** The consent page's content, read from its `data-*` markers. */
export const readConsent = (page: string): ConsentView => {
  const first = (name: string) => dataTexts(page, name)[0]
  const signedIn = /<p class="muted">Signed in as ([^<]*?)\.?<\/p>/u.exec(page)?.[1]
  return {
    heading: textOf(/<h1>([\s\S]*?)<\/h1>/u.exec(page)?.[1] ?? ""),
    clientName: first("client-name") ?? "",
    redirectHost: first("redirect-host") ?? "",
    localhostWarning: first("localhost-warning"),
    resource: first("resource") ?? "",
    scopes: dataTexts(page, "scope"),
    signedInAs: signedIn === undefined ? undefined : textOf(signedIn),
  }
}

const fail = (reason: "interaction-required" | "user-agent-failed" | "redirect-loop", url: string, message: string) =>
  new KeywayAuthError({ step: "authorization", reason, url, message })

const isTarget = (candidate: URL, redirectUri: URL): boolean =>
  candidate.protocol === redirectUri.protocol &&
  candidate.hostname === redirectUri.hostname &&
  candidate.pathname === redirectUri.pathname

/**
 * The demo user in a minimal browser: loads the authorization URL, signs in with the demo credentials when the login
 * page appears, answers the consent page, and returns the URL the authorization server redirects back to. Cookies
 * persist across authorizations, so a later one (the step-up) finds the user already signed in.
 */
export const scriptedUser = (options: ScriptedUserOptions): UserAgent.UserAgent["Service"] => {
  const redirectUri = options.redirectUri ?? "http://127.0.0.1/callback"
  const fetchFn: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const { narrator } = options
  const jar = new Map<string, Map<string, string>>()

  const send = async (url: URL, init: { method: string; body?: URLSearchParams }) => {
    const cookies = jar.get(url.host)
    const headers = new Headers()
    if (cookies !== undefined && cookies.size > 0) {
      headers.set("cookie", [...cookies].map(([k, v]) => `${k}=${v}`).join("; "))
    }
    if (init.body !== undefined) {
      headers.set("content-type", "application/x-www-form-urlencoded")
      // What a browser sends with a form POST; the authorization server refuses cross-origin ones.
      headers.set("origin", url.origin)
    }
    const body = init.body?.toString()
    const response = await fetchFn(url, {
      method: init.method,
      headers,
      redirect: "manual",
      ...(body === undefined ? {} : { body }),
    })
    const text = await response.text()
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";")
      const eq = pair?.indexOf("=") ?? -1
      if (pair === undefined || eq <= 0) continue
      const store = jar.get(url.host) ?? new Map<string, string>()
      store.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim())
      jar.set(url.host, store)
    }
    const exchange: Exchange = {
      method: init.method,
      url,
      requestHeaders: headers,
      requestBody: body,
      status: response.status,
      statusText: statusText(response.status, response.statusText),
      responseHeaders: response.headers,
      responseBody: text === "" ? undefined : text,
    }
    return { exchange, text }
  }

  const drive = async (authorizationUrl: string): Promise<string> => {
    const target = new URL(redirectUri)
    narrator.authorizationRequest(authorizationUrl)
    let step: keyof typeof STEPS = "authorizationRequest"
    let next: { url: URL; method: string; body?: URLSearchParams } = { url: new URL(authorizationUrl), method: "GET" }
    for (let hop = 0; hop < 20; hop++) {
      const { exchange, text } = await send(next.url, next)
      narrator.browserExchange(exchange, step)
      const location = exchange.responseHeaders.get("location")
      if (exchange.status >= 300 && exchange.status < 400 && location !== null) {
        const to = new URL(location, next.url)
        if (isTarget(to, target)) {
          narrator.authorizationResponse(to.href)
          return to.href
        }
        next = { url: to, method: "GET" }
        continue
      }
      const title = titleOf(text) ?? ""
      const form = firstForm(text)
      if (title === "Sign in" && form !== undefined) {
        const error = /<div class="error"[^>]*>([\s\S]*?)<\/div>/u.exec(text)?.[1]
        if (error !== undefined) {
          throw fail("user-agent-failed", next.url.href, `the demo user could not sign in: ${textOf(error)}`)
        }
        step = "login"
        narrator.enter(step)
        narrator.loginPage(title, textOf(/<p>([\s\S]*?)<\/p>/u.exec(text)?.[1] ?? ""))
        const body = new URLSearchParams([...form.inputs])
        body.set("username", options.username)
        body.set("password", options.password)
        next = { url: new URL(form.action, next.url), method: "POST", body }
        continue
      }
      if (title === "Authorize access" && form !== undefined) {
        const decision = options.decision ?? "Approve"
        step = "consent"
        narrator.enter(step)
        narrator.consentPage(readConsent(text), decision, options.username)
        const button = form.buttons.find((b) => b.label === decision)
        const body = new URLSearchParams([...form.inputs])
        if (button?.name !== undefined) body.set(button.name, button.value ?? "")
        next = { url: new URL(form.action, next.url), method: "POST", body }
        continue
      }
      const shown = textOf(
        /<main[^>]*>([\s\S]*?)<\/main>/u.exec(text)?.[1] ?? /<body[^>]*>([\s\S]*?)<\/body>/u.exec(text)?.[1] ?? text,
      )
      throw fail(
        "interaction-required",
        `${next.url.origin}${next.url.pathname}`,
        `the authorization server showed a page the demo user cannot handle (HTTP ${exchange.status}, "${title}"): ${shown.slice(0, 300)}`,
      )
    }
    throw fail("redirect-loop", authorizationUrl.split("?")[0] ?? authorizationUrl, "more than 20 redirects")
  }

  const run = (authorizationUrl: string) =>
    Effect.tryPromise({
      try: () => drive(authorizationUrl),
      catch: (cause) =>
        cause instanceof KeywayAuthError
          ? cause
          : fail(
              "user-agent-failed",
              authorizationUrl.split("?")[0] ?? authorizationUrl,
              `the demo user's browser failed: ${cause instanceof Error ? cause.message : String(cause)}`,
            ),
    })
  return { open: Effect.succeed({ redirectUri, run, close: Effect.void }) }
}

/** Wraps a user agent so the transcript shows the authorization request it loads and the response it returns. */
export const narrated = (
  inner: UserAgent.UserAgent["Service"],
  narrator: Narrator,
): UserAgent.UserAgent["Service"] => ({
  open: Effect.map(inner.open, (session) => ({
    ...session,
    run: (authorizationUrl: string) =>
      Effect.sync(() => narrator.authorizationRequest(authorizationUrl)).pipe(
        Effect.andThen(session.run(authorizationUrl)),
        Effect.tap((callbackUrl) => Effect.sync(() => narrator.authorizationResponse(callbackUrl))),
      ),
  })),
})
