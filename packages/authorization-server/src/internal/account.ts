/**
 * `<issuer>/account`: the signed-in user's connected apps (the clients they authorized, with the resources, scopes and
 * first and last use) and a Revoke button per app that forgets the consent and revokes the app's grants. Same login
 * session, CSRF tokens and page headers (CSP `frame-ancestors 'none'`) as the consent page.
 */
import { Effect } from "effect"
import { revokeGrants } from "../Administration.js"
import type { ResolvedConfig } from "../Config.js"
import type { RateLimiterService } from "../RateLimiter.js"
import type { StorageError } from "../storage/Errors.js"
import { ClientStore, GrantStore } from "../storage/Storage.js"
import type { UserAuthenticator } from "../UserAuthenticator.js"
import { readForm, redirect, sameOrigin, signIn } from "./authorize.js"
import { nowSeconds } from "./clock.js"
import { emit } from "./events.js"
import { html } from "./html.js"
import { csrfRefused, loginPage, page } from "./pages.js"
import { describeRedirect } from "./redirect.js"
import type { Session, Sessions } from "./session.js"

/** The paths of the account pages under an issuer path (`base`, empty for a root issuer). */
export const accountPaths = (base: string) => ({
  page: `${base}/account`,
  login: `${base}/account/login`,
  revoke: `${base}/account/revoke`,
})

/** One connected app as the page lists it. */
interface App {
  readonly clientId: string
  readonly name: string
  readonly redirectHost: string
  readonly access: ReadonlyArray<{ readonly resource: string; readonly scopes: ReadonlyArray<string> }>
  readonly firstUse: number
  readonly lastUse: number
}

const date = (seconds: number) =>
  new Date(seconds * 1000)
    .toISOString()
    .replace(/\.\d{3}Z$/, "Z")
    .replace("T", " ")

/** The apps a subject has authorized: remembered consents and live grants, by client. */
const appsOf = (subject: string) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const clients = yield* ClientStore
    const now = yield* nowSeconds
    const byClient = new Map<string, { access: Map<string, Set<string>>; first: number; last: number }>()
    const entry = (clientId: string, at: number) => {
      let e = byClient.get(clientId)
      if (e === undefined) {
        e = { access: new Map(), first: at, last: at }
        byClient.set(clientId, e)
      }
      return e
    }
    const add = (clientId: string, resource: string, scopes: ReadonlyArray<string>, first: number, last: number) => {
      const e = entry(clientId, first)
      e.first = Math.min(e.first, first)
      e.last = Math.max(e.last, last)
      const set = e.access.get(resource) ?? new Set<string>()
      for (const s of scopes) set.add(s)
      e.access.set(resource, set)
    }
    for (const c of yield* grants.listConsents(subject))
      add(c.client_id, c.resource, c.scopes, c.granted_at, c.granted_at)
    for (const g of yield* grants.listGrants({ subject })) {
      add(g.client_id, g.resource, g.scope.split(" ").filter(Boolean), g.created_at, g.last_used_at)
    }
    const apps: Array<App> = []
    for (const [clientId, e] of byClient) {
      const client = yield* clients
        .get(clientId, now)
        .pipe(Effect.catchTag("ClientNotFound", () => Effect.succeed(undefined)))
      const redirectUri = client?.redirect_uris[0]
      apps.push({
        clientId,
        name: client?.client_name ?? clientId,
        redirectHost: redirectUri === undefined ? "" : describeRedirect(redirectUri).host,
        access: [...e.access].map(([resource, scopes]) => ({ resource, scopes: [...scopes].sort() })),
        firstUse: e.first,
        lastUse: e.last,
      })
    }
    return apps.sort((a, b) => a.name.localeCompare(b.name) || a.clientId.localeCompare(b.clientId))
  })

