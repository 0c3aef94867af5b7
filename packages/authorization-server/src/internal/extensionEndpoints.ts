/**
 * The extensions' endpoints (see `Extension.ExtensionEndpoint`), routed by the server: their context's operations are
 * the built-in endpoints' own checks, limits, pages and storage, so an extension never reaches into this package.
 */
import { OAuthError } from "@keyway/core"
import { type Context, Effect, Result } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { EndpointContext, ExtensionEndpoint, Pages } from "../Extension.js"
import { bucket, type RateLimiterService } from "../RateLimiter.js"
import type { StorageError } from "../storage/Errors.js"
import type { ClientStore, GrantStore, RecordStore } from "../storage/Storage.js"
import type { UserAuthenticator } from "../UserAuthenticator.js"
import { operatorScope, readForm as readPageForm, sameOrigin, signIn } from "./authorize.js"
import { requestedResource, requestedScopes } from "./authorizeRequest.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { emit } from "./events.js"
import { answerFailures, readForm } from "./formEndpoint.js"
import { html } from "./html.js"
import { CORS_HEADERS, preflight } from "./http.js"
import { addressOf, authenticateWithinLimits, limitPublicToken, waitText } from "./limits.js"
import { csrfRefused, errorPage, loginPage, page } from "./pages.js"
import type { Sessions } from "./session.js"

type Services = ClientStore | GrantStore | MetadataDocuments | UserAuthenticator
type Handler = (request: Request) => Effect.Effect<Response, StorageError, Services>

/** The page machinery over the server's sessions, for one request. */
const pagesFor = (
  config: ResolvedConfig,
  sessions: Sessions,
  limiter: RateLimiterService,
  request: Request,
  context: Context.Context<UserAuthenticator>,
): Pages => {
  const login: Pages["login"] = ({ action, carry, clientName }) =>
    Effect.gen(function* () {
      const current = yield* sessions.read(request)
      const session = current ?? (yield* sessions.create())
      return loginPage({
        action,
        csrf: sessions.csrfToken(session),
        request: carry,
        clientName,
        ...(current === undefined ? { headers: { "Set-Cookie": sessions.cookie(session) } } : {}),
      })
    })
  return {
    html,
    render: (title, body, options = {}) =>
      page(title, body, {
        ...(options.status === undefined ? {} : { status: options.status }),
        ...(options.headers === undefined ? {} : { headers: { ...options.headers } }),
      }),
    error: (status, error, description, headers) =>
      errorPage(status, error, description, headers === undefined ? undefined : { ...headers }),
    session: Effect.map(sessions.read(request), (session) =>
      session === undefined
        ? undefined
        : {
            // The CSRF token is derived from the session id and only ever shown to its own browser.
            key: sessions.csrfToken(session),
            ...(session.subject === undefined ? {} : { subject: session.subject }),
            ...(session.displayName === undefined ? {} : { displayName: session.displayName }),
            ...(session.authTime === undefined ? {} : { authTime: session.authTime }),
          },
    ),
    csrf: Effect.gen(function* () {
      const current = yield* sessions.read(request)
      const session = current ?? (yield* sessions.create())
      return {
        token: sessions.csrfToken(session),
        headers: current === undefined ? { "Set-Cookie": sessions.cookie(session) } : {},
      }
    }),
    verify: (form) =>
      Effect.map(
        sessions.read(request),
        (session) =>
          form !== undefined && sameOrigin(config, request) && sessions.checkCsrf(session, form.get("csrf_token")),
      ),
    refused: csrfRefused,
    waitText,
    login,
    signIn: ({ form, action, clientName, returnTo, about }) =>
      Effect.gen(function* () {
        const username = form.get("username") ?? ""
        const carry = form.get("request") ?? ""
        const session = yield* sessions.read(request)
        const fresh = yield* signIn(
          config,
          sessions,
          limiter,
          request,
          username,
          form.get("password") ?? "",
          (failure) =>
            loginPage({
              action,
              // A verified form has a session; the form again carries its token.
              csrf: session === undefined ? "" : sessions.csrfToken(session),
              request: carry,
              clientName,
              username,
              ...failure,
            }),
          about,
        ).pipe(Effect.provideContext(context))
        if (fresh instanceof Response) return fresh
        return new Response(null, {
          status: 303,
          headers: {
            Location: returnTo,
            "Set-Cookie": sessions.cookie(fresh),
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
          },
        })
      }),
  }
}

