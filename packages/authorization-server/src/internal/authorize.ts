import { PayloadTooLarge } from "@keyway/http"
import { Effect, Result } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { RateLimiterService } from "../RateLimiter.js"
import type { StorageError } from "../storage/Errors.js"
import { type Client, type ClientStore, GrantStore } from "../storage/Storage.js"
import { UserAuthenticator } from "../UserAuthenticator.js"
import {
  type ClientView,
  type PageError,
  type RedirectError,
  redirectWith,
  type ValidAuthorizationRequest,
  validate,
} from "./authorizeRequest.js"
import { type FoundClient, findClient, type MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { randomToken } from "./crypto.js"
import { emit } from "./events.js"
import { mediaType, parseForm, readBody } from "./http.js"
import { type LoginLimit, loginGate, waitText } from "./limits.js"
import { consentPage, csrfRefused, errorPage, loginPage } from "./pages.js"
import { describeRedirect, isLocalhostOnly } from "./redirect.js"
import type { Session, Sessions } from "./session.js"

/**
 * The scope a client may request, any when undefined. Only an operator's registration limits scope: a scope a client
 * chose for itself (dynamic registration, metadata document) protects nothing, since it can register again, and would
 * block MCP step-up (a client registered with the first challenge's scope must later ask for more); the user's consent
 * decides.
 */
export const operatorScope = (client: Client): string | undefined =>
  client.origin === "static" || client.origin === "admin" ? client.scope : undefined

const toView = ({ client, trust }: FoundClient): ClientView => ({
  clientId: client.client_id,
  clientName: client.client_name,
  redirectUris: client.redirect_uris,
  grantTypes: client.grant_types,
  publicClient: client.token_endpoint_auth_method === "none",
  scope: operatorScope(client),
  ...(trust === undefined ? {} : { metadataDocument: { host: trust.host, verified: trust.verified } }),
})

/**
 * Whether the client behind this request cannot be verified: a public client whose answer goes to a loopback or
 * private-use redirect could be any program on the user's machine, choosing its own port and PKCE pair, so a consent
 * given before is not reused for it (RFC 8252 §8.6), unless the operator vouches for it (`rememberConsentFor`).
 */
export const unverifiable = (config: ResolvedConfig, request: ValidAuthorizationRequest): boolean =>
  request.client.publicClient &&
  isLocalhostOnly(request.redirectUri) &&
  !config.rememberConsentFor.has(request.client.clientId)

/** A 303 (after POST) or 302 (after GET) to `location`, never cached. */
export const redirect = (location: string, status: 302 | 303, headers: Record<string, string> = {}): Response =>
  new Response(null, {
    status,
    headers: {
      ...headers,
      Location: location,
      "Cache-Control": "no-store",
      Pragma: "no-cache",
      "Referrer-Policy": "no-referrer",
    },
  })

/** Looks the client up and validates the whole request. */
export const check = (config: ResolvedConfig, query: string) =>
  Effect.gen(function* () {
    const params = new URLSearchParams(query)
    const clientId = params.get("client_id")
    const found =
      clientId === null || clientId === "" || params.getAll("client_id").length > 1
        ? undefined
        : yield* findClient(clientId).pipe(Effect.catchTag("ClientMetadataError", (e) => Effect.succeed(e)))
    if (found !== undefined && "_tag" in found) {
      // A document that cannot be used: the page shows why, and nothing goes to its (unvalidated) redirect URIs. Its
      // host over the fetch limit is temporarily_unavailable (RFC 6749 §4.1.2.1), answered 429 with Retry-After.
      if (found.retryAfter !== undefined) {
        return Result.fail<PageError>({
          _tag: "PageError",
          error: "temporarily_unavailable",
          description: found.message,
          retryAfter: found.retryAfter,
        })
      }
      return Result.fail<PageError>({ _tag: "PageError", error: found.error, description: found.message })
    }
    return validate(params, config, found === undefined ? undefined : toView(found))
  })

/** Turns a failed check into its answer: an error page, or a redirect with `error`, `state` and `iss` (RFC 9207). */
const errorFor = (config: ResolvedConfig, failure: PageError | RedirectError, status: 302 | 303): Response =>
  failure._tag === "PageError"
    ? failure.retryAfter === undefined
      ? errorPage(400, failure.error, failure.description)
      : errorPage(429, failure.error, failure.description, { "Retry-After": String(failure.retryAfter) })
    : redirect(
        redirectWith(failure.redirectUri, {
          error: failure.error,
          error_description: failure.description,
          state: failure.state,
          iss: config.issuer,
        }),
        status,
      )

/**
 * Reports an authorization request refused, with the `client_id` and `redirect_uri` its query carried (each only when
 * sent once: a repeated one is itself the refusal).
 */
export const rejected = (query: string, error: string, description: string, answered: "page" | "redirect") => {
  const params = new URLSearchParams(query)
  const sent = (name: string) => {
    const values = params.getAll(name)
    return values.length === 1 && values[0] !== undefined ? { [name]: values[0] } : {}
  }
  return emit({
    event: "authorization_rejected",
    error,
    description,
    ...sent("client_id"),
    ...sent("redirect_uri"),
    answered,
  })
}

/** Reports a failed check of the authorization request in `query` (see {@link rejected}) and answers it. */
export const reject = (
  config: ResolvedConfig,
  query: string,
  failure: PageError | RedirectError,
  status: 302 | 303,
): Effect.Effect<Response> =>
  Effect.as(
    rejected(query, failure.error, failure.description, failure._tag === "PageError" ? "page" : "redirect"),
    errorFor(config, failure, status),
  )

/** What a valid authorization request asks for, as security events name it. */
export const asked = (request: ValidAuthorizationRequest) => ({
  client_id: request.client.clientId,
  resource: request.resource.uri,
  scope: request.scopes.join(" "),
})

/**
 * Issues the code for `subject` and redirects to the client with `code`, `state` and `iss`; `consent` says whether
 * the user consented just now or before, for the security event.
 */
export const issueCode = (
  config: ResolvedConfig,
  request: ValidAuthorizationRequest,
  subject: string,
  authTime: number,
  consent: "given" | "remembered",
  status: 302 | 303,
  headers: Record<string, string> = {},
) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const code = randomToken(32)
    const issuedAt = yield* nowSeconds
    yield* grants.createCode({
      code,
      client_id: request.client.clientId,
      redirect_uri: request.redirectUri,
      redirect_uri_sent: request.redirectUriGiven,
      code_challenge: request.codeChallenge,
      code_challenge_method: "S256",
      resource: request.resource.uri,
      scope: request.scopes.join(" "),
      subject,
      auth_time: authTime,
      issued_at: issuedAt,
      expires_at: issuedAt + config.codeTtl,
      ...(request.nonce === undefined ? {} : { nonce: request.nonce }),
      ...(request.confirmation === undefined ? {} : { confirmation: request.confirmation }),
    })
    yield* emit({ event: "code_issued", subject, ...asked(request), consent })
    return redirect(
      redirectWith(request.redirectUri, { code, state: request.state, iss: config.issuer }),
      status,
      headers,
    )
  })

