/**
 * Connected accounts: a `fetch` for the user's own account at a third-party provider, or the URL-mode elicitation
 * that sends the user's browser through the provider's OAuth flow on pages this MCP server serves. The flow's
 * `state` is single use and bound to the flow, its user and the browser that opened the connect page; the elicitation
 * URL carries only an opaque, single-use, short-lived reference; provider tokens stay in the vault.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP URL-mode elicitation}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 * @module
 */
import {
  type AuthError,
  Authorization,
  ClientConfig,
  Discovery,
  DiscoveryCache,
  Revocation,
  TokenEndpoint,
  TokenStore,
} from "@keyway/client"
import { Bytes, Scope } from "@keyway/core"
import { Body } from "@keyway/http"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import {
  clientOf,
  configuredServer,
  InvalidConnectionsConfig,
  type ProviderConfig,
  problemsOf,
  withinApi,
} from "./Provider.js"
import { connectBody, escapeHtml, page, refusal } from "./pages.js"
import {
  type ConnectionKey,
  type PendingFlow,
  type ProviderTokens,
  RefreshRejected,
  Vault,
  type VaultError,
} from "./Vault.js"

/** The MCP user: `iss` and `sub` of the verified MCP access token. */
export interface User {
  readonly issuer: string
  readonly subject: string
}

/** The `fetch` of a connection: requests inside the provider's `apiBase`, with the user's provider token. */
export type ProviderFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

/**
 * The URL-mode elicitation to send the user: the parameters of `elicitation/create` in mode `url`.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP URL-mode elicitation}
 */
export const UrlElicitation = Schema.Struct({
  mode: Schema.Literal("url"),
  elicitationId: Schema.String,
  url: Schema.String,
  message: Schema.String,
})

/**
 * The user has no usable connection at the provider (none yet, refused refresh, disconnected): the elicitation sends
 * them to connect it. The MCP layer answers with it (`@keyway/connections/mcp-sdk`).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-elicitation-required-error | MCP URLElicitationRequiredError}
 */
export class ConnectionRequired extends Schema.TaggedError<ConnectionRequired>()("ConnectionRequired", {
  provider: Schema.String,
  elicitation: UrlElicitation,
}) {}

/**
 * A failure other than a missing connection: an unknown provider, the provider, the vault, or (`revocation`) a
 * disconnection whose revocation at the provider failed although the connection was deleted here.
 */
export class ConnectionsError extends Schema.TaggedError<ConnectionsError>()("ConnectionsError", {
  reason: Schema.Literals(["unknown-provider", "provider", "revocation", "vault"]),
  message: Schema.String,
}) {}

/** Called when a connect flow's callback stored the tokens: the elicitation it completes, its user and provider. */
export type CompletionListener = (elicitationId: string, user: User, provider: string) => void

/** Options of {@link Connections.layer} and {@link createConnections}. */
export interface ConnectionsOptions {
  /** Where this MCP server serves the connect pages: `<baseUrl>/connect/<provider>` (an origin, or with a path). */
  readonly baseUrl: string
  /** The MCP server's name, as the connect page shows it. */
  readonly serverName: string
  readonly providers: Readonly<Record<string, ProviderConfig>>
  /** Seconds a connect flow stays usable after the elicitation (default 600). */
  readonly flowTtl?: number
  /** What provider calls go through (default the global `fetch`). */
  readonly fetch?: ProviderFetch
  /**
   * Seconds between two purges of the vault's expired and used connect flows (default 300; the first runs at once),
   * on the service's `Clock`; `false` for none (another instance on the same database purges). A failed purge is
   * logged as a warning and tried again at the next interval.
   */
  readonly purgeEvery?: number | false
}

/**
 * The connections service.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP URL-mode elicitation}
 */
