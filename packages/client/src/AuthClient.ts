/**
 * The whole client flow as one service: a `fetch` that adds the Bearer token, answers 401 by discovering,
 * registering, authorizing and exchanging the code, refreshes tokens before they expire and when rejected (one
 * refresh at a time per server), and steps up on 403 `insufficient_scope` within a per-operation limit.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-flow-steps | MCP authorization flow}
 * @module
 */
import { AuthorizationResponse, CanonicalUri, Challenge, McpOperation, Pkce, Scope, type Wire } from "@keyway/core"
import * as Cache from "effect/Cache"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import { AuthError } from "./AuthError.js"
import { buildRequest, selectScope, validateCallback } from "./Authorization.js"
import {
  ClientConfig,
  type ClientInformation,
  type ClientOptions,
  type FetchLike,
  InvalidClientOptions,
} from "./ClientConfig.js"
import {
  type DiscoveredAuthorizationServer,
  discoverAuthorizationServer,
  discoverProtectedResource,
} from "./Discovery.js"
import { DiscoveryCache, memory as memoryCache } from "./DiscoveryCache.js"
import { Extensions, type OutgoingRequest, type TokenStrategy } from "./Extension.js"
import { stateMissing } from "./internal/callback.js"
import { discard, readJson, requireSecure, send } from "./internal/http.js"
import { authorizationBaseUrl } from "./internal/legacy.js"
import { noUserAgent } from "./internal/noUserAgent.js"
import { problemOf } from "./internal/options.js"
import { ForServer, singleFlight } from "./internal/singleFlight.js"
import { PENDING_LIFETIME_MS, pendingKey, tokensKey } from "./internal/storage.js"
import { type Event, failure, initial, maxSends, type Policy, type Step, transition } from "./internal/transitions.js"
import { findClient, forgetClient, obtainClient } from "./Registration.js"
import { revoke, type TokenTypeHint } from "./Revocation.js"
import { authenticate, exchangeCode, refresh, request as tokenRequest, toTokens } from "./TokenEndpoint.js"
import { type Backend, fromBackend, memory, type Pending, TokenStore, type Tokens } from "./TokenStore.js"
import { UserAgent } from "./UserAgent.js"

/**
 * Options of one authorization.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-selection-strategy | MCP scope selection}
 */
export interface AuthorizeOptions {
  /** The parameters of the Bearer challenge that triggered it. */
  readonly challenge?: Challenge.BearerParams | undefined
  /** Scopes to request, overriding the selection rules. */
  readonly scope?: string | undefined
  /** Re-fetch discovery documents even when cached ones are fresh. */
  readonly force?: boolean | undefined
}

/**
 * The first phase of a two-phase authorization: where to send the user.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 */
export interface Begun {
  readonly url: string
  readonly state: string
}

/**
 * The client service.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export class AuthClient extends Context.Service<
  AuthClient,
  {
    /** A fetch that authorizes as needed; typed errors for everything it cannot fix. */
    readonly fetch: (input: string | URL | Request, init?: RequestInit) => Effect.Effect<Response, AuthError>
    /** Runs the authorization flow for a server and stores the tokens. */
    readonly authorize: (serverUrl: string, options?: AuthorizeOptions) => Effect.Effect<Tokens, AuthError>
    /** The tokens held for a server. */
    readonly tokens: (serverUrl: string) => Effect.Effect<Tokens | undefined, AuthError>
    /** Forgets the tokens held for a server. */
    readonly logout: (serverUrl: string) => Effect.Effect<void, AuthError>
    /**
     * Revokes the tokens held for a server at their authorization server (RFC 7009), the refresh token first, then
     * the access token, without forgetting them (see `logout`); the kinds revoked, none when no tokens are held.
     */
    readonly revoke: (serverUrl: string) => Effect.Effect<ReadonlyArray<TokenTypeHint>, AuthError>
    /** Starts an authorization without running the user agent; the pending state is persisted. */
    readonly begin: (serverUrl: string, options?: AuthorizeOptions) => Effect.Effect<Begun, AuthError>
    /** Completes an authorization started with `begin` from the URL the user was redirected to. */
    readonly complete: (callbackUrl: string) => Effect.Effect<Tokens, AuthError>
    /** The access token to send now (refreshed when close to expiry), without authorizing. */
    readonly accessToken: (serverUrl: string) => Effect.Effect<string | undefined, AuthError>
    /**
     * Reacts to a 401 the caller received itself (for transports that manage headers): refreshes the held token
     * when possible, else runs a fresh authorization with the response's challenge.
     */
    readonly unauthorized: (serverUrl: string, response: Response) => Effect.Effect<void, AuthError>
  }
>()("@keyway/client/AuthClient") {
  /** The client built on {@link ClientConfig}, {@link TokenStore}, {@link DiscoveryCache} and {@link UserAgent}. */
  static readonly layer: Layer.Layer<AuthClient, never, ClientConfig | TokenStore | DiscoveryCache | UserAgent> =
    Layer.effect(
      AuthClient,
      Effect.suspend(() => make),
    )
}