const approve = (
  config: ResolvedConfig,
  request: ValidAuthorizationRequest,
  session: Session,
  consent: "given" | "remembered",
  status: 302 | 303,
) =>
  Effect.flatMap(session.authTime === undefined ? nowSeconds : Effect.succeed(session.authTime), (authTime) =>
    issueCode(config, request, session.subject ?? "", authTime, consent, status),
  )

const renderConsent = (
  config: ResolvedConfig,
  sessions: Sessions,
  request: ValidAuthorizationRequest,
  session: Session,
  query: string,
) => {
  const { host } = describeRedirect(request.redirectUri)
  return consentPage({
    action: config.endpoints.consent,
    csrf: sessions.csrfToken(session),
    request: query,
    clientName: request.client.clientName ?? request.client.clientId,
    clientId: request.client.clientId,
    redirectHost: host,
    localhostOnly: isLocalhostOnly(request.redirectUri),
    unverifiable: unverifiable(config, request),
    ...(request.client.metadataDocument === undefined ? {} : { metadataDocument: request.client.metadataDocument }),
    resourceName: request.resource.name,
    resourceUri: request.resource.uri,
    scopes: request.scopes.map((name) => ({ name, description: request.resource.scopes.get(name) ?? name })),
    userName: session.displayName ?? session.subject ?? "",
  })
}

