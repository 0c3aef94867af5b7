/**
 * The authorization server: the Effect service that answers every endpoint, and the plain face
 * `createAuthorizationServer(options)` with a Web handler and a one-call Node server.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13 | OAuth 2.1}
 * @module
 */
import { Context, Duration, Effect, Layer, ManagedRuntime, Option } from "effect"
import {
  type ClientOptions,
  ConfigError,
  type ConfigOptions,
  clientAuthMethod,
  type ResolvedConfig,
  resolve,
  resolveEffect,
  resolveRateLimits,
} from "./Config.js"
import { ClientMetadataResolver } from "./cimd/ClientMetadataResolver.js"
import { ClientTrustPolicy } from "./cimd/TrustPolicy.js"
import { Extensions } from "./Extension.js"
import { registrationProblem } from "./grants/grantTypes.js"
import { accountGet, accountLoginPost, accountPaths, accountRevokePost } from "./internal/account.js"
import { authorizeGet, consentPost, loginPost } from "./internal/authorize.js"
import { MetadataDocuments, withExtensionMetadata } from "./internal/clients.js"
import { nowSeconds } from "./internal/clock.js"
import { extensionRoutes } from "./internal/extensionEndpoints.js"
import { CORS_HEADERS, json, preflight } from "./internal/http.js"
import { introspectEndpoint } from "./internal/introspect.js"
import { limitsOf, perAddress, refusal } from "./internal/limits.js"
import { ProxyState, proxyAuthorizeGet, proxyConsentPost, UpstreamClient, upstreamCallback } from "./internal/proxy.js"
import { type PolicyDecision, type RegistrationPolicy, registerEndpoint } from "./internal/register.js"
import { revokeEndpoint } from "./internal/revoke.js"
import { Sessions } from "./internal/session.js"
import { tokenEndpoint } from "./internal/token.js"
import { type Rotation, type RotationPolicy, rotate, rotationJob } from "./KeyRotation.js"
import * as Metadata from "./Metadata.js"
import * as NodeServer from "./NodeServer.js"
import {
  type Readiness,
  readiness,
  type SecurityEventFn,
  SecurityEvents,
  type StorageObserverFn,
} from "./Operations.js"
import { OutboundFetch, OutboundRefused } from "./outbound/OutboundFetch.js"
import { Resolver } from "./outbound/Resolver.js"
import { bucket, makeMemory, RateLimiter, type RateLimiterService } from "./RateLimiter.js"
import { type SigningAlgorithm, TokenSigner } from "./Signing.js"
import type { StorageError } from "./storage/Errors.js"
import { StorageObserver } from "./storage/internal/observer.js"
import { purgeJob } from "./storage/Purge.js"
import {
  ClientStore,
  type Consent,
  GrantStore,
  IssuerRecord,
  type KeyStore,
  layerMemory,
  layerPostgres,
  layerSqlite,
  type NewClient,
  RecordStore,
} from "./storage/Storage.js"
import { type AuthenticateFn, UserAuthenticator } from "./UserAuthenticator.js"

export type { PolicyDecision, RegistrationPolicy }

/** Options of the Effect face (the storage and user services come from layers). */
export interface ServerOptions extends ConfigOptions {
  /** Hook deciding on every dynamic registration after the metadata is validated. */
  readonly registrationPolicy?: RegistrationPolicy
  /** Access-token signature algorithm for keys generated on first start; ES256 by default. */
  readonly signingAlgorithm?: SigningAlgorithm
  /**
   * Replaces the resolver built from `clientIdMetadataDocuments` (its trust, cache and outbound options are then
   * ignored): for a custom outbound fetch, DNS resolver or trust service, and for tests.
   */
  readonly clientMetadataResolver?: Layer.Layer<ClientMetadataResolver>
}

/**
 * The outbound fetch behind `rateLimits.metadataFetches`: at most that many fetches per host (documents and `jwks_uri`
 * key sets alike) in its window, counted in the storage's limiter when it provides one; a fetch over the limit is
 * refused (`rate-limited`) without being sent, so a flood of made-up client IDs on one host cannot make this server
 * hammer it.
 */