const serverKey = (raw: string): Effect.Effect<string, AuthError> => {
  const result = CanonicalUri.validate(raw)
  return Result.isSuccess(result)
    ? Effect.succeed(result.success)
    : Effect.fail(
        new AuthError({
          step: "request",
          reason: "invalid-input",
          url: raw,
          message: `"${raw}" is not a usable MCP server URL: ${result.failure.message}`,
        }),
      )
}

/**
 * The operation of an MCP request for step-up accounting: core's {@link McpOperation.nameOf} (the JSON-RPC method,
 * and the tool name for `tools/call`; a batch by all its operations, whose scopes the server requires together);
 * `*` for a request without a body.
 */
const operationOf = (body: string | undefined): string =>
  body === undefined || body === "" ? "*" : McpOperation.nameOf(McpOperation.scan(body))

/** A request to send, as plain values. */
interface Incoming {
  readonly url: string
  readonly method: string
  readonly headers: Headers
  readonly signal: AbortSignal | null
  readonly body: string | ArrayBuffer | undefined
  readonly bodyText: string | undefined
}

/** Methods a `Request` keeps as they are (RFC 9110 §9 names, already normalised; `Request` uppercases the others). */
const PLAIN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
/** The members of `RequestInit` the client forwards (it sends nothing else); others take the `Request` path. */
const PLAIN_INIT = new Set(["method", "headers", "body", "signal", "redirect"])
const REDIRECTS = new Set(["follow", "error", "manual"])

/**
 * The request exactly as a `Request` would see it, read from the values given when they are plain: a URL (string
 * or `URL`) without credentials, a normalised method, a string body or none (what MCP transports send). Building a
 * `Request` and reading its body back is the first use of undici's request and stream machinery in a process:
 * milliseconds before the first request of a cold start, which `fetch` pays again for its own `Request`. Anything
 * else (a `Request`, another body type or member, an invalid value) goes through {@link throughRequest}, which
 * validates as `fetch` would.
 */
const asGiven = (input: string | URL | Request, init: RequestInit | undefined): Incoming | undefined => {
  if (input instanceof Request) return undefined
  if (init !== undefined) {
    for (const name in init) if (!PLAIN_INIT.has(name)) return undefined
    if (init.redirect !== undefined && !REDIRECTS.has(init.redirect)) return undefined
    if (init.signal !== undefined && init.signal !== null && !(init.signal instanceof AbortSignal)) return undefined
  }
  const method = init?.method ?? "GET"
  const text = init?.body
  if (!PLAIN_METHODS.has(method) || (text !== undefined && text !== null && typeof text !== "string")) return undefined
  if (typeof text === "string" && (method === "GET" || method === "HEAD")) return undefined
  const url = URL.parse(input)
  if (url === null || url.username !== "" || url.password !== "") return undefined
  let headers: Headers
  try {
    headers = new Headers(init?.headers)
  } catch {
    return undefined
  }
  // What `Request` adds for a string body, so that the headers sent are the same.
  if (typeof text === "string" && !headers.has("content-type")) headers.set("content-type", "text/plain;charset=UTF-8")
  const body = typeof text === "string" ? text : undefined
  return { url: url.href, method, headers, signal: init?.signal ?? null, body, bodyText: body }
}

/** The request through a `Request`: every input `fetch` takes, validated as `fetch` would, its body read once. */
const throughRequest = Effect.fnUntraced(function* (input: string | URL | Request, init: RequestInit | undefined) {
  const request = new Request(input, init)
  const body =
    request.method === "GET" || request.method === "HEAD"
      ? undefined
      : yield* Effect.promise(() => request.arrayBuffer())
  return {
    url: request.url,
    method: request.method,
    headers: request.headers,
    signal: request.signal,
    body,
    bodyText: body === undefined ? undefined : new TextDecoder().decode(body),
  } satisfies Incoming as Incoming
})

