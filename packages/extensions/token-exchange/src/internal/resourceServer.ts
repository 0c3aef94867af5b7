/**
 * The MCP server's side of token exchange (RFC 8693): it exchanges the token its user presented, at the authorization
 * server that issued it, for a token of its own for a downstream API, and calls that API with it. The user's token
 * leaves the server only as the `subject_token` of that exchange.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html | RFC 8693}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 */
import {
  Bytes,
  ClientAuth,
  Grant,
  Metadata,
  Options,
  Passthrough,
  SecureUrl,
  TokenExchange,
  TokenResponse,
  WellKnown,
  type Wire,
} from "@keyway/core"
import type { ProtectedResource } from "@keyway/resource-server"
import { UpstreamApi } from "@keyway/resource-server"
import { Cache, Cause, Clock, Context, Duration, Effect, Exit, Layer, Result, Schema } from "effect"
import { importJWK, type JWK, SignJWT } from "jose"
import { z } from "zod"

/**
 * A private key for `private_key_jwt`: a `CryptoKey` or a private JWK.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 */
export interface PrivateKeyOption {
  readonly key: CryptoKey | JWK
  /** The key ID sent as `kid`; the JWK's `kid` when omitted. */
  readonly kid?: string
  /** The JWS algorithm (asymmetric only); required unless the JWK names it in `alg`. */
  readonly alg?: string
}

/**
 * Options of {@link createTokenExchange} and {@link OnBehalfOf.layer}. The MCP server is a confidential client of the
 * authorization servers that issue its users' tokens: give exactly one of `clientSecret` and `privateKey`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export interface TokenExchangeOptions {
  /** The MCP server's client ID at the authorization server. */
  readonly clientId: string
  /** The client secret, for `client_secret_basic` or `client_secret_post`. */
  readonly clientSecret?: string
  /** How the secret is sent; `client_secret_basic` by default. Only with `clientSecret`. */
  readonly authMethod?: ClientAuth.SecretMethod
  /** The private key, for `private_key_jwt` (RFC 7523 §2.2). */
  readonly privateKey?: PrivateKeyOption
  /** Stop using a cached exchanged token this many seconds before it expires. Default 30. */
  readonly renewBeforeSeconds?: number
  /** The most exchanged tokens kept (one per inbound token, resource and scope). Default 10 000. */
  readonly maxEntries?: number
  /** The fetch used for discovery, the exchange and the downstream calls; the global one by default. */
  readonly fetch?: typeof globalThis.fetch
}

/** What the exchanged token is for: the downstream API's resource URI (RFC 8707) and, optionally, the scope. */
export interface Target {
  readonly resource: string
  readonly scope?: string
}

/** The inbound authentication (the resource server's `Authenticated`): the verified token and the token itself. */
export type Inbound = ProtectedResource.Authenticated

/**
 * A token obtained by exchange.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.2.1 | RFC 8693 §2.2.1}
 */
export interface ExchangedToken {
  readonly accessToken: string
  /** Always `Bearer`: another token type is refused. */
  readonly tokenType: string
  /** The authorization server that issued it (the inbound token's issuer). */
  readonly issuer: string
  /** The granted scope, when the response says. */
  readonly scope?: string
  /** Its lifetime in seconds, when the response says. */
  readonly expiresIn?: number
}

/**
 * Why a token exchange did not give a usable token:
 * - `no-issuer`: the inbound token names no issuer to exchange it at.
 * - `discovery`: the issuer's metadata (RFC 8414) was not found, not usable, or names an insecure token endpoint.
 * - `grant-unsupported`: the metadata lists `grant_types_supported` without the token exchange grant.
 * - `client-authentication`: none of the server's `token_endpoint_auth_methods_supported` fits the credentials.
 * - `unreachable`: the token endpoint could not be reached.
 * - `refused`: the token endpoint answered an OAuth error (RFC 6749 §5.2): `status`, `error`, `description`.
 * - `unsupported-token-type`: the token is not a Bearer token (DPoP-bound tokens are not supported here).
 * - `invalid-response`: the answer is not a usable token response (RFC 8693 §2.2.1).
 */
export const ExchangeFailureReason = Schema.Literals([
  "no-issuer",
  "discovery",
  "grant-unsupported",
  "client-authentication",
  "unreachable",
  "refused",
  "unsupported-token-type",
  "invalid-response",
])

/** @see {@link ExchangeFailureReason} */
export type ExchangeFailureReason = typeof ExchangeFailureReason.Type

/**
 * The token exchange failed; `status`, `error` and `description` are the token endpoint's when it answered.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.2.2 | RFC 8693 §2.2.2}
 */