export class Connections extends Context.Service<
  Connections,
  {
    /** A `fetch` for the provider's API with the user's token (refreshed when due), or {@link ConnectionRequired}. */
    readonly fetch: (
      user: User,
      provider: string,
    ) => Effect.Effect<ProviderFetch, ConnectionRequired | ConnectionsError>
    /**
     * A `fetch` as soon as the connect flow of `elicitationId` completes for this user and provider (at once when
     * the connection is already usable), waiting at most `waitMillis` on the service's `Clock`; then
     * {@link ConnectionRequired} with a new elicitation. The retry of a 2026-07-28 input-required round uses it.
     */
    readonly fetchWhenConnected: (
      user: User,
      provider: string,
      elicitationId: string,
      waitMillis: number,
    ) => Effect.Effect<ProviderFetch, ConnectionRequired | ConnectionsError>
    /**
     * Revokes at the provider (RFC 7009, when it has a revocation endpoint) and deletes; true when there was a
     * connection. When the revocation fails the connection is deleted all the same and the failure is
     * `ConnectionsError` with reason `revocation`.
     */
    readonly disconnect: (user: User, provider: string) => Effect.Effect<boolean, ConnectionsError>
    /** The connect pages, the callback and the disconnect action; `undefined` for any other path. */
    readonly handle: (request: Request) => Effect.Effect<Response | undefined>
    /** Registers a listener of completed flows; returns the function that removes it. */
    readonly onComplete: (listener: CompletionListener) => () => void
    /**
     * Waits for the connect flow of `elicitationId` (just elicited) to complete: true when its callback stored the
     * tokens, false once the flow has expired (`flowTtl` on the service's `Clock`). Its listener is removed then, or
     * when the wait is interrupted (the MCP session that would be told closed), so a flow never finished leaks none.
     */
    readonly completion: (elicitationId: string) => Effect.Effect<boolean>
    /** How many completion listeners are registered now (those of `onComplete`, `completion`, `fetchWhenConnected`). */
    readonly listenerCount: () => number
  }
>()("@keyway/connections/Connections") {
  /** The service over the {@link Vault}; fails with {@link InvalidConnectionsConfig} for a configuration it cannot use. */
  static readonly layer = (options: ConnectionsOptions): Layer.Layer<Connections, InvalidConnectionsConfig, Vault> =>
    Layer.effect(
      Connections,
      Effect.gen(function* () {
        const vault = yield* Vault
        const service = yield* Effect.try({
          try: () => make(options, vault),
          catch: (e) =>
            e instanceof InvalidConnectionsConfig ? e : new InvalidConnectionsConfig({ message: String(e) }),
        })
        if (options.purgeEvery !== false) yield* Effect.forkScoped(purgeJob(vault, options.purgeEvery ?? 300))
        return service
      }),
    )
}

/**
 * Purges the vault's expired and used connect flows now and then again every `every` seconds, forever, on the
 * `Clock`. A failed round (the database briefly unreachable) is logged as a warning and the next round runs anyway.
 */
export const purgeJob = (vault: Vault["Service"], every: number): Effect.Effect<never> => {
  const round = nowSeconds.pipe(
    Effect.flatMap(vault.purgeFlows),
    Effect.catch((error) => Effect.logWarning("connect flow purge failed; retrying at the next interval", error)),
  )
  return Effect.repeat(round, Schedule.spaced(Duration.seconds(every))).pipe(
    Effect.andThen(Effect.never),
    Effect.withLogSpan("keyway.connections.purge"),
  )
}

const COOKIE = "keyway_connect"
const MISSING_COOKIE =
  "Your browser did not send the cookie of this connection: finish the connection in the browser that opened the link, with cookies allowed."
const UNKNOWN_LINK =
  "This connection link is unknown, has expired or was already used: call the tool again in your MCP client for a new link."
const OTHER_BROWSER =
  "This answer of the provider belongs to a connection started in another browser or by another user: nothing was stored."
const EXPIRED_OR_USED = "This connection has expired or was already completed: nothing was stored."
const BAD_FORM = "This form was not sent from the connect page of this browser: open the connect link again."

const sha256 = async (text: string): Promise<string> =>
  Bytes.base64UrlEncode(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))))

/** The value of one cookie of a request; only values of the shape this module sets are read. */
const cookieOf = (request: Request): string | undefined => {
  for (const part of (request.headers.get("cookie") ?? "").split(";")) {
    const [name, value] = part.trim().split("=", 2)
    if (name === COOKIE && value !== undefined && /^[A-Za-z0-9_-]{43}$/u.test(value)) return value
  }
  return undefined
}