const perHost = (options: ServerOptions): Layer.Layer<OutboundFetch, never, OutboundFetch> =>
  Layer.effect(
    OutboundFetch,
    Effect.gen(function* () {
      const inner = yield* OutboundFetch
      // The options were validated by the server's own resolve; only the limit is needed here.
      const rule = resolveRateLimits(options.rateLimits).metadataFetches
      if (rule === false) return inner
      const limiter = Option.getOrElse(yield* Effect.serviceOption(RateLimiter), () => RateLimiter.of(makeMemory()))
      return OutboundFetch.of({
        fetchJson: (url, request) =>
          Effect.gen(function* () {
            const host = URL.parse(url)?.hostname.toLowerCase()
            if (host === undefined) return yield* inner.fetchJson(url, request)
            const decision = yield* limiter.hit(bucket("metadata-fetch", host), rule, yield* nowSeconds).pipe(
              // The limit protects other hosts; a storage failure must not stop sign-ins, so the fetch goes ahead.
              Effect.catchTag("StorageError", () => Effect.succeed({ allowed: true } as const)),
            )
            if (!decision.allowed) {
              return yield* new OutboundRefused({
                reason: "rate-limited",
                url,
                message: refusal(
                  `too many fetches from ${host}`,
                  "rateLimits.metadataFetches",
                  rule,
                  decision.retryAfter,
                ),
                retryAfter: decision.retryAfter,
              })
            }
            return yield* inner.fetchJson(url, request)
          }),
      })
    }),
  )

/** The resolver the options describe: OS DNS, the SSRF-guarded fetch, and the trust policy. */
const metadataDocumentsLayer = (options: ServerOptions): Layer.Layer<MetadataDocuments, ConfigError> => {
  // Same default as Config.resolve.
  if (options.clientIdMetadataDocuments?.enabled === false) return MetadataDocuments.disabled
  const cimd = options.clientIdMetadataDocuments ?? {}
  const trust = cimd.trust ?? { acceptAnyHttps: true }
  const resolver =
    options.clientMetadataResolver ??
    ClientMetadataResolver.layer(cimd).pipe(
      Layer.provide(
        perHost(options).pipe(
          Layer.provide(
            OutboundFetch.layer({
              ...cimd.outbound,
              ...(cimd.allowHttpLoopbackClientIds === true ? { allowInsecureLoopback: true } : {}),
            }).pipe(Layer.provide(Resolver.layer)),
          ),
        ),
      ),
      Layer.provide(
        typeof trust === "function" ? ClientTrustPolicy.layerFunction(trust) : ClientTrustPolicy.layer(trust),
      ),
    )
  return Layer.effect(
    MetadataDocuments,
    ClientMetadataResolver.useSync((r) => MetadataDocuments.of({ resolve: r.resolve, jwks: r.jwks })),
  ).pipe(Layer.provide(resolver))
}

/**
 * The storage services the server needs.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export type StorageServices = ClientStore | GrantStore | KeyStore

/**
 * Pre-registered clients become `static` records in the {@link ClientStore} at start-up (secrets hashed by the store).
 */
const staticClient = (c: ClientOptions, now: number): NewClient => {
  const method = clientAuthMethod(c)
  return {
    client_id: c.clientId,
    client_id_issued_at: now,
    client_secret_expires_at: 0,
    redirect_uris: c.redirectUris,
    grant_types: c.grantTypes ?? ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: method,
    origin: "static",
    ...(c.clientName === undefined ? {} : { client_name: c.clientName }),
    ...(c.scope === undefined ? {} : { scope: c.scope }),
    ...(c.jwks === undefined ? {} : { jwks: c.jwks as NewClient["jwks"] & object }),
    ...(c.clientSecret === undefined || method === "none" || method === "private_key_jwt"
      ? {}
      : { client_secret: c.clientSecret }),
  }
}

type Route = (
  request: Request,
) => Effect.Effect<Response, StorageError, StorageServices | TokenSigner | UserAuthenticator | MetadataDocuments>

const methodNotAllowed = (allow: string) =>
  new Response(null, { status: 405, headers: { Allow: allow, ...CORS_HEADERS } })

