/**
 * Resolves a URL-formatted `client_id` to a client by fetching its client ID metadata document through the SSRF
 * guard ({@link OutboundFetch}), validating it, and caching it per HTTP caching rules within configured bounds.
 *
 * Order of checks in {@link ClientMetadataResolverService.resolve}: the URL's shape (https, a path, no fragment,
 * userinfo or dot segments), the trust policy (a denied host is never fetched), the cache, then one fetch with no
 * redirects, then the document rules. Failures are `invalid_request` for a malformed `client_id` and
 * `invalid_client` for everything else; the authorization endpoint shows them to the user and never redirects.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5 | draft-ietf-oauth-client-id-metadata-document-02 §5 (client information discovery)}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 * @module
 */
import { Jwk, OAuthError, SecureUrl, Wire } from "@keyway/core"
import { Cause, Context, Deferred, Effect, type Exit, Layer, Result, Schema } from "effect"
import { OutboundFetch, type OutboundFetchService, RefusalReason } from "../outbound/OutboundFetch.js"
import type { ClientMetadata, JwkSet, TokenEndpointAuthMethod } from "../storage/Storage.js"
import * as CacheControl from "./CacheControl.js"
import { ClientTrustPolicy, type TrustDecision } from "./TrustPolicy.js"

/**
 * The OAuth error codes a client metadata failure maps to.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export const FailureCode = Schema.Literals(["invalid_client", "invalid_request"])
/** @see {@link FailureCode} */
export type FailureCode = typeof FailureCode.Type

/**
 * What failed:
 * - `client-id`: the `client_id` is not a valid client ID URL (`invalid_request`);
 * - `untrusted`: the trust policy refuses its host (`invalid_client`);
 * - `fetch`: the document could not be fetched; `fetch` holds the guard's reason (`invalid_client`);
 * - `document`: the document breaks a rule; `path` names the field (`invalid_client`).
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.1 | draft-ietf-oauth-client-id-metadata-document-02 §5.1}
 */
export const FailureReason = Schema.Literals(["client-id", "untrusted", "fetch", "document"])
/** @see {@link FailureReason} */
export type FailureReason = typeof FailureReason.Type

/**
 * A client ID metadata document could not be used. `toOAuthError()` gives the OAuth error to show the user.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2.1 | RFC 6749 §4.1.2.1 (no redirect to an unvalidated URI)}
 */
export class ClientMetadataError extends Schema.TaggedError<ClientMetadataError>()("ClientMetadataError", {
  error: FailureCode,
  reason: FailureReason,
  client_id: Schema.String,
  message: Schema.String,
  /** The guard's reason, when `reason` is `fetch`. */
  fetch: Schema.optionalKey(RefusalReason),
  /** The offending document field, when `reason` is `document`. */
  path: Schema.optionalKey(Schema.String),
}) {
  /** The OAuth error (`invalid_client` or `invalid_request`) with this message as its description. */
  toOAuthError(): OAuthError.OAuthError {
    return OAuthError.make(this.error, this.message)
  }
}

/**
 * A resolved client: the record to use (compatible with the storage `ClientMetadata`, origin
 * `metadata-document`, `expires_at` = end of its cache lifetime), the validated document, the trust decision for
 * the consent page, and whether every redirect URI is on loopback (the consent page warns about those).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export interface ResolvedClient {
  readonly client: ClientMetadata
  readonly document: Wire.ClientIdMetadataDocument
  readonly trust: TrustDecision
  readonly loopbackOnly: boolean
}

/**
 * Options of {@link ClientMetadataResolver.layer}.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.2 | draft-ietf-oauth-client-id-metadata-document-02 §5.2}
 */