const toProviderTokens = (tokens: TokenStore.Tokens): ProviderTokens => ({
  accessToken: tokens.access_token,
  tokenType: tokens.token_type,
  ...(tokens.refresh_token === undefined ? {} : { refreshToken: tokens.refresh_token }),
  ...(tokens.expires_at === undefined ? {} : { expiresAt: Math.floor(tokens.expires_at / 1000) }),
  scope: tokens.scope,
})

const nowSeconds = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

/**
 * The service's implementation over a vault; throws {@link InvalidConnectionsConfig}.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP URL-mode elicitation}
 */
export const make = (options: ConnectionsOptions, vault: Vault["Service"]): Connections["Service"] => {
  const problems = Object.entries(options.providers).flatMap(([id, p]) => problemsOf(id, p))
  const base = URL.parse(options.baseUrl)
  if (base === null) problems.unshift(`baseUrl ${JSON.stringify(options.baseUrl)} is not an absolute URL`)
  if (options.flowTtl !== undefined && !(Number.isInteger(options.flowTtl) && options.flowTtl > 0)) {
    problems.push(`flowTtl must be a positive whole number of seconds, got ${options.flowTtl}`)
  }
  const every = options.purgeEvery
  if (every !== undefined && every !== false && !(Number.isInteger(every) && every > 0)) {
    problems.push(`purgeEvery must be a positive whole number of seconds or false, got ${every}`)
  }
  if (problems.length > 0 || base === null) throw new InvalidConnectionsConfig({ message: problems.join("; ") })
  const basePath = base.pathname.replace(/\/+$/u, "")
  const connectPath = `${basePath}/connect/`
  const origin = base.origin
  // A cookie without Secure only where the page itself is plain http on loopback (development).
  const secure = base.protocol === "https:"
  const ttl = options.flowTtl ?? 600
  const fetchFn: ProviderFetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const config = ClientConfig.ClientConfig.make({ fetch: fetchFn })
  const cache = DiscoveryCache.memory()
  // The client's pieces may ask for its token store; the connections keep their tokens in the vault, never there.
  const store = TokenStore.fromBackend(TokenStore.memory())
  const listeners = new Set<CompletionListener>()
  const onComplete = (listener: CompletionListener) => {
    listeners.add(listener)
    return () => {
      listeners.delete(listener)
    }
  }
  const completion = Effect.fn("Connections.completion")(function* (elicitationId: string) {
    const done = yield* Deferred.make<void>()
    const off = onComplete((id) => {
      if (id === elicitationId) Deferred.doneUnsafe(done, Exit.void)
    })
    const completed = yield* Deferred.await(done).pipe(
      Effect.timeoutOption(Duration.seconds(ttl)),
      Effect.ensuring(Effect.sync(off)),
    )
    return Option.isSome(completed)
  })

  const client = <A, E>(
    effect: Effect.Effect<A, E, ClientConfig.ClientConfig | DiscoveryCache.DiscoveryCache | TokenStore.TokenStore>,
  ): Effect.Effect<A, E> =>
    effect.pipe(
      Effect.provideService(ClientConfig.ClientConfig, config),
      Effect.provideService(DiscoveryCache.DiscoveryCache, cache),
      Effect.provideService(TokenStore.TokenStore, store),
    )
  const vaultError = (e: VaultError) => new ConnectionsError({ reason: "vault", message: e.message })
  const providerError = (e: AuthError.AuthError) => new ConnectionsError({ reason: "provider", message: e.message })

  const providerOf = (id: string) => {
    const p = Object.hasOwn(options.providers, id) ? options.providers[id] : undefined
    return p === undefined
      ? Effect.fail(
          new ConnectionsError({
            reason: "unknown-provider",
            message: `no provider ${JSON.stringify(id)} is configured`,
          }),
        )
      : Effect.succeed(p)
  }
  const serverOf = (p: ProviderConfig): Effect.Effect<Discovery.DiscoveredAuthorizationServer, AuthError.AuthError> =>
    p.endpoints !== undefined
      ? Effect.succeed(configuredServer(p, p.endpoints))
      : client(Discovery.discoverAuthorizationServer(p.issuer as string))
  const redirectUri = (id: string) => `${origin}${connectPath}${id}/callback`
  const scopeOf = (p: ProviderConfig) => Scope.format(p.scopes)

  /** The tokens the client package's refresh takes, for a refresh token held in the vault. */
  const heldTokens = (p: ProviderConfig, server: Discovery.DiscoveredAuthorizationServer, refreshToken: string) =>
    ({
      access_token: "",
      token_type: "Bearer",
      refresh_token: refreshToken,
      scope: scopeOf(p),
      resource: p.apiBase,
      issuer: server.issuer,
      client_id: p.clientId,
      token_endpoint: server.metadata.token_endpoint as string,
      obtained_at: 0,
    }) satisfies TokenStore.Tokens

  /** A refresh at the provider; `invalid_grant` is the vault's {@link RefreshRejected} (the connection breaks). */
  const refreshAt = (p: ProviderConfig) => (refreshToken: string) =>
    Effect.gen(function* () {
      const server = yield* serverOf(p)
      const tokens = yield* client(
        TokenEndpoint.refresh(server, clientOf(p, server.issuer), heldTokens(p, server, refreshToken)),
      )
      return toProviderTokens(tokens)
    }).pipe(
      Effect.mapError((e) =>
        e.reason === "invalid-grant" || e.error === "invalid_grant"
          ? new RefreshRejected({ message: e.message })
          : providerError(e),
      ),
    )

  const apiFetch =
    (p: ProviderConfig, tokens: ProviderTokens): ProviderFetch =>
    async (input, init) => {
      // A relative URL is under apiBase, taken as a directory ("user" under ".../api" is ".../api/user").
      const base = p.apiBase.endsWith("/") ? p.apiBase : `${p.apiBase}/`
      const request = typeof input === "string" ? new Request(new URL(input, base), init) : new Request(input, init)
      const url = new URL(request.url)
      if (!withinApi(p.apiBase, url)) {
        throw new TypeError(
          `refusing to send the ${p.name} token to ${url.origin}${url.pathname}: it is not under ${p.apiBase}`,
        )
      }
      const headers = new Headers(request.headers)
      headers.set("authorization", `${tokens.tokenType} ${tokens.accessToken}`)
      // Redirects are the caller's to follow: one could lead the token outside the API.
      return fetchFn(new Request(request, { headers, redirect: "manual" }))
    }

  /** A new flow: its reference (256 bits) goes into the elicitation URL, nothing else does. */
  const required = (key: ConnectionKey, p: ProviderConfig, now: number) =>
    Effect.gen(function* () {
      const reference = Bytes.randomBase64Url(32)
      const elicitationId = Bytes.randomBase64Url(16)
      const flow: PendingFlow = {
        key,
        elicitationId,
        // Set when the user starts the flow from the connect page (a new state and PKCE pair for that browser).
        state: "",
        codeVerifier: "",
        redirectUri: redirectUri(key.provider),
        expiresAt: now + ttl,
      }
      yield* vault.putFlow(reference, flow).pipe(Effect.mapError(vaultError))
      return yield* new ConnectionRequired({
        provider: key.provider,
        elicitation: {
          mode: "url",
          elicitationId,
          url: `${origin}${connectPath}${encodeURIComponent(key.provider)}?ref=${reference}`,
          message: `${options.serverName} needs access to your ${p.name} account. Open the link to connect it.`,
        },
      })
    })

  /** The user's usable connection as a `fetch`, refreshed when due; none when the user must connect (again). */
  const held = (user: User, provider: string) =>
    Effect.gen(function* () {
      const p = yield* providerOf(provider)
      const key: ConnectionKey = { issuer: user.issuer, subject: user.subject, provider }
      const now = yield* nowSeconds
      const tokens = yield* vault.token(key, now, refreshAt(p)).pipe(
        Effect.catchTag("RefreshRejected", () => Effect.succeed(Option.none<ProviderTokens>())),
        Effect.catchTag("VaultError", (e) => Effect.fail(vaultError(e))),
      )
      return { p, key, now, fetch: Option.map(tokens, (t) => apiFetch(p, t)) }
    })

  const fetch = Effect.fn("Connections.fetch")(function* (user: User, provider: string) {
    const found = yield* held(user, provider)
    if (Option.isSome(found.fetch)) return found.fetch.value
    return yield* required(found.key, found.p, found.now)
  })

  const fetchWhenConnected = Effect.fn("Connections.fetchWhenConnected")(function* (
    user: User,
    provider: string,
    elicitationId: string,
    waitMillis: number,
  ) {
    const done = yield* Deferred.make<void>()
    // Listening before the first look: a callback that finishes in between is not missed.
    const off = onComplete((id, who, p) => {
      if (id === elicitationId && who.issuer === user.issuer && who.subject === user.subject && p === provider) {
        Deferred.doneUnsafe(done, Exit.void)
      }
    })
    return yield* Effect.gen(function* () {
      const first = yield* held(user, provider)
      if (Option.isSome(first.fetch)) return first.fetch.value
      yield* Deferred.await(done).pipe(Effect.timeoutOption(Duration.millis(waitMillis)))
      return yield* fetch(user, provider)
    }).pipe(Effect.ensuring(Effect.sync(off)))
  })

  /**
   * Deletes the connection, after revoking its tokens at the provider (RFC 7009) when it has a revocation endpoint.
   * A failed revocation still deletes: the user asked to be disconnected, and a token kept only to retry the
   * revocation would stay usable here. The failure is then reported as `ConnectionsError` `revocation`.
   */
  const disconnect = Effect.fn("Connections.disconnect")(function* (user: User, provider: string) {
    const p = yield* providerOf(provider)
    const key: ConnectionKey = { issuer: user.issuer, subject: user.subject, provider }
    const stored = yield* vault.get(key).pipe(Effect.mapError(vaultError))
    if (Option.isNone(stored)) return yield* vault.delete(key).pipe(Effect.mapError(vaultError))
    const tokens = stored.value.tokens
    const revocation = yield* Effect.gen(function* () {
      const server = yield* serverOf(p)
      if (typeof server.metadata.revocation_endpoint !== "string") return
      const information = clientOf(p, server.issuer)
      // The refresh token first: revoking it ends the grant, and with it the access tokens at most providers.
      if (tokens.refreshToken !== undefined) {
        yield* client(Revocation.revoke(server, information, tokens.refreshToken, "refresh_token"))
      }
      yield* client(Revocation.revoke(server, information, tokens.accessToken, "access_token"))
    }).pipe(Effect.result)
    const deleted = yield* vault.delete(key).pipe(Effect.mapError(vaultError))
    if (revocation._tag === "Failure") {
      return yield* new ConnectionsError({
        reason: "revocation",
        message: `the ${p.name} connection was deleted here, but revoking its tokens at ${p.name} failed: ${revocation.failure.message}`,
      })
    }
    return deleted
  })

  /** GET /connect/<provider>?ref=…: the page that says who connects what, with the button that starts. */
  const connectPage = (request: Request, url: URL, id: string, p: ProviderConfig) =>
    Effect.gen(function* () {
      const reference = url.searchParams.get("ref") ?? ""
      const now = yield* nowSeconds
      const flow = reference === "" ? Option.none<PendingFlow>() : yield* vault.getFlow(reference, now)
      if (Option.isNone(flow) || flow.value.key.provider !== id || flow.value.state !== "") return refusal(UNKNOWN_LINK)
      const server = yield* serverOf(p)
      const existing = cookieOf(request)
      const browser = existing ?? Bytes.randomBase64Url(32)
      const csrf = yield* Effect.promise(() => sha256(`csrf\n${browser}\n${reference}`))
      const cookie =
        existing === undefined
          ? `${COOKIE}=${browser}; Path=${connectPath}; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`
          : undefined
      return page(
        200,
        `Connect your ${p.name} account`,
        connectBody({
          serverName: options.serverName,
          providerName: p.name,
          user: flow.value.key.subject,
          action: `${connectPath}${id}`,
          reference,
          csrf,
        }),
        {
          formTargets: [new URL(server.metadata.authorization_endpoint as string).origin],
          ...(cookie === undefined ? {} : { cookie }),
        },
      )
    })

  /** Reads a small form body (the start and disconnect forms) within 8 KiB. */
  const formOf = (request: Request) =>
    Effect.tryPromise({ try: () => Body.readText(request, 8192), catch: () => undefined }).pipe(
      Effect.map((text) => new URLSearchParams(text)),
      Effect.orElseSucceed(() => new URLSearchParams()),
    )

  /** Checks the form's CSRF token: derived from the browser's HttpOnly cookie and the reference it acts on. */
  const checkedForm = (request: Request, field: string) =>
    Effect.gen(function* () {
      const browser = cookieOf(request)
      if (browser === undefined) return { refusal: refusal(MISSING_COOKIE) } as const
      const form = yield* formOf(request)
      const reference = form.get(field) ?? ""
      const expected = yield* Effect.promise(() => sha256(`csrf\n${browser}\n${reference}`))
      if (reference === "" || !Bytes.timingSafeEqual(form.get("csrf") ?? "", expected)) {
        return {
          refusal: page(403, "This connection cannot continue", `<p data-error>${escapeHtml(BAD_FORM)}</p>`),
        } as const
      }
      return { browser, reference } as const
    })

  /** POST /connect/<provider>: takes the flow and sends the browser to the provider with a fresh state and PKCE. */
  const start = (request: Request, id: string, p: ProviderConfig) =>
    Effect.gen(function* () {
      const form = yield* checkedForm(request, "ref")
      if ("refusal" in form) return form.refusal
      const now = yield* nowSeconds
      const flow = yield* vault.takeFlow(form.reference, now)
      if (Option.isNone(flow) || flow.value.key.provider !== id || flow.value.state !== "") return refusal(UNKNOWN_LINK)
      const server = yield* serverOf(p)
      const authorization = yield* client(
        Authorization.buildRequest({
          resource: {
            serverUrl: p.apiBase,
            resource: p.apiBase,
            metadata: undefined,
            metadataUrl: undefined,
            issuer: server.issuer,
            legacy: false,
          },
          server,
          client: clientOf(p, server.issuer),
          redirectUri: flow.value.redirectUri,
          scope: p.scopes,
        }),
      )
      const started: PendingFlow = {
        ...flow.value,
        state: authorization.pending.state,
        codeVerifier: authorization.pending.code_verifier,
        issuer: server.issuer,
      }
      // Under state and browser for the callback; under state alone to tell another browser's answer apart.
      yield* vault.putFlow(`${started.state}.${form.browser}`, started)
      yield* vault.putFlow(started.state, started)
      const headers = new Headers({
        location: authorization.url,
        "cache-control": "no-store",
        "referrer-policy": "no-referrer",
      })
      return new Response(null, { status: 303, headers })
    })

  /** GET /connect/<provider>/callback: checks the answer, exchanges the code and stores the tokens. */
  const callback = (request: Request, url: URL, id: string, p: ProviderConfig) =>
    Effect.gen(function* () {
      const browser = cookieOf(request)
      if (browser === undefined) return refusal(MISSING_COOKIE)
      const state = url.searchParams.get("state") ?? ""
      if (state === "") return refusal(EXPIRED_OR_USED)
      const now = yield* nowSeconds
      const flow = yield* vault.takeFlow(`${state}.${browser}`, now)
      if (Option.isNone(flow) || flow.value.key.provider !== id) {
        const other = yield* vault.getFlow(state, now)
        return refusal(Option.isSome(other) ? OTHER_BROWSER : EXPIRED_OR_USED)
      }
      yield* vault.takeFlow(state, now)
      const server = yield* serverOf(p)
      const pending: TokenStore.Pending = {
        state: flow.value.state,
        code_verifier: flow.value.codeVerifier,
        issuer: flow.value.issuer ?? server.issuer,
        iss_parameter_supported: server.metadata.authorization_response_iss_parameter_supported === true,
        redirect_uri: flow.value.redirectUri,
        resource: p.apiBase,
        scope: scopeOf(p),
        client_id: p.clientId,
        server: p.apiBase,
        created_at: 0,
      }
      const code = yield* client(Authorization.validateCallback(url.href, pending)).pipe(Effect.result)
      if (code._tag === "Failure") return refusal(`The provider's answer was refused: ${code.failure.message}`)
      const tokens = yield* client(
        TokenEndpoint.exchangeCode(server, clientOf(p, server.issuer), pending, code.success),
      )
      yield* vault.put(flow.value.key, toProviderTokens(tokens), now)
      const { issuer, subject } = flow.value.key
      for (const listener of listeners) listener(flow.value.elicitationId, { issuer, subject }, id)
      const disconnectRef = Bytes.randomBase64Url(32)
      yield* vault.putFlow(`disconnect.${disconnectRef}`, {
        ...flow.value,
        state: "",
        codeVerifier: "",
        expiresAt: now + ttl,
      })
      const csrf = yield* Effect.promise(() => sha256(`csrf\n${browser}\n${disconnectRef}`))
      return page(
        200,
        `Your ${p.name} account is connected`,
        `<p>${escapeHtml(options.serverName)} can now use your ${escapeHtml(p.name)} account. You can close this window and go back to your MCP client.</p>` +
          `<form method="post" action="${escapeHtml(`${connectPath}${id}/disconnect`)}">` +
          `<input type="hidden" name="ref" value="${disconnectRef}"><input type="hidden" name="csrf" value="${csrf}">` +
          `<button type="submit">Disconnect it now</button></form>`,
      )
    })

  /** POST /connect/<provider>/disconnect: the button of the completion page, for a short while. */
  const disconnectAction = (request: Request, id: string, p: ProviderConfig) =>
    Effect.gen(function* () {
      const form = yield* checkedForm(request, "ref")
      if ("refusal" in form) return form.refusal
      const now = yield* nowSeconds
      const flow = yield* vault.takeFlow(`disconnect.${form.reference}`, now)
      if (Option.isNone(flow) || flow.value.key.provider !== id) return refusal(UNKNOWN_LINK)
      const done = yield* disconnect({ issuer: flow.value.key.issuer, subject: flow.value.key.subject }, id).pipe(
        Effect.result,
      )
      if (done._tag === "Failure" && done.failure.reason === "revocation") {
        return page(
          200,
          "Disconnected",
          `<p>The account is disconnected here and forgotten, but ${escapeHtml(p.name)} did not confirm the revocation of its access: revoke it in your ${escapeHtml(p.name)} account settings.</p>`,
        )
      }
      if (done._tag === "Failure") return yield* done.failure
      return page(200, "Disconnected", "<p>The account is disconnected; its access was revoked and forgotten.</p>")
    })

  const handle = Effect.fn("Connections.handle")(function* (request: Request) {
    const url = new URL(request.url)
    if (!url.pathname.startsWith(connectPath)) return undefined
    const [id = "", action, ...more] = url.pathname.slice(connectPath.length).split("/")
    if (more.length > 0 || !Object.hasOwn(options.providers, id)) return undefined
    const p = options.providers[id] as ProviderConfig
    const method = request.method
    const routed: Effect.Effect<Response, VaultError | AuthError.AuthError | ConnectionsError> | undefined =
      action === undefined
        ? method === "GET"
          ? connectPage(request, url, id, p)
          : method === "POST"
            ? start(request, id, p)
            : undefined
        : action === "callback" && method === "GET"
          ? callback(request, url, id, p)
          : action === "disconnect" && method === "POST"
            ? disconnectAction(request, id, p)
            : undefined
    if (routed === undefined) {
      if (action !== undefined && action !== "callback" && action !== "disconnect") return undefined
      const allow = action === undefined ? "GET, POST" : action === "callback" ? "GET" : "POST"
      return new Response(null, { status: 405, headers: { allow } })
    }
    return yield* routed.pipe(
      Effect.catch((e) =>
        Effect.succeed(
          page(
            502,
            "The connection failed",
            `<p data-error>${escapeHtml(e._tag === "AuthError" || e._tag === "ConnectionsError" ? e.message : "The vault failed.")}</p>`,
          ),
        ),
      ),
    )
  })

  return Connections.of({
    fetch,
    disconnect,
    handle,
    fetchWhenConnected,
    onComplete,
    completion,
    listenerCount: () => listeners.size,
  })
}