/** The span name of an endpoint path: `token`, `authorize.login`, `metadata` for the well-known documents. */
const spanName = (path: string, base: string): string =>
  path.includes("/.well-known/")
    ? "metadata"
    : path
        .slice(base.length + 1)
        .split("/")
        .join(".")

// The paths below the issuer's that the server serves itself (in either mode), which no extension endpoint may take.
const BUILT_IN_PATHS = [
  "/jwks",
  "/authorize",
  "/authorize/login",
  "/authorize/consent",
  "/account",
  "/account/login",
  "/account/revoke",
  "/upstream/callback",
  "/token",
  "/revoke",
  "/introspect",
  "/register",
]

/**
 * Why the extensions cannot start, for a `ConfigError`: a grant that claims a built-in grant type, or what an
 * extension's own `validate` finds.
 */
const extensionProblem = (config: ResolvedConfig): string | undefined => {
  const grants = registrationProblem(config.extensions)
  if (grants !== undefined) return grants
  const taken = new Set(BUILT_IN_PATHS)
  for (const extension of config.extensions) {
    for (const endpoint of extension.endpoints ?? []) {
      if (!/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(endpoint.path) || endpoint.path.startsWith("/.well-known/")) {
        return `${extension.id}: endpoint path ${endpoint.path} must begin with / and be a plain path outside /.well-known/`
      }
      if (taken.has(endpoint.path)) return `${extension.id}: endpoint path ${endpoint.path} is already served`
      taken.add(endpoint.path)
    }
  }
  for (const extension of config.extensions) {
    const problem = extension.validate?.(config)
    if (problem !== undefined) return `${extension.id}: ${problem}`
  }
  return undefined
}

