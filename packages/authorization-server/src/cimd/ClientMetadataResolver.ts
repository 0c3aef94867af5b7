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
import { OAuthError, type Wire } from "@keyway/core"
import { Context, Effect, Layer, Result, Schema } from "effect"
import { jwkSetProblem } from "../internal/clientMetadata.js"
import { OutboundFetch, type OutboundRefused, RefusalReason } from "../outbound/OutboundFetch.js"
import type { ClientMetadata, JwkSet } from "../storage/Storage.js"
import * as CacheControl from "./CacheControl.js"
import {
  checkClientId,
  extraChecks,
  isLoopbackOnly,
  jwkSetProblemText,
  toClient,
  validateDocument,
} from "./internal/document.js"
import * as FetchCache from "./internal/fetchCache.js"
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
  /** Seconds until the host may be fetched again, when `fetch` is `rate-limited`. */
  retryAfter: Schema.optionalKey(Schema.Number),
}) {
  /** The OAuth error (`invalid_client` or `invalid_request`) with this message as its description. */
  toOAuthError(): OAuthError.OAuthError {
    return OAuthError.make(this.error, this.message)
  }
}

/**
 * A resolved client: the record to use (compatible with the storage `ClientMetadata`, origin
 * `metadata-document`, `expires_at` = end of its cache lifetime; the document's RFC 7591 members, to which the
 * server adds the fields its extensions declare), the validated document, the trust decision for
 * the consent page, and whether every redirect URI reaches only the user's machine (a loopback host or a private-use scheme: the consent page warns about those).
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

type Document = { readonly client: ClientMetadata; readonly document: Wire.ClientIdMetadataDocument }

/** The guard refused the fetch of `what`, or it failed. */
const fetchFailed = (clientId: string, what: string) => (refused: OutboundRefused) =>
  new ClientMetadataError({
    error: "invalid_client",
    reason: "fetch",
    client_id: clientId,
    fetch: refused.reason,
    message: `${what} could not be fetched: ${refused.message}`,
    ...(refused.retryAfter === undefined ? {} : { retryAfter: refused.retryAfter }),
  })

/** A failure of another client's `jwks_uri` fetch, repeated during its back-off in this client's name. */
const inTheNameOf = (clientId: string, e: ClientMetadataError) =>
  new ClientMetadataError({
    error: e.error,
    reason: e.reason,
    client_id: clientId,
    message: e.message,
    ...(e.fetch === undefined ? {} : { fetch: e.fetch }),
    ...(e.path === undefined ? {} : { path: e.path }),
    ...(e.retryAfter === undefined ? {} : { retryAfter: e.retryAfter }),
  })

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
        const settings = {
          bounds: {
            minSeconds: options.minCacheSeconds ?? CacheControl.defaultBounds.minSeconds,
            maxSeconds: options.maxCacheSeconds ?? CacheControl.defaultBounds.maxSeconds,
          },
          maxClientIdLength: options.maxClientIdLength ?? 2048,
          maxDocumentBytes: options.maxDocumentBytes,
          allowHttpLoopbackClientIds: options.allowHttpLoopbackClientIds ?? false,
          jwksRefetchCooldownSeconds: options.jwksRefetchCooldownSeconds ?? 30,
        }
        const cacheSettings: FetchCache.CacheSettings = {
          failureBackoffSeconds: options.failureBackoffSeconds ?? 5,
          maxEntries: options.maxEntries ?? 1000,
        }
        if (settings.allowHttpLoopbackClientIds) {
          yield* Effect.logWarning(
            "ClientMetadataResolver: allowHttpLoopbackClientIds is ON: http://localhost client IDs are accepted. Development only; never enable it in production.",
          )
        }
        const documents = FetchCache.make<Document, ClientMetadataError>(cacheSettings)
        const keySets = FetchCache.make<JwkSet, ClientMetadataError>(cacheSettings)

        const fetchDocument = Effect.fnUntraced(function* (clientId: string, checkedAs: string, now: number) {
          const response = yield* outbound
            .fetchJson(clientId, {
              maxRedirects: 0,
              ...(settings.maxDocumentBytes === undefined ? {} : { maxBytes: settings.maxDocumentBytes }),
            })
            .pipe(Effect.mapError(fetchFailed(clientId, "the client ID metadata document")))
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
          return { value: { client: toClient(document, now, expiresAt), document }, expiresAt }
        })

        const resolve = Effect.fn("ClientMetadataResolver.resolve")(function* (clientId: string, now: number) {
          const checked = checkClientId(clientId, settings)
          if (Result.isFailure(checked)) {
            return yield* new ClientMetadataError({
              error: "invalid_request",
              reason: "client-id",
              client_id: clientId,
              message: `client_id is not a valid client ID metadata document URL: ${checked.failure}`,
            })
          }
          const trust = yield* policy.evaluate(checked.success)
          if (!trust.allowed) {
            return yield* new ClientMetadataError({
              error: "invalid_client",
              reason: "untrusted",
              client_id: clientId,
              message: `client_id host ${trust.host} is not accepted by this authorization server`,
            })
          }
          const cached = documents.current(clientId, now)
          if (cached?._tag === "failed") return yield* cached.error
          const fetched =
            cached?._tag === "ok"
              ? cached.value
              : yield* documents.load(clientId, now, fetchDocument(clientId, checked.success, now))
          return {
            client: fetched.client,
            document: fetched.document,
            trust,
            loopbackOnly: isLoopbackOnly(fetched.client.redirect_uris),
          } satisfies ResolvedClient
        })

        const fetchKeys = Effect.fnUntraced(function* (clientId: string, uri: string, now: number) {
          const response = yield* outbound
            .fetchJson(uri, { accept: "application/jwk-set+json, application/json" })
            .pipe(Effect.mapError(fetchFailed(clientId, "the client's jwks_uri")))
          const found = jwkSetProblem(response.json)
          if (found !== undefined) {
            const { path, problem } = jwkSetProblemText(found)
            return yield* new ClientMetadataError({
              error: "invalid_client",
              reason: "document",
              client_id: clientId,
              path: `jwks_uri.${path}`,
              message: `the client's jwks_uri did not return a JWK Set of public keys: '${path}' ${problem}`,
            })
          }
          const expiresAt = now + CacheControl.lifetime(response.headers, now, settings.bounds)
          return { value: response.json as JwkSet, expiresAt }
        })

        const jwks = Effect.fn("ClientMetadataResolver.jwks")(function* (
          clientId: string,
          jwksUri: string,
          now: number,
          options?: { readonly refresh?: boolean },
        ) {
          const cached = keySets.current(jwksUri, now)
          // The back-off entry may come from another client naming the same URL: answer in this client's name.
          if (cached?._tag === "failed") return yield* inTheNameOf(clientId, cached.error)
          if (cached?._tag === "ok") {
            const mayRefetch = now - cached.fetchedAt >= settings.jwksRefetchCooldownSeconds
            if (options?.refresh !== true || !mayRefetch) return cached.value
          }
          return yield* keySets.load(jwksUri, now, fetchKeys(clientId, jwksUri, now))
        })

        return ClientMetadataResolver.of({
          resolve,
          forget: (clientId) => Effect.sync(() => documents.forget(clientId)),
          jwks,
        })
      }),
    )
}