/** The plain face: Promise methods and a Web handler over {@link Connections}. */
export interface ConnectionsClient {
  /** A `fetch` for the provider's API with the user's token; rejects with {@link ConnectionRequired}. */
  readonly fetch: (user: User, provider: string) => Promise<ProviderFetch>
  /** See {@link Connections} `fetchWhenConnected`; rejects with {@link ConnectionRequired} after `waitMillis`. */
  readonly fetchWhenConnected: (
    user: User,
    provider: string,
    elicitationId: string,
    waitMillis: number,
  ) => Promise<ProviderFetch>
  /** Revokes and deletes; a failed revocation still deletes and rejects with `ConnectionsError` `revocation`. */
  readonly disconnect: (user: User, provider: string) => Promise<boolean>
  /** The connect pages, the callback and the disconnect action; `undefined` for any other path. */
  readonly handle: (request: Request) => Promise<Response | undefined>
  /** Registers a listener of completed flows; returns the function that removes it. */
  readonly onComplete: (listener: CompletionListener) => () => void
  /**
   * See {@link Connections} `completion`: true when the flow completed, false once it expired or `signal` aborted
   * (its listener is removed in every case).
   */
  readonly completion: (elicitationId: string, signal?: AbortSignal) => Promise<boolean>
  /** How many completion listeners are registered now. */
  readonly listenerCount: () => number
}