/** Builds the router over the resolved configuration. */
const router = (
  config: ResolvedConfig,
  sessions: Sessions,
  policy: RegistrationPolicy | undefined,
  limiter: RateLimiterService,
  records: RecordStore["Service"],
  token: Route,
) => {
  const base = config.issuerUrl.pathname === "/" ? "" : config.issuerUrl.pathname.replace(/\/$/, "")
  const metadata = Metadata.document(config)
  const routes = new Map<string, Record<string, Route>>()
  const metadataRoute: Record<string, Route> = {
    GET: () =>
      Effect.succeed(
        json(metadata, { headers: { ...CORS_HEADERS, "Cache-Control": "public, max-age=300" }, cacheable: true }),
      ),
    OPTIONS: () => Effect.succeed(preflight("GET, OPTIONS")),
  }
  for (const path of Metadata.wellKnownPaths(config.issuerUrl)) routes.set(path, metadataRoute)
  routes.set(`${base}/jwks`, {
    GET: () =>
      Effect.gen(function* () {
        const signer = yield* TokenSigner
        const jwks = yield* signer.jwks
        return json(jwks, {
          headers: {
            ...CORS_HEADERS,
            "Content-Type": "application/jwk-set+json",
            "Cache-Control": "public, max-age=300",
          },
          cacheable: true,
        })
      }),
    OPTIONS: () => Effect.succeed(preflight("GET, OPTIONS")),
  })
  if (config.upstream === undefined) {
    routes.set(`${base}/authorize`, { GET: (r) => authorizeGet(config, sessions, r) })
    routes.set(`${base}/authorize/login`, { POST: (r) => loginPost(config, sessions, r, limiter) })
    routes.set(`${base}/authorize/consent`, { POST: (r) => consentPost(config, sessions, r) })
    // The user's connected apps, on the same login session.
    const account = accountPaths(base)
    routes.set(account.page, { GET: (r) => accountGet(config, sessions, base, r) })
    routes.set(account.login, { POST: (r) => accountLoginPost(config, sessions, base, r, limiter) })
    routes.set(account.revoke, { POST: (r) => accountRevokePost(config, sessions, base, r) })
  } else {
    // Proxy mode: no local login; Keyway's consent for each client, then the upstream sign-in.
    const proxy = new ProxyState(config.secureCookies, new UpstreamClient(config.upstream), config.sessionSecret)
    routes.set(`${base}/authorize`, { GET: (r) => proxyAuthorizeGet(config, sessions, proxy, r) })
    routes.set(`${base}/authorize/consent`, { POST: (r) => proxyConsentPost(config, sessions, proxy, r) })
    routes.set(`${base}/upstream/callback`, { GET: (r) => upstreamCallback(config, proxy, r) })
  }
  // Abuse limits (see Config.RateLimitOptions): the back-channel endpoints apply theirs once they know who asks (the
  // authenticated client, or a public client's address and refresh-token family); registration per client address.
  routes.set(`${base}/token`, {
    POST: token,
    OPTIONS: () => Effect.succeed(preflight("POST, OPTIONS")),
  })
  routes.set(`${base}/revoke`, {
    POST: (r) => revokeEndpoint(config, r, limiter),
    OPTIONS: () => Effect.succeed(preflight("POST, OPTIONS")),
  })
  routes.set(`${base}/introspect`, {
    POST: (r) => introspectEndpoint(config, r, limiter),
    OPTIONS: () => Effect.succeed(preflight("POST, OPTIONS")),
  })
  if (config.registration) {
    routes.set(`${base}/register`, {
      POST: perAddress(config, limiter, limitsOf(config).registration, (r) => registerEndpoint(config, r, policy)),
      OPTIONS: () => Effect.succeed(preflight("POST, OPTIONS")),
    })
  }
  for (const [path, route] of extensionRoutes(config, base, sessions, limiter, records)) routes.set(path, route)
  // Every endpoint is a traced function, its span named after the endpoint (AuthorizationServer.token, ...).
  for (const [path, route] of routes) {
    const name = spanName(path, base)
    for (const [method, handler] of Object.entries(route)) {
      route[method] = Effect.fn(`AuthorizationServer.${name}`)(function* (request: Request) {
        const response = yield* handler(request)
        yield* Effect.annotateCurrentSpan({
          "http.request.method": method,
          "http.response.status_code": response.status,
        })
        return response
      })
    }
  }
  const allowed = new Map<string, string>()
  for (const [path, route] of routes) {
    const methods = Object.keys(route)
    if (route.GET !== undefined) methods.splice(methods.indexOf("GET") + 1, 0, "HEAD")
    allowed.set(path, methods.join(", "))
  }
  const allow = (pathname: string): string | undefined => allowed.get(pathname)
  const route = (request: Request) => {
    const path = new URL(request.url).pathname
    const entry = routes.get(path)
    if (entry === undefined) {
      return Effect.succeed(json({ error: "not_found" }, { status: 404 }))
    }
    const method = request.method === "HEAD" && entry.GET !== undefined ? "GET" : request.method
    const handler = entry[method]
    if (handler === undefined) return Effect.succeed(methodNotAllowed(allowed.get(path)!))
    return handler(request).pipe(
      Effect.catchTag("StorageError", () =>
        Effect.succeed(
          json({ error: "server_error", error_description: "storage failure" }, { status: 500, headers: CORS_HEADERS }),
        ),
      ),
    )
  }
  return { route, allow }
}

/**
 * The authorization server as an Effect service: one function answering every endpoint.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3 | RFC 8414 §3}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-3 | OAuth 2.1 §3}
 */
export class AuthorizationServer extends Context.Service<
  AuthorizationServer,
  {
    readonly config: ResolvedConfig
    /** The metadata document (RFC 8414 §2). */
    readonly metadata: Readonly<Record<string, unknown>>
    /** Answers any request addressed to the server. Never fails: errors become responses. */
    readonly handle: (request: Request) => Effect.Effect<Response>
    /**
     * The methods an endpoint path serves, as an `Allow` value (RFC 9110 §10.2.1), or `undefined` for a path that is
     * not an endpoint.
     */
    readonly allow: (pathname: string) => string | undefined
    /**
     * Starts a signing-key rotation now: a new key is published at once and signs after `signingKeys.publishAhead`
     * (see {@link rotate}).
     */
    readonly rotateSigningKey: Effect.Effect<Rotation, StorageError>
  }