export interface ResolverOptions {
  /** Bounds on reuse of a fetched document (seconds). Defaults {@link CacheControl.defaultBounds}: 300 and 86400. */
  readonly minCacheSeconds?: number
  readonly maxCacheSeconds?: number
  /**
   * After a failed fetch or an invalid document, the same client ID answers with the same error for this many
   * seconds without fetching again, so a request flood cannot make the server hammer a host. Default 5; 0 turns it
   * off. (The draft forbids caching error responses as client metadata; this only delays the next attempt.)
   */
  readonly failureBackoffSeconds?: number
  /** Most client IDs kept (documents and back-offs); the oldest are dropped first. Default 1000. */
  readonly maxEntries?: number
  /**
   * Largest document read, in bytes; defaults to the {@link OutboundFetch} cap (64 KiB). The draft recommends reading
   * at most 5 kilobytes (§8.7).
   */
  readonly maxDocumentBytes?: number
  /** Longest accepted `client_id` URL. Default 2048. */
  readonly maxClientIdLength?: number
  /**
   * Development only: accept `http://localhost`, `http://127.x.x.x` and `http://[::1]` client IDs. The
   * {@link OutboundFetch} layer must also allow insecure loopback to fetch them. Off by default; a warning is logged
   * when on.
   */
  readonly allowHttpLoopbackClientIds?: boolean
  /**
   * After a `jwks_uri` key set was fetched, an assertion naming an unknown `kid` makes the server fetch the set again
   * (the client may have rotated its keys), but not before this many seconds have passed since the last fetch, so
   * assertions with made-up key ids cannot make the server hammer the client's host. Default 30; 0 refetches on every
   * unknown `kid`.
   */
  readonly jwksRefetchCooldownSeconds?: number
}

/**
 * The shape of the {@link ClientMetadataResolver} service.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5 | draft-ietf-oauth-client-id-metadata-document-02 §5}
 */
export interface ClientMetadataResolverService {
  /**
   * Resolves a URL `client_id`. `now` is seconds since the epoch (as in the storage services); it stamps
   * `client_id_issued_at` and decides cache expiry.
   */
  readonly resolve: (clientId: string, now: number) => Effect.Effect<ResolvedClient, ClientMetadataError>
  /** Drops any cached document or back-off for a client ID. */
  readonly forget: (clientId: string) => Effect.Effect<void>
  /**
   * The public keys at a `private_key_jwt` client's `jwks_uri`, fetched through the same SSRF guard as documents and
   * cached per HTTP caching within the same bounds. `refresh` asks for a fresh copy (an assertion named a `kid` the
   * cached set lacks); it is honoured at most once per {@link ResolverOptions.jwksRefetchCooldownSeconds}.
   * Failures are `invalid_client` with reason `fetch` (the guard refused or the fetch failed) or `document` (not a
   * JWK Set of public keys).
   *
   * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-6.2 | draft-ietf-oauth-client-id-metadata-document-02 §6.2}
   * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2 (jwks_uri)}
   */
  readonly jwks: (
    clientId: string,
    jwksUri: string,
    now: number,
    options?: { readonly refresh?: boolean },
  ) => Effect.Effect<JwkSet, ClientMetadataError>
}

/**
 * Whether a `client_id` is meant as a client ID URL (starts with `https://`, or `http://` so that it earns a clear
 * error rather than "unknown client"). Check the client store first: pre-registered clients may have URL IDs too.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-7.1 | draft-ietf-oauth-client-id-metadata-document-02 §7.1}
 */
export const isClientIdUrl = (clientId: string): boolean => /^https?:\/\//i.test(clientId)

/**
 * Whether every redirect URI points at the user's own machine (loopback host), so the consent page should warn that
 * the client is a local application whose identity the server cannot check. False for an empty list.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3 | RFC 8252 §7.3 (loopback redirects)}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 (extra warning for localhost-only redirect URIs)}
 */
export const isLoopbackOnly = (redirectUris: ReadonlyArray<string>): boolean =>
  redirectUris.length > 0 &&
  redirectUris.every((uri) => {
    const parsed = URL.parse(uri)
    return (
      parsed !== null &&
      (parsed.protocol === "http:" || parsed.protocol === "https:") &&
      SecureUrl.isLoopbackHost(parsed.hostname)
    )
  })

const DOCUMENT = Wire.Documents.clientIdMetadataDocument

/** Redirect URI rules for documents: https, http on loopback, or a reverse-domain private-use scheme (RFC 8252 §7.1). */
const redirectUriProblem = (uri: string): string | undefined => {
  const parsed = URL.parse(uri)
  if (parsed === null) return "must be a URL"
  if (parsed.hash !== "" || uri.includes("#")) return "must not contain a fragment"
  if (parsed.protocol === "https:") return undefined
  if (parsed.protocol === "http:") {
    return SecureUrl.isLoopbackHost(parsed.hostname) ? undefined : "must use https unless its host is loopback"
  }
  if (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/i.test(parsed.protocol)) return undefined
  return "must use https, http on loopback, or a reverse-domain private-use scheme"
}