/**
 * GET authorization endpoint (OAuth 2.1 §4.1.1): validate, then login, remembered consent, or the consent page.
 */
export const authorizeGet = (
  config: ResolvedConfig,
  sessions: Sessions,
  request: Request,
): Effect.Effect<Response, StorageError, ClientStore | GrantStore | MetadataDocuments> =>
  Effect.gen(function* () {
    const url = new URL(request.url)
    const query = url.search.slice(1)
    const checked = yield* check(config, query)
    if (Result.isFailure(checked)) return yield* reject(config, query, checked.failure, 302)
    const valid = checked.success
    let session = yield* sessions.read(request)
    if (session?.subject === undefined) {
      session ??= yield* sessions.create()
      return loginPage({
        action: config.endpoints.login,
        csrf: sessions.csrfToken(session),
        request: query,
        clientName: valid.client.clientName ?? valid.client.clientId,
        headers: { "Set-Cookie": sessions.cookie(session) },
      })
    }
    const grants = yield* GrantStore
    // An unverifiable client is asked every time; the login session stays.
    const remembered = yield* grants.consentCovers(
      session.subject,
      valid.client.clientId,
      valid.resource.uri,
      valid.scopes,
    )
    if (remembered && !unverifiable(config, valid)) return yield* approve(config, valid, session, "remembered", 302)
    return renderConsent(config, sessions, valid, session, query)
  })

export const readForm = (config: ResolvedConfig, request: Request) =>
  Effect.promise(async () => {
    if (mediaType(request) !== "application/x-www-form-urlencoded") return undefined
    try {
      const form = parseForm(await readBody(request, config.maxBodyBytes))
      return form instanceof Map ? form : undefined
    } catch (e) {
      if (e instanceof PayloadTooLarge) return undefined
      return undefined
    }
  })

export const sameOrigin = (config: ResolvedConfig, request: Request): boolean => {
  const origin = request.headers.get("origin")
  return origin === null || origin === config.issuerUrl.origin
}

/**
 * The common start of every form POST of the authorization pages (`page`): a form body, the same origin, a valid
 * CSRF token (and a signed-in user when `signedIn`), then the authorization request it carries validated again.
 * Answers with the refusal or error page, or hands back what the page handler needs.
 */
export const postedForm = (
  config: ResolvedConfig,
  sessions: Sessions,
  request: Request,
  page: "login" | "consent",
  signedIn = false,
) =>
  Effect.gen(function* () {
    const form = yield* readForm(config, request)
    const session = yield* sessions.read(request)
    if (
      form === undefined ||
      (signedIn && session?.subject === undefined) ||
      !sameOrigin(config, request) ||
      !sessions.checkCsrf(session, form.get("csrf_token"))
    ) {
      yield* emit(
        page === "login" ? { event: "login_failed", reason: "csrf" } : { event: "consent_refused", reason: "csrf" },
      )
      return csrfRefused()
    }
    const query = form.get("request") ?? ""
    const checked = yield* check(config, query)
    if (Result.isFailure(checked)) return yield* reject(config, query, checked.failure, 303)
    return { form, session, query, valid: checked.success }
  })

/** How a failed sign-in is shown: the form again with the error, 401, or 429 with `Retry-After` when locked. */
export interface SignInFailure {
  readonly error: string
  readonly status: 401 | 429
  readonly headers?: Record<string, string>
}

/**
 * A sign-in attempt: the limits (see {@link loginGate}), then the user-authentication service. The new session (a new
 * id, so an id planted before the login is worthless afterwards), or the answer `refuse` gives for the failure. A
 * locked account or address is refused without checking the password, whether or not the account exists.
 */