const accountPage = (
  config: ResolvedConfig,
  revokeAction: string,
  csrf: string,
  user: string,
  apps: ReadonlyArray<App>,
) =>
  page(
    "Connected apps",
    html`<h1>Connected apps</h1>
<p class="muted">Signed in as ${user}.</p>
${
  apps.length === 0
    ? html`<p data-no-apps>No application has access to your account.</p>`
    : apps.map(
        (app) => html`<section data-app="${app.clientId}">
<h2 data-app-name>${app.name}</h2>
<p>Sends you back to <span class="host" data-app-host>${app.redirectHost}</span></p>
<ul class="scopes">${app.access.map(
          (a) =>
            html`<li data-app-access="${a.resource}"><code>${config.resources.get(a.resource)?.name ?? a.resource}</code>: ${a.scopes.length === 0 ? "basic access" : a.scopes.join(", ")}</li>`,
        )}</ul>
<p class="muted">First used <time data-first-use>${date(app.firstUse)}</time>, last used <time data-last-use>${date(app.lastUse)}</time></p>
<form method="post" action="${revokeAction}">
<input type="hidden" name="csrf_token" value="${csrf}">
<input type="hidden" name="client_id" value="${app.clientId}">
<div class="actions"><button type="submit" aria-label="Revoke ${app.name}">Revoke</button></div>
</form>
</section>`,
      )
}`,
  )

const signInPage = (
  action: string,
  csrf: string,
  extra: { error?: string; username?: string; status?: number; headers?: Record<string, string> } = {},
) => loginPage({ action, csrf, request: "", clientName: "your account", ...extra })

/** GET `/account`: the connected apps of the signed-in user, or the sign-in form. */
export const accountGet = (
  config: ResolvedConfig,
  sessions: Sessions,
  base: string,
  request: Request,
): Effect.Effect<Response, StorageError, ClientStore | GrantStore> =>
  Effect.gen(function* () {
    const paths = accountPaths(base)
    let session = yield* sessions.read(request)
    if (session?.subject === undefined) {
      session ??= yield* sessions.create()
      return signInPage(paths.login, sessions.csrfToken(session), {
        headers: { "Set-Cookie": sessions.cookie(session) },
      })
    }
    const apps = yield* appsOf(session.subject)
    return accountPage(config, paths.revoke, sessions.csrfToken(session), session.displayName ?? session.subject, apps)
  })

/** The posted form when it comes from this server's own page (same origin, valid CSRF token), else undefined. */
const posted = (config: ResolvedConfig, sessions: Sessions, request: Request) =>
  Effect.gen(function* () {
    const form = yield* readForm(config, request)
    const session = yield* sessions.read(request)
    if (form === undefined || !sameOrigin(config, request) || !sessions.checkCsrf(session, form.get("csrf_token"))) {
      return undefined
    }
    return { form, session: session as Session }
  })

/** POST `/account/login`: the login page's checks and limits, then back to `/account` signed in. */
export const accountLoginPost = (
  config: ResolvedConfig,
  sessions: Sessions,
  base: string,
  request: Request,
  limiter: RateLimiterService,
): Effect.Effect<Response, StorageError, UserAuthenticator> =>
  Effect.gen(function* () {
    const paths = accountPaths(base)
    const ok = yield* posted(config, sessions, request)
    if (ok === undefined) {
      yield* emit({ event: "login_failed", reason: "csrf" })
      return csrfRefused()
    }
    const username = ok.form.get("username") ?? ""
    const fresh = yield* signIn(
      config,
      sessions,
      limiter,
      request,
      username,
      ok.form.get("password") ?? "",
      (failure) => signInPage(paths.login, sessions.csrfToken(ok.session), { username, ...failure }),
    )
    if (fresh instanceof Response) return fresh
    return redirect(paths.page, 303, { "Set-Cookie": sessions.cookie(fresh) })
  })

/** POST `/account/revoke`: forgets the user's consent for the app and revokes its grants, then back to the list. */
export const accountRevokePost = (
  config: ResolvedConfig,
  sessions: Sessions,
  base: string,
  request: Request,
): Effect.Effect<Response, StorageError, GrantStore> =>
  Effect.gen(function* () {
    const ok = yield* posted(config, sessions, request)
    const subject = ok?.session.subject
    const clientId = ok?.form.get("client_id")
    if (ok === undefined || subject === undefined || clientId === undefined || clientId === "") return csrfRefused()
    yield* GrantStore.use((g) => g.revokeConsent(subject, clientId))
    const revoked = yield* revokeGrants({ subject, client_id: clientId })
    yield* emit({ event: "consent_revoked", subject, client_id: clientId, revoked_grants: revoked })
    return redirect(accountPaths(base).page, 303)
  })