const make = Effect.gen(function* () {
  const configured = yield* ClientConfig
  const store = yield* TokenStore
  const cache = yield* DiscoveryCache
  const userAgent = yield* UserAgent
  // The extensions of the options and of the Effect face's layer, seen alike by every step (token requests too).
  const extensions = [...configured.extensions, ...Option.getOrElse(yield* Effect.serviceOption(Extensions), () => [])]
  const config = ClientConfig.of({ ...configured, extensions })
  const strategies = extensions.filter((e) => e.strategy !== undefined)
  // Challenges of the schemes extensions present tokens with (DPoP) are answered as Bearer's are.
  const schemes = ["Bearer", ...extensions.flatMap((e) => e.schemes ?? [])]
  const strategy: TokenStrategy | undefined = strategies[0]?.strategy
  const provide = <A, E>(
    effect: Effect.Effect<A, E, ClientConfig | TokenStore | DiscoveryCache>,
  ): Effect.Effect<A, E, never> =>
    effect.pipe(
      Effect.provideService(ClientConfig, config),
      Effect.provideService(TokenStore, store),
      Effect.provideService(DiscoveryCache, cache),
    )
  // Authorizations per server and operation, counted towards the step-up limit until the operation succeeds.
  const stepUps = new Map<string, number>()

  const readTokens = (key: string) => store.get(tokensKey(key)).pipe(Effect.map((value) => value as Tokens | undefined))

  /** Discovery, registration and the authorization request; with `storePending`, the pending one goes to the store. */
  const prepare = Effect.fnUntraced(function* (
    serverUrl: string,
    options: AuthorizeOptions,
    redirectUri: string,
    storePending: boolean,
  ) {
    const key = yield* serverKey(serverUrl)
    // The PKCE pair depends on nothing discovery finds: it is made while discovery waits on the network (a process's
    // first Web Crypto digest takes milliseconds).
    const pkce = yield* Effect.forkChild(Effect.promise(() => Pkce.generate()))
    const resource = yield* provide(
      discoverProtectedResource(serverUrl, options.challenge, { force: options.force ?? false }),
    )
    const server = yield* provide(
      discoverAuthorizationServer(resource.issuer, { legacy: resource.legacy, force: options.force ?? false }),
    )
    const client = yield* provide(obtainClient(server, redirectUri))
    const scope = selectScope({
      explicit: options.scope ?? config.scope,
      challenge: options.challenge?.scope,
      resourceMetadata: resource.metadata,
      serverMetadata: server.metadata,
      offlineAccess: config.offlineAccess,
    })
    let parameters: Record<string, string> = {}
    for (const extension of extensions) {
      if (extension.authorizationParameters === undefined) continue
      parameters = {
        ...(yield* provide(extension.authorizationParameters(server, resource.metadata))),
        ...parameters,
      }
    }
    const request = yield* buildRequest({
      resource: { ...resource, serverUrl: key },
      server,
      client,
      redirectUri,
      scope,
      parameters,
      pkce: yield* Fiber.join(pkce),
    })
    if (storePending) yield* store.set(pendingKey(request.pending.state), request.pending)
    return { key, server, client, request }
  })

  /**
   * Finds again the authorization server an authorization or its tokens are bound to, the way it was found first:
   * from the issuer, or in the 2025-03-26 fallback from the MCP server's origin, where the metadata must still name
   * the recorded issuer.
   */
  const rediscover = Effect.fnUntraced(function* (issuer: string, server: string, legacy: boolean) {
    if (!legacy) return yield* provide(discoverAuthorizationServer(issuer, { legacy }))
    const origin = authorizationBaseUrl(server)
    const found = yield* provide(discoverAuthorizationServer(origin, { legacy }))
    if (found.issuer !== issuer) {
      const url = found.metadataUrl ?? origin
      return yield* new AuthError({
        step: "authorization-server-metadata",
        reason: "issuer-mismatch",
        url,
        message: `the authorization server metadata at ${url} now has issuer "${found.issuer}" but this authorization is bound to "${issuer}" (2025-03-26 fallback); authorize again`,
      })
    }
    return found
  })

  const finish = Effect.fnUntraced(function* (
    callbackUrl: string,
    pending: Pending,
    stored: boolean,
    known?: { readonly server: DiscoveredAuthorizationServer; readonly client: ClientInformation },
  ) {
    const code = yield* validateCallback(callbackUrl, pending)
    // Consumed before the code is exchanged, so that a replayed callback finds nothing to complete.
    if (stored) yield* store.delete(pendingKey(pending.state))
    const server = known?.server ?? (yield* rediscover(pending.issuer, pending.server, pending.legacy === true))
    const client = known?.client ?? (yield* provide(findClient(pending.issuer, pending.client_id)))
    if (client === undefined) {
      return yield* new AuthError({
        step: "token",
        reason: "no-client",
        url: server.metadata.token_endpoint as string,
        message: `the client ${pending.client_id} used to start this authorization is no longer registered with ${pending.issuer}; start again`,
      })
    }
    const tokens = yield* provide(exchangeCode(server, client, pending, code))
    yield* store.set(tokensKey(pending.server), tokens)
    return tokens
  })

  /**
   * Obtains tokens with an extension's strategy instead of the authorization code flow: the same discovery, scope
   * selection, `resource` and issuer binding, and no user agent; a registration only for a strategy that asks for
   * the client's own (its `grantTypes`).
   */
  const acquire = Effect.fn("AuthClient.acquire")(function* (
    chosen: TokenStrategy,
    serverUrl: string,
    options: AuthorizeOptions,
  ) {
    const key = yield* serverKey(serverUrl)
    if (strategies.length > 1) {
      return yield* new AuthError({
        step: "token",
        reason: "invalid-input",
        url: serverUrl,
        message: `the extensions ${strategies.map((e) => e.id).join(" and ")} each obtain tokens their own way; configure only one of them`,
      })
    }
    const force = options.force ?? false
    const resource = yield* provide(discoverProtectedResource(serverUrl, options.challenge, { force }))
    const server = yield* provide(discoverAuthorizationServer(resource.issuer, { legacy: resource.legacy, force }))
    const scopes = selectScope({
      explicit: options.scope ?? config.scope,
      challenge: options.challenge?.scope,
      resourceMetadata: resource.metadata,
      serverMetadata: server.metadata,
      // Only a strategy whose grants include refresh_token gets a refresh token: else offline_access asks for nothing.
      offlineAccess: config.offlineAccess && (chosen.grantTypes?.includes("refresh_token") ?? false),
    })
    const scope = scopes.length === 0 ? undefined : Scope.format(scopes)
    let used: ClientInformation | undefined
    const client = Effect.suspend(() =>
      chosen.grantTypes === undefined
        ? Effect.fail(
            new AuthError({
              step: "registration",
              reason: "no-client",
              url: server.metadataUrl ?? server.issuer,
              message: `the token strategy of ${strategies[0]?.id ?? "an extension"} declares no grantTypes, so the client obtains no client for it`,
            }),
          )
        : provide(obtainClient(server, undefined, chosen.grantTypes)),
    ).pipe(
      Effect.tap((obtained) =>
        Effect.sync(() => {
          used = obtained
        }),
      ),
    )
    const formRequest = (
      url: string,
      body: URLSearchParams,
      requestOptions: { readonly client: ClientInformation; readonly step: AuthError["step"] },
    ) =>
      provide(
        Effect.gen(function* () {
          yield* requireSecure(requestOptions.step, url, "the authorization server endpoint")
          const headers = new Headers({
            "content-type": "application/x-www-form-urlencoded",
            accept: "application/json",
          })
          yield* authenticate(requestOptions.step, requestOptions.client, server, body, headers)
          const response = yield* send(config.fetch, requestOptions.step, url, {
            method: "POST",
            headers,
            body: body.toString(),
          })
          return { status: response.status, body: yield* readJson(requestOptions.step, url, response) }
        }),
      )
    const run = chosen.acquire({
      serverUrl: key,
      resource: resource.resource,
      resourceMetadata: resource.metadata,
      server,
      scope,
      challenge: options.challenge,
      fetch: config.fetch,
      client,
      formRequest,
      tokenRequest: (body, requestOptions) =>
        provide(
          tokenRequest(server, body, {
            ...(resource.metadata === undefined ? {} : { resourceMetadata: resource.metadata }),
            ...requestOptions,
          }),
        ),
    })
    const acquired = yield* run.pipe(
      // The authorization server refused a registration kept from earlier (it lost or removed it): register anew and
      // try once more, as the authorization code flow does. A configured client is the caller's to fix.
      Effect.catchIf(
        (error) => error.error === "invalid_client" && used !== undefined,
        (error) =>
          Effect.flatMap(provide(forgetClient(used as ClientInformation)), (forgotten) =>
            forgotten ? run : Effect.fail(error),
          ),
      ),
    )
    const tokens = toTokens(yield* Clock.currentTimeMillis, acquired.response, {
      requestedScope: acquired.requestedScope ?? scope ?? "",
      resource: resource.resource,
      issuer: server.issuer,
      clientId: acquired.clientId,
      tokenEndpoint: server.metadata.token_endpoint as string,
      legacy: resource.legacy,
    })
    yield* store.set(tokensKey(key), tokens)
    return tokens
  })

  const interactive = Effect.fn("AuthClient.authorize")(function* (serverUrl: string, options: AuthorizeOptions = {}) {
    const session = yield* userAgent.open
    // A session that brings the redirect back to this process keeps the pending authorization in memory: two fewer
    // store writes (each a flushed file write with the file store), and a callback replayed through complete() finds
    // nothing. It is stored only if the user must take over (interaction-required), for complete() to finish.
    const stored = session.inProcess !== true
    let used: ClientInformation | undefined
    const attempt = Effect.gen(function* () {
      const { request, server, client } = yield* prepare(serverUrl, options, session.redirectUri, stored)
      used = client
      const key = pendingKey(request.pending.state)
      const callbackUrl = yield* session.run(request.url).pipe(
        Effect.tapError((error) => {
          // The user takes over: complete() finishes from the store, so the pending authorization must be there.
          if (error.reason === "interaction-required") return stored ? Effect.void : store.set(key, request.pending)
          return stored ? store.delete(key) : Effect.void
        }),
      )
      return yield* finish(callbackUrl, request.pending, stored, { server, client }).pipe(
        Effect.tapError(() => (stored ? store.delete(key) : Effect.void)),
      )
    })
    return yield* attempt.pipe(
      // The authorization server refused a registration kept from earlier (it lost or removed it): register anew
      // and try once more. A configured client is the caller's to fix, and is never replaced.
      Effect.catchIf(
        (error) => error.error === "invalid_client" && used !== undefined,
        (error) =>
          Effect.flatMap(provide(forgetClient(used as ClientInformation)), (forgotten) =>
            forgotten ? attempt : Effect.fail(error),
          ),
      ),
      Effect.ensuring(session.close),
    )
  })

  const authorize = (serverUrl: string, options: AuthorizeOptions = {}): Effect.Effect<Tokens, AuthError> =>
    strategy === undefined ? interactive(serverUrl, options) : acquire(strategy, serverUrl, options)

  const begin = Effect.fn("AuthClient.begin")(function* (serverUrl: string, options: AuthorizeOptions = {}) {
    const session = yield* userAgent.open
    const { request } = yield* prepare(serverUrl, options, session.redirectUri, true).pipe(
      Effect.ensuring(session.close),
    )
    return { url: request.url, state: request.pending.state } as Begun
  })

  const complete = Effect.fn("AuthClient.complete")(function* (callbackUrl: string) {
    const url = URL.parse(callbackUrl)
    const where = url === null ? callbackUrl : `${url.origin}${url.pathname}`
    if (url === null) return yield* stateMissing(where)
    const read = AuthorizationResponse.state(url)
    if (Result.isFailure(read)) {
      return yield* new AuthError({
        step: "callback",
        reason: read.failure.reason === "repeated-parameter" ? "invalid-input" : "state-missing",
        url: where,
        message: read.failure.message,
      })
    }
    const state = read.success
    const pending = (yield* store.get(pendingKey(state))) as Pending | undefined
    if (pending !== undefined && (yield* Clock.currentTimeMillis) - pending.created_at > PENDING_LIFETIME_MS) {
      yield* store.delete(pendingKey(state))
      return yield* new AuthError({
        step: "callback",
        reason: "expired",
        url: where,
        message: `the authorization response at ${where} arrived more than ${PENDING_LIFETIME_MS / 60_000} minutes after the request; start the authorization again`,
      })
    }
    if (pending === undefined) {
      return yield* new AuthError({
        step: "callback",
        reason: "state-mismatch",
        url: where,
        message: `the authorization response at ${where} carries a state that matches no pending authorization; it was discarded (it may be forged, replayed, or from another request)`,
      })
    }
    return yield* finish(callbackUrl, pending, true).pipe(
      // A registration the authorization server refuses is forgotten, so that the next begin() registers anew.
      Effect.tapError((error) =>
        error.error === "invalid_client"
          ? Effect.flatMap(provide(findClient(pending.issuer, pending.client_id)), (client) =>
              client === undefined ? Effect.void : Effect.asVoid(provide(forgetClient(client))),
            )
          : Effect.void,
      ),
    )
  })

  /** Concurrent requests that all need an authorization share one (one browser tab, not one per request). */
  const authorizing = yield* singleFlight((_key: string, request: { serverUrl: string; options: AuthorizeOptions }) =>
    authorize(request.serverUrl, request.options),
  )
  const authorizeShared = (key: string, serverUrl: string, options: AuthorizeOptions) =>
    Cache.get(authorizing, new ForServer(key, { serverUrl, options }))

  /**
   * The authorization server to refresh at: the token endpoint kept with the tokens (validated metadata when they
   * were obtained), so a refresh after a restart costs one request; tokens stored without it rediscover.
   */
  const serverForRefresh = (stale: Tokens): Effect.Effect<DiscoveredAuthorizationServer, AuthError> => {
    if (stale.token_endpoint !== undefined) {
      const metadata = {
        issuer: stale.issuer,
        token_endpoint: stale.token_endpoint,
      } as Wire.AuthorizationServerMetadata
      return Effect.succeed({ issuer: stale.issuer, metadata, metadataUrl: undefined })
    }
    // Tokens stored before the legacy flag existed were legacy exactly when their issuer was the origin.
    const legacy =
      config.legacyFallback && (stale.legacy === true || stale.issuer === authorizationBaseUrl(stale.resource))
    return rediscover(stale.issuer, stale.resource, legacy)
  }

  /**
   * Revokes the tokens held for a server at the revocation endpoint of the authorization server that issued them
   * (found again as it was found first), authenticated as the client they were issued to.
   */
  const revokeHeld = Effect.fn("AuthClient.revoke")(function* (serverUrl: string) {
    const key = yield* serverKey(serverUrl)
    const tokens = yield* readTokens(key)
    if (tokens === undefined) return [] as ReadonlyArray<TokenTypeHint>
    const legacy =
      config.legacyFallback && (tokens.legacy === true || tokens.issuer === authorizationBaseUrl(tokens.resource))
    const server = yield* rediscover(tokens.issuer, tokens.resource, legacy)
    const client =
      tokens.client_id === undefined ? undefined : yield* provide(findClient(tokens.issuer, tokens.client_id))
    if (client === undefined) {
      return yield* new AuthError({
        step: "revocation",
        reason: "no-client",
        url: server.metadataUrl ?? server.issuer,
        message:
          tokens.client_id === undefined
            ? `the tokens held for ${key} were obtained without a client, and revocation at ${tokens.issuer} needs one to authenticate (RFC 7009 §2.1)`
            : `the client ${tokens.client_id} the tokens held for ${key} were issued to is no longer known here, and revocation at ${tokens.issuer} needs it to authenticate (RFC 7009 §2.1)`,
      })
    }
    const revoked: Array<TokenTypeHint> = []
    return yield* Effect.gen(function* () {
      // The refresh token first: revoking it ends the grant, and with it (RFC 7009 §2.1) the access tokens at
      // servers that support it; the access token is then revoked by itself for the servers that do not.
      if (tokens.refresh_token !== undefined) {
        yield* provide(revoke(server, client, tokens.refresh_token, "refresh_token"))
        revoked.push("refresh_token")
      }
      yield* provide(revoke(server, client, tokens.access_token, "access_token"))
      revoked.push("access_token")
      return revoked as ReadonlyArray<TokenTypeHint>
    }).pipe(
      // A registration the server no longer knows is forgotten, so that the next authorization registers anew.
      Effect.tapError((error) =>
        error.error === "invalid_client" ? Effect.asVoid(provide(forgetClient(client))) : Effect.void,
      ),
    )
  })

  /** Refreshes the tokens of a server; concurrent callers share one refresh. Undefined means re-authorize. */
  const refreshing = yield* singleFlight((key: string, stale: Tokens) =>
    Effect.gen(function* () {
      const current = yield* readTokens(key)
      // Someone else already replaced the token: use theirs rather than spending the refresh token again.
      if (current !== undefined && current.access_token !== stale.access_token) return current
      if (stale.client_id === undefined || stale.refresh_token === undefined) {
        yield* store.delete(tokensKey(key))
        return undefined
      }
      const server = yield* serverForRefresh(stale)
      const client = yield* provide(findClient(stale.issuer, stale.client_id))
      if (client === undefined) {
        yield* store.delete(tokensKey(key))
        return undefined
      }
      const fresh = yield* provide(refresh(server, client, stale)).pipe(
        Effect.catchIf(
          (error) => error.reason === "invalid-grant",
          () => store.delete(tokensKey(key)).pipe(Effect.as(undefined)),
        ),
        // The authorization server no longer knows the registration the tokens were issued to: forget both, so
        // that the next authorization registers anew. A configured client is the caller's to fix.
        Effect.catchIf(
          (error) => error.error === "invalid_client",
          (error) =>
            Effect.flatMap(provide(forgetClient(client)), (forgotten) =>
              forgotten ? store.delete(tokensKey(key)).pipe(Effect.as(undefined)) : Effect.fail(error),
            ),
        ),
      )
      // Saved before anyone uses it, so a rotated refresh token is never lost.
      if (fresh !== undefined) yield* store.set(tokensKey(key), fresh)
      return fresh
    }),
  )
  const refreshShared = (key: string, stale: Tokens): Effect.Effect<Tokens | undefined, AuthError> =>
    Cache.get(refreshing, new ForServer(key, stale))

  /** The tokens to send now: refreshed proactively when they expire within the configured skew. */
  const usableTokens = Effect.fnUntraced(function* (key: string) {
    const tokens = yield* readTokens(key)
    if (tokens === undefined || tokens.expires_at === undefined) return tokens
    const expiresAt = tokens.expires_at
    const now = yield* Clock.currentTimeMillis
    if (expiresAt - config.refreshSkewSeconds * 1000 > now) return tokens
    if (tokens.refresh_token !== undefined) {
      // An early refresh that fails for another reason than a dead grant must not block a token that still works.
      return yield* refreshShared(key, tokens).pipe(
        Effect.catch((error) =>
          Effect.flatMap(Clock.currentTimeMillis, (later) =>
            expiresAt > later ? Effect.succeed(tokens) : Effect.fail(error),
          ),
        ),
      )
    }
    if (strategy?.unattended === true) {
      // Obtained again without a person, as a refresh would be, for the scope held (the selection rules could name
      // another one than the challenge that got it); a failure keeps a token that still works.
      return yield* authorizeShared(key, key, tokens.scope === "" ? {} : { scope: tokens.scope }).pipe(
        Effect.catch((error) =>
          Effect.flatMap(Clock.currentTimeMillis, (later) =>
            expiresAt > later ? Effect.succeed(tokens) : Effect.fail(error),
          ),
        ),
      )
    }
    return expiresAt > now ? tokens : undefined
  })

  const policy: Policy = {
    maxStepUpAttempts: config.maxStepUpAttempts,
    stepUp: strategy === undefined || strategy.stepUp,
  }
  const sendLimit = maxSends(policy)

  /** Sends the request with the token held now, decorated by the extensions; the token is undefined without one. */
  const sendWith = Effect.fnUntraced(function* (
    original: Incoming,
    tokens: Tokens | undefined,
    redirect: RequestRedirect,
  ) {
    const headers = new Headers(original.headers)
    if (tokens !== undefined) headers.set("authorization", `Bearer ${tokens.access_token}`)
    else headers.delete("authorization")
    const outgoing: OutgoingRequest | undefined =
      tokens === undefined
        ? undefined
        : {
            kind: "resource",
            method: original.method,
            url: original.url,
            headers,
            accessToken: tokens.access_token,
            issuer: tokens.issuer,
            tokenType: tokens.token_type,
          }
    if (outgoing !== undefined) {
      for (const extension of extensions) {
        if (extension.decorate === undefined) continue
        yield* provide(extension.decorate(outgoing))
      }
    }
    const response = yield* send(config.fetch, "request", original.url, {
      method: original.method,
      headers,
      redirect,
      signal: original.signal,
      ...(original.body !== undefined ? { body: original.body } : {}),
    })
    // An extension may ask for the request once more (a DPoP nonce the server now requires, RFC 9449 §9).
    let resendAsked = false
    if (outgoing !== undefined) {
      for (const extension of extensions) {
        if (extension.decorate === undefined || extension.response === undefined) continue
        const copy = response.clone()
        if (yield* extension.response(copy, outgoing)) resendAsked = true
        discard(copy)
      }
    }
    return { response, resendAsked }
  })

  const fetchWithAuth = Effect.fn("AuthClient.fetch")(function* (input: string | URL | Request, init?: RequestInit) {
    const original = asGiven(input, init) ?? (yield* throughRequest(input, init))
    const key = yield* serverKey(original.url)
    const operation = operationOf(original.bodyText)
    const stepKey = `${key} ${operation}`
    // Redirects are followed only when the caller asked for it; by default they are handed back, so a token never
    // travels to wherever a redirect points.
    const redirect = init?.redirect ?? (input instanceof Request ? input.redirect : "manual")
    let state = initial
    while (state.sends < sendLimit) {
      const tokens = yield* usableTokens(key)
      const { response, resendAsked } = yield* sendWith(original, tokens, redirect)
      const parsed = Challenge.fromHeaders(response.headers, schemes)
      const challenge = Result.isSuccess(parsed) ? parsed.success : undefined
      let step: Step
      ;({ state, step } = transition(policy, state, {
        _tag: "Response",
        status: response.status,
        challenge,
        foreign:
          Result.isSuccess(parsed) && challenge === undefined && response.headers.get("www-authenticate") !== null,
        sent:
          tokens === undefined
            ? undefined
            : {
                accessToken: tokens.access_token,
                scope: tokens.scope,
                refreshable: tokens.refresh_token !== undefined,
              },
        resendAsked,
        stepUps: stepUps.get(stepKey) ?? 0,
      }))
      if (step._tag !== "Return") discard(response)
      // The steps that need a fact are answered until the policy returns, fails or sends again.
      while (step._tag === "CheckHeld" || step._tag === "Refresh") {
        const event: Event =
          step._tag === "CheckHeld"
            ? { _tag: "Held", before: step.before, accessToken: (yield* readTokens(key))?.access_token }
            : { _tag: "Refreshed", ok: tokens !== undefined && (yield* refreshShared(key, tokens)) !== undefined }
        ;({ state, step } = transition(policy, state, event))
      }
      switch (step._tag) {
        case "Return":
          if (step.ok) stepUps.delete(stepKey)
          return response
        case "Fail":
          return yield* failure(policy, step, original.url, operation)
        case "Authorize":
          stepUps.set(stepKey, (stepUps.get(stepKey) ?? 0) + 1)
          yield* authorizeShared(key, original.url, {
            challenge: step.challenge,
            ...(step.scope === undefined ? {} : { scope: step.scope }),
            force: step.force,
          })
      }
      // Resend, Retry and Authorize send again.
    }
    return yield* failure(
      policy,
      { _tag: "Fail", reason: "step-up-limit", attempts: stepUps.get(stepKey) ?? 0 },
      original.url,
      operation,
    )
  })

  const unauthorized = Effect.fn("AuthClient.unauthorized")(function* (serverUrl: string, response: Response) {
    const key = yield* serverKey(serverUrl)
    const parsed = Challenge.fromHeaders(response.headers, schemes)
    const challenge = Result.isSuccess(parsed) ? parsed.success : undefined
    const tokens = yield* readTokens(key)
    if (tokens?.refresh_token !== undefined && challenge?.error === "invalid_token") {
      const fresh = yield* refreshShared(key, tokens)
      if (fresh !== undefined) return
    }
    yield* authorize(serverUrl, { challenge, force: tokens !== undefined })
  })

  return AuthClient.of({
    fetch: fetchWithAuth,
    accessToken: (serverUrl) =>
      serverKey(serverUrl).pipe(
        Effect.flatMap(usableTokens),
        Effect.map((tokens) => tokens?.access_token),
      ),
    unauthorized,
    authorize,
    begin,
    complete,
    tokens: (serverUrl) => serverKey(serverUrl).pipe(Effect.flatMap(readTokens)),
    logout: (serverUrl) => serverKey(serverUrl).pipe(Effect.flatMap((key) => store.delete(tokensKey(key)))),
    revoke: revokeHeld,
  })
})