/** Rules beyond core's: redirect URIs, public keys only, known application types. */
const extraChecks = (doc: Wire.ClientIdMetadataDocument): Wire.InvalidDocument | undefined => {
  for (const [i, uri] of doc.redirect_uris.entries()) {
    const problem = redirectUriProblem(uri)
    if (problem !== undefined) return Wire.invalid(DOCUMENT, `redirect_uris.${i}`, problem)
  }
  for (const [i, key] of (doc.jwks?.keys ?? []).entries()) {
    if (typeof key.kty !== "string") return Wire.invalid(DOCUMENT, `jwks.keys.${i}.kty`, "is required")
    const secret = Jwk.findPrivateKeyMaterial(key)
    if (secret !== undefined) return Wire.invalid(DOCUMENT, `jwks.keys.${i}.${secret.path}`, secret.problem)
  }
  const type = doc.application_type
  if (type !== undefined && type !== "web" && type !== "native") {
    return Wire.invalid(DOCUMENT, "application_type", `must be "web" or "native", got "${type}"`)
  }
  return undefined
}

const toClient = (doc: Wire.ClientIdMetadataDocument, now: number, expiresAt: number): ClientMetadata => ({
  client_id: doc.client_id,
  client_id_issued_at: now,
  client_secret_expires_at: 0,
  redirect_uris: doc.redirect_uris,
  grant_types: doc.grant_types ?? ["authorization_code"],
  response_types: doc.response_types ?? ["code"],
  token_endpoint_auth_method: (doc.token_endpoint_auth_method ?? "none") as TokenEndpointAuthMethod,
  client_name: doc.client_name,
  ...(doc.client_uri === undefined ? {} : { client_uri: doc.client_uri }),
  ...(doc.logo_uri === undefined ? {} : { logo_uri: doc.logo_uri }),
  ...(doc.tos_uri === undefined ? {} : { tos_uri: doc.tos_uri }),
  ...(doc.policy_uri === undefined ? {} : { policy_uri: doc.policy_uri }),
  ...(doc.contacts === undefined ? {} : { contacts: doc.contacts }),
  ...(doc.scope === undefined ? {} : { scope: doc.scope }),
  // extraChecks has made sure every key has a string kty.
  ...(doc.jwks === undefined ? {} : { jwks: doc.jwks as unknown as JwkSet }),
  ...(doc.jwks_uri === undefined ? {} : { jwks_uri: doc.jwks_uri }),
  ...(doc.application_type === "web" || doc.application_type === "native"
    ? { application_type: doc.application_type }
    : {}),
  ...(doc.software_id === undefined ? {} : { software_id: doc.software_id }),
  ...(doc.software_version === undefined ? {} : { software_version: doc.software_version }),
  origin: "metadata-document",
  expires_at: expiresAt,
})

type Entry =
  | { readonly _tag: "ok"; readonly client: ClientMetadata; readonly document: Wire.ClientIdMetadataDocument }
  | { readonly _tag: "failed"; readonly error: ClientMetadataError; readonly until: number }

type Fetched = { readonly client: ClientMetadata; readonly document: Wire.ClientIdMetadataDocument }

interface Settings {
  readonly bounds: CacheControl.Bounds
  readonly failureBackoffSeconds: number
  readonly maxEntries: number
  readonly maxClientIdLength: number
  readonly maxDocumentBytes: number | undefined
  readonly allowHttpLoopbackClientIds: boolean
  readonly jwksRefetchCooldownSeconds: number
}

/**
 * Checks the shape of a client ID URL with core's document rules (so there is one definition of a valid client ID
 * URL), returning the URL to validate documents against.
 */
const checkClientId = (clientId: string, settings: Settings): Result.Result<string, ClientMetadataError> => {
  const fail = (problem: string) =>
    Result.fail(
      new ClientMetadataError({
        error: "invalid_request",
        reason: "client-id",
        client_id: clientId,
        message: `client_id is not a valid client ID metadata document URL: ${problem}`,
      }),
    )
  if (clientId.length > settings.maxClientIdLength) {
    return fail(`must not be longer than ${settings.maxClientIdLength} characters`)
  }
  const candidate = developmentForm(clientId, settings) ?? clientId
  const probe = { client_id: candidate, client_name: "-", redirect_uris: ["https://client.invalid/cb"] }
  const checked = Wire.validateClientIdMetadataDocument(probe, candidate)
  if (Result.isFailure(checked)) {
    const prefix = `${DOCUMENT}: "client_id" `
    const message = checked.failure.message
    return fail(message.startsWith(prefix) ? message.slice(prefix.length) : message)
  }
  return Result.succeed(candidate)
}