export class TokenExchangeFailed extends Schema.TaggedError<TokenExchangeFailed>()("TokenExchangeFailed", {
  reason: ExchangeFailureReason,
  issuer: Schema.String,
  status: Schema.optional(Schema.Number),
  error: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  message: Schema.String,
}) {}

/**
 * The downstream request is for another origin than the target resource's: the exchanged token is not sent there.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export class OriginRefused extends Schema.TaggedError<OriginRefused>()("OriginRefused", {
  url: Schema.String,
  resource: Schema.String,
  message: Schema.String,
}) {}

/** The failures of a call to a downstream API (a network failure of the call itself rejects as fetch does). */
export type DownstreamError = TokenExchangeFailed | OriginRefused | UpstreamApi.TokenPassthroughRefused

/** A fetch for one downstream API, sending the exchanged token. */
export type DownstreamFetch = (input: string | URL, init?: RequestInit) => Promise<Response>

/**
 * The token exchange of an MCP server, for both faces: what {@link createTokenExchange} returns and what the
 * {@link OnBehalfOf} service provides.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2 | RFC 8693 §2}
 */
export interface OnBehalfOfService {
  /**
   * The token for `target` exchanged for `auth`'s token: cached per inbound token, resource and scope until
   * `renewBeforeSeconds` before it expires; concurrent first calls share one exchange; failures are not kept.
   */
  readonly tokenEffect: (auth: Inbound, target: Target) => Effect.Effect<ExchangedToken, TokenExchangeFailed>
  /**
   * Sends a request to the target's API with the exchanged token as `Authorization: Bearer`. Refused, with nothing
   * sent, for a URL at another origin than `target.resource` ({@link OriginRefused}), a caller-supplied Authorization
   * header, or the inbound token anywhere in the request (`TokenPassthroughRefused` of `@keyway/resource-server`). Redirects
   * are not followed unless `init.redirect` says so.
   */
  readonly fetchEffect: (
    auth: Inbound,
    target: Target,
    input: string | URL,
    init?: RequestInit,
  ) => Effect.Effect<Response, DownstreamError>
  /** {@link OnBehalfOfService.tokenEffect}'s access token, as a Promise. */
  readonly token: (auth: Inbound, target: Target) => Promise<string>
  /** A fetch for the target's API on `auth`'s user's behalf ({@link OnBehalfOfService.fetchEffect}). */
  readonly onBehalfOf: (auth: Inbound, target: Target) => DownstreamFetch
}

const FACTORY = "createTokenExchange"
const DEFAULT_RENEW_BEFORE_SECONDS = 30
const DEFAULT_MAX_ENTRIES = 10_000
/** Issuers whose metadata is kept, and for how long: metadata changes rarely, a failure is retried at once. */
const METADATA_ENTRIES = 64
const METADATA_TTL = Duration.hours(1)

const optionsSchema = z
  .object({
    clientId: z.string().min(1),
    clientSecret: z.string().min(1).optional(),
    authMethod: z.enum(["client_secret_basic", "client_secret_post"]).optional(),
    privateKey: z
      .object({
        key: z.custom<CryptoKey | JWK>((v) => typeof v === "object" && v !== null, "must be a CryptoKey or a JWK"),
        kid: z.string().min(1).optional(),
        alg: z.string().min(1).optional(),
      })
      .strict()
      .optional(),
    renewBeforeSeconds: z.number().int().nonnegative().optional(),
    maxEntries: z.number().int().positive().optional(),
    fetch: z.custom<typeof globalThis.fetch>((v) => typeof v === "function", "must be a function").optional(),
  })
  .strict()

const isCryptoKey = (key: CryptoKey | JWK): key is CryptoKey =>
  typeof CryptoKey !== "undefined" && key instanceof CryptoKey

/** The checks zod cannot say in one field: exactly one credential, and a signing algorithm that can be used. */
const checkOptions = (options: TokenExchangeOptions): void => {
  Options.check(FACTORY, optionsSchema, options)
  const { clientSecret, privateKey } = options
  if ((clientSecret === undefined) === (privateKey === undefined)) {
    throw Options.invalid(FACTORY, "", "give exactly one of clientSecret and privateKey")
  }
  if (options.authMethod !== undefined && clientSecret === undefined) {
    throw Options.invalid(FACTORY, "authMethod", "is for clientSecret only")
  }
  if (privateKey === undefined) return
  const alg = privateKey.alg ?? (isCryptoKey(privateKey.key) ? undefined : privateKey.key.alg)
  if (alg === undefined) throw Options.invalid(FACTORY, "privateKey.alg", "is required unless the JWK names its alg")
  if (!Grant.ASYMMETRIC_ALGORITHMS.includes(alg)) {
    throw Options.invalid(FACTORY, "privateKey.alg", `${alg} is not an asymmetric JWS algorithm`)
  }
}