/** False as soon as `signal` aborts. */
const aborted = (signal: AbortSignal): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    if (signal.aborted) return resume(Effect.succeed(false))
    const onAbort = () => resume(Effect.succeed(false))
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })

/**
 * The plain face of a service, its effects run by `run`: `Effect.runPromise` by default, or the `runPromise` of a
 * `ManagedRuntime` whose services (a `Clock`, tracing) they should see.
 */
export const toClient = (
  service: Connections["Service"],
  run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A> = Effect.runPromise,
): ConnectionsClient => ({
  fetch: (user, provider) => run(service.fetch(user, provider)),
  fetchWhenConnected: (user, provider, elicitationId, waitMillis) =>
    run(service.fetchWhenConnected(user, provider, elicitationId, waitMillis)),
  disconnect: (user, provider) => run(service.disconnect(user, provider)),
  handle: (request) => run(service.handle(request)),
  onComplete: service.onComplete,
  completion: (elicitationId, signal) =>
    run(
      signal === undefined
        ? service.completion(elicitationId)
        : Effect.raceFirst(service.completion(elicitationId), aborted(signal)),
    ),
  listenerCount: service.listenerCount,
})

/** What {@link createConnections} returns: the plain face, and `close` to stop its purge of expired flows. */
export interface RunningConnections extends ConnectionsClient {
  /** Stops the periodic purge (`purgeEvery`); the vault stays open (it is the caller's to close). */
  readonly close: () => Promise<void>
}

/**
 * Connected accounts over a vault (`@keyway/connections/node` has SQLite and PostgreSQL ones), purging expired
 * connect flows every `purgeEvery` seconds until `close`; throws {@link InvalidConnectionsConfig}.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests | MCP URL-mode elicitation}
 */
export const createConnections = (
  options: ConnectionsOptions & { readonly vault: Vault["Service"] },
): RunningConnections => {
  const client = toClient(make(options, options.vault))
  const purge =
    options.purgeEvery === false ? undefined : Effect.runFork(purgeJob(options.vault, options.purgeEvery ?? 300))
  return {
    ...client,
    close: async () => {
      if (purge !== undefined) await Effect.runPromise(Fiber.interrupt(purge))
    },
  }
}