/**
 * Options of {@link createAuthClient}: the client options plus where to store and how to reach the user.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export interface CreateOptions extends ClientOptions {
  /**
   * "memory" (default) or a {@link Backend}: `TokenStore.webStorage()` in browsers, your own elsewhere. The
   * owner-only JSON file (`{ file: path }`) is an option of `createAuthClient` from `@keyway/client/node`.
   */
  readonly store?: "memory" | Backend
  /**
   * The user agent: `UserAgent.redirect` in web apps, `UserAgent.headless` in automation. Without one, authorizing
   * fails with `user-agent-failed`; `createAuthClient` from `@keyway/client/node` defaults to the system browser.
   */
  readonly userAgent?: UserAgent["Service"]
}

/**
 * The plain face of the client: Promise methods and a drop-in `fetch`. Errors are {@link AuthError}s.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export interface PlainAuthClient {
  /** A drop-in fetch for MCP transports: adds the Bearer token, authorizes on 401, refreshes, steps up on 403. */
  readonly fetch: FetchLike
  readonly authorize: (serverUrl: string, options?: AuthorizeOptions) => Promise<Tokens>
  readonly tokens: (serverUrl: string) => Promise<Tokens | undefined>
  readonly logout: (serverUrl: string) => Promise<void>
  /**
   * Revokes the tokens held for a server at their authorization server (RFC 7009 §2.1): the refresh token, then the
   * access token, authenticated as their client. The tokens stay held (`logout` forgets them); resolves with the
   * kinds revoked, none when no tokens are held. Fails with step `revocation`: `missing-endpoint` when the server
   * publishes no `revocation_endpoint`, `oauth-error` when it refuses.
   */
  readonly revoke: (serverUrl: string) => Promise<ReadonlyArray<TokenTypeHint>>
  readonly begin: (serverUrl: string, options?: AuthorizeOptions) => Promise<Begun>
  readonly complete: (callbackUrl: string) => Promise<Tokens>
  /** The access token to send now (refreshed when close to expiry), without authorizing. */
  readonly accessToken: (serverUrl: string) => Promise<string | undefined>
  /** Reacts to a 401 received by the caller: refresh when possible, else authorize with the response's challenge. */
  readonly unauthorized: (serverUrl: string, response: Response) => Promise<void>
  /** Releases what the client holds: nothing today (it keeps no runtime, connection or timer); kept for callers. */
  readonly dispose: () => Promise<void>
}