const failed = (reason: ExchangeFailureReason, issuer: string, message: string) =>
  new TokenExchangeFailed({ reason, issuer, message })

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** The issuer's metadata: the first well-known location that answers 200, processed by core (exact issuer). */
const discover = (doFetch: typeof globalThis.fetch) =>
  Effect.fnUntraced(function* (issuer: string) {
    const locations = yield* Effect.try({
      try: () => WellKnown.authorizationServerMetadataUrls(issuer),
      catch: () => failed("discovery", issuer, `the issuer ${issuer} is not a URL metadata can be discovered at`),
    })
    for (const location of locations) {
      const response = yield* Effect.tryPromise({
        try: () => doFetch(location.url, { headers: { accept: "application/json" }, redirect: "manual" }),
        catch: (error) =>
          failed("discovery", issuer, `the metadata of ${issuer} could not be read: ${describe(error)}`),
      })
      if (response.status !== 200) {
        yield* Effect.promise(async () => response.body?.cancel().catch(() => undefined))
        continue
      }
      const json: unknown = yield* Effect.promise(() => response.json().catch(() => undefined))
      const processed = Metadata.processAuthorizationServerMetadata(issuer, location.url, json, {
        pkce: false,
        endpoints: ["token_endpoint"],
      })
      if (Result.isFailure(processed)) return yield* failed("discovery", issuer, processed.failure.message)
      const metadata = processed.success
      const grants = metadata.grant_types_supported
      if (grants !== undefined && !grants.includes(Grant.TOKEN_EXCHANGE)) {
        return yield* failed(
          "grant-unsupported",
          issuer,
          `the authorization server ${issuer} does not list ${Grant.TOKEN_EXCHANGE} in grant_types_supported`,
        )
      }
      const tokenEndpoint = metadata.token_endpoint as string
      if (!SecureUrl.isAllowed(tokenEndpoint, { httpLoopback: true })) {
        return yield* failed(
          "discovery",
          issuer,
          `the token endpoint ${tokenEndpoint} of ${issuer} is neither https nor loopback http; the token is not sent there`,
        )
      }
      return metadata
    }
    return yield* failed("discovery", issuer, `no authorization server metadata found for ${issuer}`)
  })

/** The SHA-256 of the inbound token, base64url: the cache key never holds the token itself. */
const digest = (token: string): Effect.Effect<string> =>
  Effect.promise(() =>
    crypto.subtle
      .digest("SHA-256", new TextEncoder().encode(token))
      .then((hash) => Bytes.base64UrlEncode(new Uint8Array(hash))),
  )

/** The request being looked up, given to the cache's lookup at `Cache.get` (never part of its key). */
class Pending extends Context.Service<Pending, { readonly auth: Inbound; readonly target: Target }>()(
  "@keyway/ext-token-exchange/internal/Pending",
) {}

interface Cached {
  readonly token: ExchangedToken
  /** How long the token may be used from now, `renewBeforeSeconds` taken off. */
  readonly lifetimeMs: number
}