>()("@keyway/authorization-server/AuthorizationServer") {
  /**
   * The server over storage and user-authentication services. Pre-registered clients are written to the
   * {@link ClientStore}; a signing key is generated when the {@link KeyStore} has none. Unusable options fail the layer
   * with {@link ConfigError}, and so does a database whose {@link IssuerRecord} names another issuer (checked before
   * anything is written). For as long as the layer's scope is open, two background jobs run at the time of Effect's
   * `Clock`: key upkeep and scheduled rotation ({@link rotationJob}, every `signingKeys.checkEvery`) and the purge of
   * expired records ({@link purgeJob}, every `maintenance.purgeEvery` unless off).
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3 | RFC 8414 §3}
   */
  static readonly layer = (
    options: ServerOptions,
  ): Layer.Layer<AuthorizationServer, StorageError | ConfigError, StorageServices | UserAuthenticator> =>
    Layer.effect(
      AuthorizationServer,
      Effect.gen(function* () {
        const layered = Option.getOrElse(yield* Effect.serviceOption(Extensions), () => [])
        const config = yield* resolveEffect(
          layered.length === 0 ? options : { ...options, extensions: [...(options.extensions ?? []), ...layered] },
        )
        const problem = extensionProblem(config)
        if (problem !== undefined) return yield* new ConfigError({ message: problem })
        const clients = yield* ClientStore
        const now = yield* nowSeconds
        // Before anything is written: a database that serves another issuer is left as it is.
        const record = yield* Effect.serviceOption(IssuerRecord)
        if (Option.isSome(record)) {
          const served = yield* record.value.claim(config.issuer, now, config.previousIssuer)
          if (served !== undefined && served !== config.issuer && served !== config.previousIssuer) {
            return yield* new ConfigError({ message: issuerTaken(served, config.issuer) })
          }
        }
        for (const c of config.clients) yield* clients.upsert(staticClient(c, now))
        // A client removed from the configuration must stop working, also in a database that outlives the process.
        const configured = new Set(config.clients.map((c) => c.clientId))
        for (const stale of yield* clients.list({ origin: "static" })) {
          if (!configured.has(stale.client_id)) {
            yield* clients.delete(stale.client_id).pipe(Effect.catchTag("ClientNotFound", () => Effect.void))
          }
        }
        const provided = yield* Effect.context<StorageServices | TokenSigner | UserAuthenticator | MetadataDocuments>()
        const context = Context.add(
          provided,
          MetadataDocuments,
          withExtensionMetadata(Context.get(provided, MetadataDocuments), config.extensions),
        )
        // The storage's limiter (shared through the database for SQLite and PostgreSQL), else one in this process.
        const limiter = Option.getOrElse(yield* Effect.serviceOption(RateLimiter), () => RateLimiter.of(makeMemory()))
        // The storage's record store, else (a storage layer of the caller's without one) one in this process.
        const stored = yield* Effect.serviceOption(RecordStore)
        const records = Option.isSome(stored)
          ? stored.value
          : Context.get(yield* Layer.build(RecordStore.layerMemory), RecordStore)
        const { route, allow } = router(
          config,
          new Sessions(config.secureCookies, config.sessionTtl, config.sessionSecret),
          options.registrationPolicy,
          limiter,
          records,
          // The grants run with the services as they are now, as the routes do (the context provided to `handle`).
          tokenEndpoint(config, {
            grants: Context.get(context, GrantStore),
            signer: Context.get(context, TokenSigner),
            limiter,
            records,
          }),
        )
        const policy: RotationPolicy = {
          ...config.signingKeys,
          accessTokenTtl: config.accessTokenTtl,
          algorithm: options.signingAlgorithm ?? "ES256",
        }
        yield* Effect.forkScoped(rotationJob(policy, Duration.millis(config.signingKeys.checkEvery * 1000)))
        if (config.purgeEvery !== false) {
          yield* Effect.forkScoped(
            purgeJob({ every: Duration.millis(config.purgeEvery * 1000) }).pipe(
              Effect.provideService(RateLimiter, limiter),
            ),
          )
        }
        return AuthorizationServer.of({
          config,
          metadata: Metadata.document(config),
          allow,
          rotateSigningKey: nowSeconds.pipe(
            Effect.flatMap((now) => rotate(policy, now)),
            Effect.provideContext(context),
          ),
          handle: (request) =>
            route(request).pipe(
              Effect.provideContext(context),
              Effect.catchCause(() =>
                Effect.succeed(json({ error: "server_error" }, { status: 500, headers: CORS_HEADERS })),
              ),
            ),
        })
      }),
    ).pipe(
      Layer.provide(TokenSigner.layer(options.signingAlgorithm ?? "ES256")),
      Layer.provide(metadataDocumentsLayer(options)),
    )
}