/**
 * The routes of the extensions' endpoints, by absolute path, each a map from method to handler (`OPTIONS` added for
 * an API endpoint's CORS preflight).
 */
export const extensionRoutes = (
  config: ResolvedConfig,
  base: string,
  sessions: Sessions,
  limiter: RateLimiterService,
  records: RecordStore["Service"],
): Map<string, Record<string, Handler>> => {
  const routes = new Map<string, Record<string, Handler>>()
  for (const extension of config.extensions) {
    for (const endpoint of extension.endpoints ?? []) {
      const route: Record<string, Handler> = {}
      for (const method of endpoint.methods) route[method] = (request) => run(endpoint, method, request)
      if (endpoint.kind === "api") {
        route.OPTIONS = () => Effect.succeed(preflight([...endpoint.methods, "OPTIONS"].join(", ")))
      }
      routes.set(`${base}${endpoint.path}`, route)
    }
  }
  return routes

  function run(endpoint: ExtensionEndpoint, method: string, request: Request) {
    return Effect.gen(function* () {
      const services = yield* Effect.context<Services>()
      const form =
        method !== "POST"
          ? undefined
          : endpoint.kind === "api"
            ? yield* readForm(config, request)
            : yield* readPageForm(config, request)
      const address = addressOf(config, request)
      const context: EndpointContext = {
        config,
        request,
        form,
        now: yield* nowSeconds,
        address,
        authenticateClient: Effect.gen(function* () {
          const authenticated = yield* authenticateWithinLimits(config, limiter, "token", request, form ?? new Map(), [
            config.issuer,
            new URL(`${base}${endpoint.path}`, config.issuerUrl).href,
            config.endpoints.token,
          ])
          // A public client's ID proves nothing: it is counted per client address, as at the token endpoint.
          if (authenticated.method === "none") yield* limitPublicToken(config, limiter, authenticated.address)
          return authenticated.client
        }).pipe(Effect.provideContext(services)),
        resource: (values) => {
          const found = requestedResource(config, values)
          return Result.isFailure(found)
            ? Effect.fail(OAuthError.make(found.failure.error, found.failure.description))
            : Effect.succeed(found.success)
        },
        scopes: (client, resource, scope) => {
          const found = requestedScopes(config, resource, operatorScope(client), scope ?? null)
          return Result.isFailure(found)
            ? Effect.fail(OAuthError.make(found.failure.error, found.failure.description))
            : Effect.succeed(found.success)
        },
        emit,
        records,
        limit: (counts) =>
          Effect.flatMap(nowSeconds, (now) =>
            limiter.hitAll(
              counts.map((c) => ({ bucket: bucket(c.kind, c.key), rule: c.rule, ...(c.peek ? { peek: true } : {}) })),
              now,
            ),
          ),
        pages: pagesFor(config, sessions, limiter, request, services),
      }
      return yield* endpoint.handle(context)
    }).pipe((effect) =>
      endpoint.kind === "api"
        ? answerFailures(config, "token")(effect).pipe(Effect.map(withCors))
        : effect.pipe(
            Effect.catchTags({
              BodyTooLargeFailure: () =>
                Effect.succeed(errorPage(413, "invalid_request", `the body exceeds ${config.maxBodyBytes} bytes`)),
              OAuthError: (e) =>
                Effect.succeed(errorPage(e.error === "invalid_client" ? 401 : 400, e.error, e.error_description ?? "")),
              ClientAuthFailure: (e) => Effect.succeed(errorPage(401, e.code, e.description)),
              RateLimited: (e) =>
                Effect.succeed(
                  errorPage(429, "invalid_request", e.description, { "Retry-After": String(e.retryAfter) }),
                ),
            }),
          ),
    )
  }
}

// An API endpoint's answers are read by browser-based clients too.
const withCors = (response: Response): Response => {
  for (const [name, value] of Object.entries(CORS_HEADERS)) {
    if (!response.headers.has(name)) response.headers.set(name, value)
  }
  return response
}