/** Builds the service; fails with `InvalidOptions` for options it cannot work with. */
const make = (options: TokenExchangeOptions): Effect.Effect<OnBehalfOfService, Options.InvalidOptions> =>
  Effect.gen(function* () {
    yield* Effect.try({ try: () => checkOptions(options), catch: (error) => error as Options.InvalidOptions })
    const doFetch = options.fetch ?? globalThis.fetch
    const renewMs = (options.renewBeforeSeconds ?? DEFAULT_RENEW_BEFORE_SECONDS) * 1000
    const { privateKey } = options
    // Importing a JWK is asynchronous: done once, on the first exchange that signs.
    const signingKey =
      privateKey === undefined
        ? undefined
        : yield* Effect.cached(
            Effect.tryPromise({
              try: async () => {
                const alg = (privateKey.alg ?? (privateKey.key as JWK).alg) as string
                const kid = privateKey.kid ?? (isCryptoKey(privateKey.key) ? undefined : privateKey.key.kid)
                const key = isCryptoKey(privateKey.key) ? privateKey.key : await importJWK(privateKey.key, alg)
                return { key, alg, kid }
              },
              catch: (error) => `privateKey cannot be used: ${describe(error)}`,
            }),
          )
    const alg = privateKey === undefined ? undefined : ((privateKey.alg ?? (privateKey.key as JWK).alg) as string)

    const metadata = yield* Cache.makeWith(discover(doFetch), {
      capacity: METADATA_ENTRIES,
      timeToLive: (exit) => (Exit.isSuccess(exit) ? METADATA_TTL : Duration.zero),
    })

    /** Client authentication by what the server lists (core `ClientAuth`), the assertion signed here. */
    const authenticate = Effect.fnUntraced(function* (
      issuer: string,
      server: Wire.AuthorizationServerMetadata,
      headers: Headers,
      body: URLSearchParams,
    ) {
      const listed = server.token_endpoint_auth_methods_supported
      const method = ClientAuth.chooseMethod(listed, {
        secret: options.clientSecret !== undefined,
        privateKey: signingKey !== undefined,
        method: options.authMethod,
      })
      const algs = server.token_endpoint_auth_signing_alg_values_supported
      if (method === undefined || (alg !== undefined && algs !== undefined && !algs.includes(alg))) {
        const has = alg === undefined ? (options.authMethod ?? "a client secret") : `private_key_jwt (${alg})`
        return yield* failed(
          "client-authentication",
          issuer,
          `the authorization server ${issuer} accepts ${(listed ?? ["client_secret_basic"]).join(", ")}${alg === undefined || algs === undefined ? "" : ` (signed with ${algs.join(", ")})`} at its token endpoint, but ${options.clientId} authenticates with ${has}`,
        )
      }
      if (method === "private_key_jwt" && signingKey !== undefined) {
        const key = yield* signingKey.pipe(
          Effect.mapError((message) => failed("client-authentication", issuer, message)),
        )
        const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const claims = ClientAuth.clientAssertionClaims(options.clientId, issuer, now, crypto.randomUUID())
        const assertion = yield* Effect.promise(() =>
          new SignJWT(claims)
            .setProtectedHeader({ alg: key.alg, ...(key.kid === undefined ? {} : { kid: key.kid }) })
            .sign(key.key),
        )
        ClientAuth.addTo(
          ClientAuth.apply("private_key_jwt", { clientId: options.clientId, clientAssertion: assertion }),
          headers,
          body,
        )
        return
      }
      ClientAuth.addTo(
        ClientAuth.apply(method as ClientAuth.SecretMethod, {
          clientId: options.clientId,
          clientSecret: options.clientSecret as string,
        }),
        headers,
        body,
      )
    })

    const exchange = Effect.fnUntraced(function* (_key: string) {
      const { auth, target } = yield* Pending
      const issuer = auth.token.issuer
      if (issuer === undefined) {
        return yield* failed("no-issuer", "", "the inbound token names no issuer; it cannot be exchanged")
      }
      const server = yield* Cache.get(metadata, issuer)
      const tokenEndpoint = server.token_endpoint as string
      const body = new URLSearchParams(
        TokenExchange.request({
          subjectToken: auth.accessToken,
          subjectTokenType: Grant.ACCESS_TOKEN_TYPE,
          resource: target.resource,
          scope: target.scope,
        }),
      )
      const headers = new Headers({ "content-type": "application/x-www-form-urlencoded", accept: "application/json" })
      yield* authenticate(issuer, server, headers, body)
      const response = yield* Effect.tryPromise({
        try: () => doFetch(tokenEndpoint, { method: "POST", headers, body, redirect: "manual" }),
        catch: (error) =>
          failed("unreachable", issuer, `the token endpoint ${tokenEndpoint} could not be reached: ${describe(error)}`),
      })
      const json: unknown = yield* Effect.promise(() => response.json().catch(() => undefined))
      const processed = TokenResponse.process(tokenEndpoint, response.status, json, {
        issuedTokenType: Grant.ACCESS_TOKEN_TYPE,
      })
      if (Result.isFailure(processed)) {
        const problem = processed.failure
        return yield* new TokenExchangeFailed({
          reason:
            problem.reason === "error-response"
              ? "refused"
              : problem.reason === "unsupported-token-type"
                ? "unsupported-token-type"
                : "invalid-response",
          issuer,
          status: problem.status,
          ...(problem.error === undefined ? {} : { error: problem.error }),
          ...(problem.description === undefined ? {} : { description: problem.description }),
          message: problem.message,
        })
      }
      const answer = processed.success
      const now = yield* Clock.currentTimeMillis
      // Never past the inbound token's own expiry: the exchanged token stands for it.
      const untilMs = Math.min(
        answer.expires_in === undefined ? Number.POSITIVE_INFINITY : now + answer.expires_in * 1000,
        auth.token.expiresAt === undefined ? Number.POSITIVE_INFINITY : auth.token.expiresAt * 1000,
      )
      const token: ExchangedToken = {
        accessToken: answer.access_token,
        tokenType: "Bearer",
        issuer,
        ...(answer.scope === undefined ? {} : { scope: answer.scope }),
        ...(answer.expires_in === undefined ? {} : { expiresIn: answer.expires_in }),
      }
      return { token, lifetimeMs: Number.isFinite(untilMs) ? Math.max(0, untilMs - now - renewMs) : 0 } satisfies Cached
    })

    const tokens = yield* Cache.makeWith(exchange, {
      capacity: options.maxEntries ?? DEFAULT_MAX_ENTRIES,
      timeToLive: (exit) => (Exit.isSuccess(exit) ? Duration.millis(exit.value.lifetimeMs) : Duration.zero),
      requireServicesAt: "lookup",
    })

    const tokenEffect = (auth: Inbound, target: Target): Effect.Effect<ExchangedToken, TokenExchangeFailed> =>
      Effect.gen(function* () {
        const hash = yield* digest(auth.accessToken)
        const key = `${hash} ${target.resource} ${target.scope ?? ""}`
        const cached = yield* Cache.get(tokens, key).pipe(Effect.provideService(Pending, { auth, target }))
        return cached.token
      })

    const fetchEffect = (
      auth: Inbound,
      target: Target,
      input: string | URL,
      init: RequestInit = {},
    ): Effect.Effect<Response, DownstreamError> =>
      Effect.gen(function* () {
        const url = URL.parse(String(input))
        const origin = URL.parse(target.resource)?.origin
        if (url === null || origin === undefined || url.origin !== origin) {
          return yield* new OriginRefused({
            url: String(input),
            resource: target.resource,
            message: `Refusing to send the token for ${target.resource} to ${String(input)}: not at its origin`,
          })
        }
        const headers = new Headers(init.headers)
        if (headers.has("authorization"))
          return yield* new UpstreamApi.TokenPassthroughRefused({ where: "authorization" })
        const where = Passthrough.find(auth.accessToken, { url, headers, body: init.body })
        if (where !== undefined) return yield* new UpstreamApi.TokenPassthroughRefused({ where })
        const token = yield* tokenEffect(auth, target)
        if (token.accessToken === auth.accessToken) {
          return yield* new UpstreamApi.TokenPassthroughRefused({ where: "authorization" })
        }
        headers.set("authorization", `Bearer ${token.accessToken}`)
        return yield* Effect.promise(() => doFetch(url, { redirect: "manual", ...init, headers }))
      })

    // A failure rejects with the typed error itself (or, for a failed downstream call, what fetch threw).
    const run = <A>(effect: Effect.Effect<A, unknown>): Promise<A> =>
      Effect.runPromiseExit(effect).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        throw Cause.squash(exit.cause)
      })

    return {
      tokenEffect,
      fetchEffect,
      token: (auth, target) => run(Effect.map(tokenEffect(auth, target), (t) => t.accessToken)),
      onBehalfOf: (auth, target) => (input, init) => run(fetchEffect(auth, target, input, init)),
    } satisfies OnBehalfOfService
  })