// Why a database that serves `served` cannot serve `issuer`, and the two ways out.
const issuerTaken = (served: string, issuer: string): string =>
  `storage: the database serves the issuer ${served} (its clients, signing keys and tokens are that issuer's), not ${issuer}: ` +
  `give ${issuer} a database of its own (another data directory, SQLite file, or PostgreSQL database or schema), ` +
  `or, to move the database to ${issuer}, start once with previousIssuer set to ${served}`

/**
 * Where the plain face keeps its data.
 *
 * @see {@link https://nodejs.org/api/sqlite.html | node:sqlite}
 */
export type StorageOption =
  | { readonly type: "memory" }
  | { readonly type: "sqlite"; readonly path: string }
  | PostgresStorageOption
  | { readonly type: "layer"; readonly layer: Layer.Layer<StorageServices, StorageError> }

/**
 * PostgreSQL storage for the plain face, for several instances sharing one database (see `Storage.layerPostgres`).
 * The pool is created on start and ended by `close()`.
 *
 * @see {@link https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING | PostgreSQL connection URIs}
 */
export interface PostgresStorageOption {
  readonly type: "postgres"
  /** `postgres://user:password@host:port/database` */
  readonly connectionString: string
  /** The schema holding Keyway's tables, created when absent; `public` by default. */
  readonly schema?: string
  /** The most connections the pool opens at once; 10 by default. */
  readonly poolSize?: number
}

/**
 * Options of {@link createAuthorizationServer}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13 | OAuth 2.1}
 */
export interface AuthorizationServerOptions extends ServerOptions {
  /**
   * In memory by default (data is lost on exit); `{ type: "sqlite", path }` for the embedded database;
   * `{ type: "postgres", connectionString }` for several instances behind one issuer.
   */
  readonly storage?: StorageOption
  /** Replaces the default user authentication (configured users with scrypt hashes). */
  readonly authenticate?: AuthenticateFn
  /** Called after every storage operation with its name, duration and outcome (see `Operations.StorageObserver`). */
  readonly onStorageOperation?: StorageObserverFn
  /**
   * Receives the security events the server decides itself (sign-ins, consents, codes, refused authorization
   * requests, tokens issued or refused, registrations, revocations, signing keys; see `Operations.SecurityEvent`), each
   * reported by its endpoint with the values it parsed, for an audit log and readable logs.
   */
  readonly onSecurityEvent?: SecurityEventFn
  /**
   * A layer installing Effect's tracer, e.g. `@effect/opentelemetry`'s `OtelTracer.layer` over an OTLP exporter: every
   * endpoint's span (`AuthorizationServer.token`, ...) and those under it are then exported. None by default; the
   * layer is released (and its spans flushed) by `close()`.
   */
  readonly tracing?: Layer.Layer<never>
}

/**
 * The running server's plain face.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch Standard}
 */