/**
 * Builds a client for any number of MCP servers. Throws {@link InvalidClientOptions} when an option is one this entry
 * does not take (`store: { file }` is `@keyway/client/node`'s) or of the wrong shape.
 *
 * @example
 * ```ts
 * const auth = createAuthClient({
 *   clientName: "my-web-app",
 *   applicationType: "web",
 *   userAgent: UserAgent.redirect({ redirectUri: `${location.origin}/callback` }),
 *   store: TokenStore.webStorage(),
 * })
 * const response = await auth.fetch("https://mcp.example.com/mcp", { method: "POST", body })
 * ```
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export const createAuthClient = (options: CreateOptions = {}): PlainAuthClient => {
  const problem = problemOf(options, "@keyway/client")
  if (problem !== undefined) throw new InvalidClientOptions(problem)
  const { store, userAgent, ...clientOptions } = options
  const backend = store === undefined || store === "memory" ? memory() : store
  const config = ClientConfig.make(clientOptions)
  // The service is made once, on first use, from plain service values rather than through a layer and a managed
  // runtime: its services are values that hold nothing to release, so the layer graph, memo map and scope would
  // only add to the first call of a cold start. The Effect face (`AuthClient.layer`) runs the same `make`.
  let client: AuthClient["Service"] | undefined
  const service = (): AuthClient["Service"] => {
    client ??= Effect.runSync(
      make.pipe(
        Effect.provideContext(
          Context.make(ClientConfig, config).pipe(
            Context.add(TokenStore, fromBackend(backend)),
            Context.add(DiscoveryCache, memoryCache()),
            Context.add(UserAgent, userAgent ?? noUserAgent),
          ),
        ),
      ),
    )
    return client
  }
  const run = <A>(f: (client: AuthClient["Service"]) => Effect.Effect<A, AuthError>): Promise<A> =>
    Effect.runPromise(Effect.suspend(() => f(service())))
  return {
    fetch: (input, init) => run((client) => client.fetch(input, init)),
    authorize: (serverUrl, authorizeOptions) => run((client) => client.authorize(serverUrl, authorizeOptions)),
    tokens: (serverUrl) => run((client) => client.tokens(serverUrl)),
    logout: (serverUrl) => run((client) => client.logout(serverUrl)),
    revoke: (serverUrl) => run((client) => client.revoke(serverUrl)),
    begin: (serverUrl, authorizeOptions) => run((client) => client.begin(serverUrl, authorizeOptions)),
    complete: (callbackUrl) => run((client) => client.complete(callbackUrl)),
    accessToken: (serverUrl) => run((client) => client.accessToken(serverUrl)),
    unauthorized: (serverUrl, response) => run((client) => client.unauthorized(serverUrl, response)),
    dispose: () => Promise.resolve(),
  }
}
