/**
 * The keys of trusted external JWT issuers (core's `TrustedIssuer`: workload issuers, enterprise identity
 * providers), as jose key sets for the extensions that verify their JWTs: inline keys as they are, a `jwksUri`
 * fetched through the SSRF guard (`Outbound.OutboundFetch`) and cached.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @module
 */
import type { TrustedIssuer } from "@keyway/core"
import { Effect, Result } from "effect"
import { createLocalJWKSet, createRemoteJWKSet, customFetch, type JSONWebKeySet, type JWTVerifyGetKey } from "jose"
import type * as Outbound from "./outbound/index.js"
import { make as makeGuard } from "./outbound/OutboundFetch.js"
import { Resolver, type ResolverService } from "./outbound/Resolver.js"

/**
 * Caching of a remote key set, in seconds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export interface CacheOptions {
  /** How long a fetched set is used; 600 by default. */
  readonly maxAge?: number
  /** The least time between two fetches, also when a JWT names an unknown `kid`; 30 by default. */
  readonly cooldown?: number
  /** How long a fetch may take; 5 by default. */
  readonly timeout?: number
}

/**
 * The defaults of {@link CacheOptions}, in seconds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const cacheDefaults = { maxAge: 600, cooldown: 30, timeout: 5 } as const

/**
 * Options of {@link keySet}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
 */
export interface KeySetOptions {
  /**
   * Development only: fetch `jwksUri` over plain http, and from loopback addresses, when its host is loopback
   * (core's `TrustedIssuer.transportProblem` decides which URIs are configured at all). Every other special-use
   * address stays refused. Off by default; the caller warns when it is on.
   */
  readonly allowHttpLoopback?: boolean
  /**
   * The fetch for `jwksUri`, replacing the guarded one (a proxy, a test double of the network). The guard by
   * default: https only, the host resolved once and every address vetted (RFC 6890), the connection pinned to it,
   * no redirects, a JSON body of at most 64 KiB.
   */
  readonly fetch?: (input: string, init: RequestInit) => Promise<Response>
  /** The resolver of the guard; the operating system's by default. */
  readonly resolver?: ResolverService
  /** Caching of the remote set. */
  readonly cache?: CacheOptions
}

/**
 * A jose `fetch` over the guard. A refusal rejects with the guard's `OutboundRefused` (its message says why); an
 * abort by jose's timeout rejects with the signal's reason, which jose reports as `JWKSTimeout`.
 */
const guardedFetch =
  (guard: Outbound.OutboundFetch.OutboundFetchService) =>
  async (url: string, init: RequestInit): Promise<Response> => {
    const signal = init.signal ?? undefined
    const outcome = await Effect.runPromise(
      Effect.result(guard.fetchJson(url, { maxRedirects: 0, accept: "application/jwk-set+json, application/json" })),
      signal === undefined ? undefined : { signal },
    ).catch((error: unknown) => {
      throw signal?.aborted === true ? signal.reason : error
    })
    if (Result.isFailure(outcome)) throw outcome.failure
    return Response.json(outcome.success.json)
  }

/**
 * The key set of a trusted issuer, for jose's `jwtVerify` or `compactVerify`: its inline `jwks`, or its `jwksUri`
 * fetched on first use, cached for `cache.maxAge` and fetched again for an unknown `kid` at most once per
 * `cache.cooldown`. Make one per issuer and keep it: the cache lives in it. A fetch that fails or is refused fails
 * the verification with the guard's `OutboundRefused` (`refused https://…: address 10.0.0.1 is …`).
 *
 * @example
 * ```ts
 * const keys = TrustedIssuers.keySet({ issuer: "https://idp.example.com", jwksUri: "https://idp.example.com/jwks" })
 * await jwtVerify(assertion, keys, { algorithms: ["ES256"] })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6 (SSRF)}
 */
export const keySet = (issuer: TrustedIssuer.TrustedIssuer, options: KeySetOptions = {}): JWTVerifyGetKey => {
  if (issuer.jwksUri === undefined) return createLocalJWKSet(issuer.jwks as unknown as JSONWebKeySet)
  const cache = { ...cacheDefaults, ...options.cache }
  const fetch =
    options.fetch ??
    guardedFetch(
      makeGuard(
        { allowInsecureLoopback: options.allowHttpLoopback === true, timeoutMs: cache.timeout * 1000 },
        options.resolver ?? Resolver.system,
      ),
    )
  return createRemoteJWKSet(new URL(issuer.jwksUri), {
    cacheMaxAge: cache.maxAge * 1000,
    cooldownDuration: cache.cooldown * 1000,
    timeoutDuration: cache.timeout * 1000,
    [customFetch]: (url: string, init: RequestInit) => fetch(url, init),
  })
}