/**
 * The token exchange of an MCP server as an Effect service. Build it with {@link OnBehalfOf.layer}; cache lifetimes
 * follow the `Clock` of the effects that use it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2 | RFC 8693 §2}
 */
export class OnBehalfOf extends Context.Service<OnBehalfOf, OnBehalfOfService>()(
  "@keyway/ext-token-exchange/OnBehalfOf",
) {
  /** The service from its options; fails with core's `Options.InvalidOptions` for options it cannot work with. */
  static readonly layer = (options: TokenExchangeOptions): Layer.Layer<OnBehalfOf, Options.InvalidOptions> =>
    Layer.effect(OnBehalfOf, make(options))
}

/**
 * The token exchange of an MCP server (plain face): `onBehalfOf(auth, target)` is a fetch for a downstream API that
 * sends a token exchanged for the user's (RFC 8693 §2), `token(auth, target)` the token itself. The authorization
 * server is the inbound token's issuer, found by its metadata (RFC 8414). Throws core's `Options.InvalidOptions` for
 * options it cannot work with.
 *
 * @example
 * ```ts
 * const exchange = createTokenExchange({ clientId: "notes-server", clientSecret })
 * const calendar = exchange.onBehalfOf(auth, { resource: "https://calendar.example.com/api", scope: "calendar:read" })
 * const response = await calendar("https://calendar.example.com/api/events")
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2 | RFC 8693 §2}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 */
export const createTokenExchange = (options: TokenExchangeOptions): OnBehalfOfService => {
  const exit = Effect.runSyncExit(make(options))
  if (Exit.isSuccess(exit)) return exit.value
  throw Cause.squash(exit.cause)
}