export const signIn = (
  config: ResolvedConfig,
  sessions: Sessions,
  limiter: RateLimiterService,
  request: Request,
  username: string,
  password: string,
  refuse: (failure: SignInFailure) => Response,
  about: { readonly client_id?: string; readonly resource?: string; readonly scope?: string } = {},
): Effect.Effect<Session | Response, StorageError, UserAuthenticator> =>
  Effect.gen(function* () {
    const clientId = about.client_id === undefined ? {} : { client_id: about.client_id }
    const locked = (retryAfter: number, limit: LoginLimit) =>
      Effect.as(
        emit({ event: "login_failed", reason: "rate_limited", username, ...clientId, retry_after: retryAfter }),
        refuse({
          error: `Too many failed sign-in attempts ${limit === "rateLimits.login.account" ? "for this account" : "from this address"} (${limit}). Try again in ${waitText(retryAfter)}.`,
          status: 429,
          headers: { "Retry-After": String(retryAfter) },
        }),
      )
    const gate = yield* loginGate(config, limiter, request, username)
    if (!gate.allowed) return yield* locked(gate.retryAfter, gate.limit)
    const user = yield* UserAuthenticator.use((a) => a.authenticate({ username, password }))
    if (user === undefined) {
      if (gate.lockIfFailed > 0) return yield* locked(gate.lockIfFailed, gate.lockedBy)
      yield* emit({ event: "login_failed", reason: "wrong_credentials", username, ...clientId })
      return refuse({ error: "Wrong username or password.", status: 401 })
    }
    yield* gate.succeeded
    yield* emit({ event: "login_succeeded", username, subject: user.subject, ...about })
    return yield* sessions.create(user)
  })

/**
 * POST of the login form: CSRF check, the sign-in limits (see {@link loginGate}), then the user-authentication service.
 * A locked account or address is answered 429 with `Retry-After` and the form saying when to try again, without
 * checking the password, whether or not the account exists.
 */
export const loginPost = (
  config: ResolvedConfig,
  sessions: Sessions,
  request: Request,
  limiter: RateLimiterService,
): Effect.Effect<Response, StorageError, ClientStore | UserAuthenticator | MetadataDocuments> =>
  Effect.gen(function* () {
    const posted = yield* postedForm(config, sessions, request, "login")
    if (posted instanceof Response) return posted
    const { form, session, query, valid } = posted
    const username = form.get("username") ?? ""
    const fresh = yield* signIn(
      config,
      sessions,
      limiter,
      request,
      username,
      form.get("password") ?? "",
      (failure) =>
        loginPage({
          action: config.endpoints.login,
          csrf: sessions.csrfToken(session!),
          request: query,
          clientName: valid.client.clientName ?? valid.client.clientId,
          username,
          ...failure,
        }),
      asked(valid),
    )
    if (fresh instanceof Response) return fresh
    return redirect(`${config.endpoints.authorization}?${query}`, 303, { "Set-Cookie": sessions.cookie(fresh) })
  })

/** POST of the consent form: CSRF check, signed-in user, then Approve (remember + code) or Deny (access_denied). */
export const consentPost = (
  config: ResolvedConfig,
  sessions: Sessions,
  request: Request,
): Effect.Effect<Response, StorageError, ClientStore | GrantStore | MetadataDocuments> =>
  Effect.gen(function* () {
    const posted = yield* postedForm(config, sessions, request, "consent", true)
    if (posted instanceof Response) return posted
    const { form, session, valid } = posted
    if (session?.subject === undefined) return csrfRefused()
    const decision = form.get("decision")
    if (decision !== "approve") {
      yield* emit({ event: "consent_denied", subject: session.subject, ...asked(valid) })
      return redirect(
        redirectWith(valid.redirectUri, {
          error: "access_denied",
          error_description: "the user denied the request",
          state: valid.state,
          iss: config.issuer,
        }),
        303,
      )
    }
    const grants = yield* GrantStore
    yield* grants.grantConsent({
      subject: session.subject,
      client_id: valid.client.clientId,
      resource: valid.resource.uri,
      scopes: [...valid.scopes].sort(),
      granted_at: yield* nowSeconds,
    })
    yield* emit({ event: "consent_given", subject: session.subject, ...asked(valid) })
    return yield* approve(config, valid, session, "given", 303)
  })