/** Under the development option, an http loopback client ID is checked as its https twin. */
const developmentForm = (clientId: string, settings: Settings): string | undefined => {
  if (!settings.allowHttpLoopbackClientIds || !/^http:\/\//i.test(clientId)) return undefined
  const parsed = URL.parse(clientId)
  if (parsed === null || !SecureUrl.isLoopbackHost(parsed.hostname)) return undefined
  return `https://${clientId.slice("http://".length)}`
}

const validateDocument = (
  json: unknown,
  clientId: string,
  checkedAs: string,
): Result.Result<Wire.ClientIdMetadataDocument, Wire.InvalidDocument> => {
  const isObject = typeof json === "object" && json !== null && !Array.isArray(json)
  if (checkedAs === clientId || !isObject || (json as { client_id?: unknown }).client_id !== clientId) {
    return Wire.validateClientIdMetadataDocument(json, clientId)
  }
  // Development http client ID: validate the https twin, then give the document its real client_id back.
  const twin = Wire.validateClientIdMetadataDocument({ ...json, client_id: checkedAs }, checkedAs)
  return Result.map(twin, (doc) => ({ ...doc, client_id: clientId }))
}

type JwksEntry =
  | { readonly _tag: "ok"; readonly keys: JwkSet; readonly fetchedAt: number; readonly expiresAt: number }
  | { readonly _tag: "failed"; readonly error: ClientMetadataError; readonly until: number }

/** A JWK Set of public keys, each with a string `kty`; otherwise the field at fault and why. */
const jwkSetProblem = (json: unknown): { readonly path: string; readonly problem: string } | undefined => {
  const keys = typeof json === "object" && json !== null ? (json as { keys?: unknown }).keys : undefined
  if (!Array.isArray(keys)) return { path: "keys", problem: "must be an array of keys" }
  for (const [i, key] of keys.entries()) {
    if (typeof key !== "object" || key === null || typeof (key as { kty?: unknown }).kty !== "string") {
      return { path: `keys.${i}.kty`, problem: "is required" }
    }
    const secret = Jwk.findPrivateKeyMaterial(key)
    if (secret !== undefined) return { path: `keys.${i}.${secret.path}`, problem: secret.problem }
  }
  return undefined
}

/** The `jwks_uri` cache: one fetch per URL at a time, HTTP freshness within bounds, back-off after failures. */
const makeJwksCache = (outbound: OutboundFetchService, settings: Settings) => {
  const entries = new Map<string, JwksEntry>()
  const inflight = new Map<string, Deferred.Deferred<JwkSet, ClientMetadataError>>()
  const remember = (uri: string, entry: JwksEntry) => {
    entries.delete(uri)
    while (entries.size >= settings.maxEntries) {
      const oldest = entries.keys().next()
      if (oldest.done === true) break
      entries.delete(oldest.value)
    }
    entries.set(uri, entry)
  }
  const fetchKeys = Effect.fnUntraced(function* (clientId: string, uri: string, now: number) {
    const response = yield* outbound.fetchJson(uri, { accept: "application/jwk-set+json, application/json" }).pipe(
      Effect.mapError(
        (refused) =>
          new ClientMetadataError({
            error: "invalid_client",
            reason: "fetch",
            client_id: clientId,
            fetch: refused.reason,
            message: `the client's jwks_uri could not be fetched: ${refused.message}`,
          }),
      ),
    )
    const problem = jwkSetProblem(response.json)
    if (problem !== undefined) {
      return yield* new ClientMetadataError({
        error: "invalid_client",
        reason: "document",
        client_id: clientId,
        path: `jwks_uri.${problem.path}`,
        message: `the client's jwks_uri did not return a JWK Set of public keys: '${problem.path}' ${problem.problem}`,
      })
    }
    const keys = response.json as JwkSet
    remember(uri, {
      _tag: "ok",
      keys,
      fetchedAt: now,
      expiresAt: now + CacheControl.lifetime(response.headers, now, settings.bounds),
    })
    return keys
  })
  const load = (clientId: string, uri: string, now: number): Effect.Effect<JwkSet, ClientMetadataError> =>
    Effect.suspend(() => {
      const running = inflight.get(uri)
      if (running !== undefined) return Deferred.await(running)
      const deferred = Deferred.makeUnsafe<JwkSet, ClientMetadataError>()
      inflight.set(uri, deferred)
      const settle = (exit: Exit.Exit<JwkSet, ClientMetadataError>) =>
        Effect.suspend(() => {
          inflight.delete(uri)
          if (exit._tag === "Failure" && settings.failureBackoffSeconds > 0) {
            const error = Cause.findError(exit.cause)
            if (Result.isSuccess(error)) {
              remember(uri, { _tag: "failed", error: error.success, until: now + settings.failureBackoffSeconds })
            }
          }
          return Deferred.done(deferred, exit)
        })
      return fetchKeys(clientId, uri, now).pipe(
        Effect.exit,
        Effect.flatMap(settle),
        Effect.forkDetach,
        Effect.andThen(Deferred.await(deferred)),
      )
    })
  return Effect.fn("ClientMetadataResolver.jwks")(function* (
    clientId: string,
    jwksUri: string,
    now: number,
    options?: { readonly refresh?: boolean },
  ) {
    const cached = entries.get(jwksUri)
    if (cached?._tag === "failed" && now < cached.until) {
      // The back-off entry may come from another client naming the same URL: answer in this client's name.
      const e = cached.error
      return yield* new ClientMetadataError({
        error: e.error,
        reason: e.reason,
        client_id: clientId,
        message: e.message,
        ...(e.fetch === undefined ? {} : { fetch: e.fetch }),
        ...(e.path === undefined ? {} : { path: e.path }),
      })
    }
    if (cached?._tag === "ok" && now < cached.expiresAt) {
      const mayRefetch = now - cached.fetchedAt >= settings.jwksRefetchCooldownSeconds
      if (options?.refresh !== true || !mayRefetch) return cached.keys
    }
    return yield* load(clientId, jwksUri, now)
  })
}

/**
 * Resolves client ID metadata documents.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5 | draft-ietf-oauth-client-id-metadata-document-02 §5}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export class ClientMetadataResolver extends Context.Service<ClientMetadataResolver, ClientMetadataResolverService>()(
  "@keyway/authorization-server/ClientMetadataResolver",
) {
  /**
   * The resolver, over an {@link OutboundFetch} guard and a {@link ClientTrustPolicy}.
   *
   * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5.2 | draft-ietf-oauth-client-id-metadata-document-02 §5.2}
   */
  static readonly layer = (
    options: ResolverOptions = {},
  ): Layer.Layer<ClientMetadataResolver, never, OutboundFetch | ClientTrustPolicy> =>
    Layer.effect(
      ClientMetadataResolver,
      Effect.gen(function* () {
        const outbound = yield* OutboundFetch
        const policy = yield* ClientTrustPolicy
        const settings: Settings = {
          bounds: {
            minSeconds: options.minCacheSeconds ?? CacheControl.defaultBounds.minSeconds,
            maxSeconds: options.maxCacheSeconds ?? CacheControl.defaultBounds.maxSeconds,
          },
          failureBackoffSeconds: options.failureBackoffSeconds ?? 5,
          maxEntries: options.maxEntries ?? 1000,
          maxClientIdLength: options.maxClientIdLength ?? 2048,
          maxDocumentBytes: options.maxDocumentBytes,
          allowHttpLoopbackClientIds: options.allowHttpLoopbackClientIds ?? false,
          jwksRefetchCooldownSeconds: options.jwksRefetchCooldownSeconds ?? 30,
        }
        if (settings.allowHttpLoopbackClientIds) {
          yield* Effect.logWarning(
            "ClientMetadataResolver: allowHttpLoopbackClientIds is ON: http://localhost client IDs are accepted. Development only; never enable it in production.",
          )
        }
        const entries = new Map<string, Entry>()
        const inflight = new Map<string, Deferred.Deferred<Fetched, ClientMetadataError>>()

        const remember = (clientId: string, entry: Entry, now: number) => {
          entries.delete(clientId)
          if (entries.size >= settings.maxEntries) {
            for (const [key, e] of entries) {
              if ((e._tag === "ok" ? (e.client.expires_at ?? 0) : e.until) <= now) entries.delete(key)
            }
          }
          while (entries.size >= settings.maxEntries) {
            const oldest = entries.keys().next()
            if (oldest.done === true) break
            entries.delete(oldest.value)
          }
          entries.set(clientId, entry)
        }

        const fetchDocument = Effect.fnUntraced(function* (clientId: string, checkedAs: string, now: number) {
          const response = yield* outbound
            .fetchJson(clientId, {
              maxRedirects: 0,
              ...(settings.maxDocumentBytes === undefined ? {} : { maxBytes: settings.maxDocumentBytes }),
            })
            .pipe(
              Effect.mapError(
                (refused) =>
                  new ClientMetadataError({
                    error: "invalid_client",
                    reason: "fetch",
                    client_id: clientId,
                    fetch: refused.reason,
                    message: `the client ID metadata document could not be fetched: ${refused.message}`,
                  }),
              ),
            )
          const validated = validateDocument(response.json, clientId, checkedAs)
          const problem = Result.isFailure(validated) ? validated.failure : extraChecks(validated.success)
          if (problem !== undefined) {
            return yield* new ClientMetadataError({
              error: "invalid_client",
              reason: "document",
              client_id: clientId,
              path: problem.path,
              message: problem.message,
            })
          }
          const document = Result.getOrThrow(validated)
          const expiresAt = now + CacheControl.lifetime(response.headers, now, settings.bounds)
          return { client: toClient(document, now, expiresAt), document }
        })

        // One fetch per client ID at a time; it runs detached so that a caller giving up (a closed browser tab)
        // does not cancel it for the others. The guard's time cap bounds it.
        const load = (clientId: string, checkedAs: string, now: number): Effect.Effect<Fetched, ClientMetadataError> =>
          Effect.suspend(() => {
            const running = inflight.get(clientId)
            if (running !== undefined) return Deferred.await(running)
            const deferred = Deferred.makeUnsafe<Fetched, ClientMetadataError>()
            inflight.set(clientId, deferred)
            const settle = (exit: Exit.Exit<Fetched, ClientMetadataError>) =>
              Effect.suspend(() => {
                inflight.delete(clientId)
                if (exit._tag === "Success") {
                  remember(clientId, { _tag: "ok", ...exit.value }, now)
                } else if (settings.failureBackoffSeconds > 0) {
                  const error = Cause.findError(exit.cause)
                  if (Result.isSuccess(error)) {
                    const until = now + settings.failureBackoffSeconds
                    remember(clientId, { _tag: "failed", error: error.success, until }, now)
                  }
                }
                return Deferred.done(deferred, exit)
              })
            return fetchDocument(clientId, checkedAs, now).pipe(
              Effect.exit,
              Effect.flatMap(settle),
              Effect.forkDetach,
              Effect.andThen(Deferred.await(deferred)),
            )
          })

        const resolve = Effect.fn("ClientMetadataResolver.resolve")(function* (clientId: string, now: number) {
          const checked = checkClientId(clientId, settings)
          if (Result.isFailure(checked)) return yield* checked.failure
          const trust = yield* policy.evaluate(checked.success)
          if (!trust.allowed) {
            return yield* new ClientMetadataError({
              error: "invalid_client",
              reason: "untrusted",
              client_id: clientId,
              message: `client_id host ${trust.host} is not accepted by this authorization server`,
            })
          }
          const cached = entries.get(clientId)
          let fetched: Fetched
          if (cached?._tag === "ok" && now < (cached.client.expires_at ?? 0)) fetched = cached
          else if (cached?._tag === "failed" && now < cached.until) return yield* cached.error
          else fetched = yield* load(clientId, checked.success, now)
          return {
            client: fetched.client,
            document: fetched.document,
            trust,
            loopbackOnly: isLoopbackOnly(fetched.client.redirect_uris),
          } satisfies ResolvedClient
        })

        const jwks = makeJwksCache(outbound, settings)

        return ClientMetadataResolver.of({
          resolve,
          forget: (clientId) => Effect.sync(() => void entries.delete(clientId)),
          jwks,
        })
      }),
    )
}