export interface AuthorizationServerInstance {
  readonly issuer: string
  /** The metadata document (RFC 8414 §2). */
  readonly metadata: Readonly<Record<string, unknown>>
  /** Web-standard handler; mount it anywhere (Node, Express, Hono, Bun, Deno). */
  readonly handler: (request: Request) => Promise<Response>
  /**
   * Opens storage, writes the configured clients and makes sure a signing key exists (what the first request would
   * otherwise do); rejects with the cause when the server cannot start.
   */
  readonly ready: () => Promise<void>
  /**
   * The methods an endpoint path serves, as an `Allow` value (RFC 9110 §10.2.1), or `undefined` for a path that is
   * not an endpoint; known once {@link AuthorizationServerInstance.ready | ready}. The node:http bridge's `allow`
   * option takes it.
   */
  readonly allow: (pathname: string) => string | undefined
  /**
   * Starts a node:http server for this handler, once {@link AuthorizationServerInstance.ready | ready}. Request URLs
   * are built from the issuer's origin, never from the Host header (override with `publicUrl`).
   */
  readonly listen: (options?: NodeServer.ListenOptions) => Promise<NodeServer.RunningServer>
  /** A user's remembered consents. */
  readonly listConsents: (subject: string) => Promise<ReadonlyArray<Consent>>
  /** Forgets a user's consent for a client (one resource, or all); returns how many were removed. */
  readonly revokeConsent: (subject: string, clientId: string, resource?: string) => Promise<number>
  /**
   * Starts a signing-key rotation now; the new key is in the JWK Set at once and signs after
   * `signingKeys.publishAhead`. Returns the key already waiting when a rotation is under way.
   */
  readonly rotateSigningKey: () => Promise<Rotation>
  /**
   * Whether the server can serve tokens now: the database answers and a key can sign (see `Operations.readiness`).
   * Never rejects.
   */
  readonly readiness: () => Promise<Readiness>
  /** Stops the background jobs and releases storage (closes the SQLite database or the PostgreSQL pool). */
  readonly close: () => Promise<void>
}

// The storage could not even be opened.
const UNREADY: Readiness = { ready: false, database: "failed", signingKey: "unknown" }

const storageLayer = (option: StorageOption | undefined): Layer.Layer<StorageServices, StorageError> => {
  if (option === undefined || option.type === "memory") return layerMemory
  if (option.type === "sqlite") return layerSqlite({ path: option.path })
  if (option.type === "postgres") {
    return layerPostgres({
      connectionString: option.connectionString,
      ...(option.schema === undefined ? {} : { schema: option.schema }),
      ...(option.poolSize === undefined ? {} : { max: option.poolSize }),
    })
  }
  return option.layer
}

/**
 * Creates the authorization server (plain face). The configuration is validated at once (a `ConfigError` is
 * thrown for bad options); storage opens on the first request or `listen`.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13 | OAuth 2.1}
 */
export const createAuthorizationServer = (options: AuthorizationServerOptions): AuthorizationServerInstance => {
  // Validates (and warns about development relaxations) now, not at the first request.
  const config = resolve(options)
  const problem = extensionProblem(config)
  if (problem !== undefined) throw new ConfigError({ message: problem })
  const users =
    options.authenticate === undefined
      ? UserAuthenticator.layerUsers(config.users)
      : UserAuthenticator.fromFunction(options.authenticate)
  const runtime = ManagedRuntime.make(
    AuthorizationServer.layer({ ...options, warn: () => undefined }).pipe(
      Layer.provideMerge(Layer.merge(storageLayer(options.storage), users)),
      Layer.provideMerge(Layer.succeed(StorageObserver)(options.onStorageOperation)),
      Layer.provideMerge(Layer.succeed(SecurityEvents)(options.onSecurityEvent)),
      Layer.provide(options.tracing ?? Layer.empty),
    ),
  )
  const run = <A>(effect: Effect.Effect<A, StorageError, AuthorizationServer | GrantStore>): Promise<A> =>
    runtime.runPromise(effect)
  const handler = (request: Request) => run(AuthorizationServer.use((s) => s.handle(request)))
  let allow: ((pathname: string) => string | undefined) | undefined
  const ready = () =>
    run(
      AuthorizationServer.useSync((s) => {
        allow = s.allow
      }),
    )
  return {
    issuer: config.issuer,
    metadata: Metadata.document(config),
    handler,
    ready,
    allow: (pathname) => allow?.(pathname),
    listen: async (listenOptions = {}) => {
      await ready()
      return NodeServer.listen(handler, { publicUrl: config.issuerUrl, allow: (p) => allow?.(p), ...listenOptions })
    },
    listConsents: (subject) => run(GrantStore.use((g) => g.listConsents(subject))),
    revokeConsent: (subject, clientId, resource) =>
      run(GrantStore.use((g) => g.revokeConsent(subject, clientId, resource))),
    rotateSigningKey: () => run(AuthorizationServer.use((s) => s.rotateSigningKey)),
    readiness: () => runtime.runPromise(readiness).catch((): Readiness => UNREADY),
    close: () => runtime.dispose(),
  }
}
