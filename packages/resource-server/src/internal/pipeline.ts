/**
 * The authentication pipeline, written once for both faces: query and body token refusal (RFC 6750 §2.2, §2.3),
 * Authorization header parsing (RFC 6750 §2.1), verification through the verified-token cache with the protected
 * resource's own re-check of audience and expiry and its rule for delegated tokens (RFC 8693 §4.1), per-operation
 * scopes read from the JSON-RPC body, and the body limit. The plain face calls it directly and the Effect face wraps
 * its result.
 *
 * It is plain code on purpose: a request with a cached token and nothing else to read runs synchronously, with no
 * promise and no Effect run loop, because that loop costs more than the whole check (docs/benchmarks.md). Time is
 * read through the injected `now`, which the Effect face backs with its `Clock`.
 */
import { Scope } from "@keyway/core"
import { PayloadTooLarge } from "@keyway/http"
import { Result } from "effect"
import type { PresentationRefusal, PresentationScheme } from "../Presentation.js"
import type { InboundRequest, Outcome } from "../ProtectedResource.js"
import { InvalidToken, type VerificationError, type VerifiedToken, VerifierUnavailable } from "../VerifiedToken.js"
import { namesResource } from "./audience.js"
import { type BearerCredentials, Descriptions, parseAuthorization } from "./bearer.js"
import { ExpiringCache, tokenKey } from "./cache.js"
import {
  bodyTokenDescription,
  insufficientDescription,
  queryTokenDescription,
  type Refusals,
  type ScanFailure,
} from "./challenge.js"
import type { Config } from "./config.js"
import { judge } from "./delegation.js"
import { type OperationScan, scanOperations, scanParsed } from "./jsonrpc.js"
import { descriptions, unavailableDescription } from "./reasons.js"

/**
 * Largest body (declared by Content-Length) read from a request without a valid token to name the scopes of its
 * operations in the 401 challenge; larger or undeclared bodies get the base scopes. The challenge's scope is a hint,
 * not worth buffering an anonymous caller's large body for.
 */
export const maxAnonymousBodyBytes = 64 * 1024

// RFC 7235 §2.1 token68: the credentials of a presentation scheme.
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/

/** Verification by the `TokenVerifier`, run to a settled result. */
export type Verify = (token: string) => Promise<Result.Result<VerifiedToken, VerificationError>>

/** A token looked up in the verified-token cache, with its key. */
interface LookedUp {
  readonly token: string
  readonly key: string
}

export interface Pipeline {
  /** Authenticates `request`; synchronous when nothing needs I/O. `extra` scopes are needed besides the configured. */
  readonly check: (request: InboundRequest, extra?: ReadonlyArray<string>) => Outcome | Promise<Outcome>
  /** Empties the verified-token cache. */
  readonly clearCache: () => void
}

export const makePipeline = (config: Config, refusals: Refusals, verify: Verify, now: () => number): Pipeline => {
  const { reject, challengeScopes, badJsonRpc, tooLarge } = refusals
  const schemes = config.schemes
  const cache = new ExpiringCache<VerifiedToken>(config.cacheMax, now)
  const inflight = new Map<string, Promise<Result.Result<VerifiedToken, VerificationError>>>()

  // The protected resource's own expiry check, with its clock skew, whatever the verifier did.
  const live = (token: VerifiedToken, at: number): boolean =>
    token.expiresAt === undefined || token.expiresAt * 1000 + config.skewMs > at

  // `looked` is the token the fast path looked up and its key: a miss there goes on with the same token, which then
  // needs no second hash.
  const verifyCached = (
    token: string,
    looked: LookedUp | undefined,
  ): Promise<Result.Result<VerifiedToken, VerificationError>> | VerifiedToken => {
    const key = looked !== undefined && looked.token === token ? looked.key : tokenKey(token)
    const hit = cache.get(key)
    if (hit !== undefined) return hit
    const pending = inflight.get(key)
    if (pending !== undefined) return pending
    const promise = verify(token).then(
      (result) => settled(key, result),
      (error: unknown) =>
        settled(key, Result.fail(new VerifierUnavailable({ source: "verifier", detail: String(error) }))),
    )
    inflight.set(key, promise)
    return promise
  }

  // A verification's result, checked on the protected resource's terms and cached when it passes.
  const settled = (
    key: string,
    result: Result.Result<VerifiedToken, VerificationError>,
  ): Result.Result<VerifiedToken, VerificationError> => {
    inflight.delete(key)
    if (Result.isFailure(result)) return result
    const token = result.success
    const at = now()
    if (!live(token, at)) {
      return Result.fail(new InvalidToken({ reason: "expired", description: descriptions.expired }))
    }
    // Custom verifiers may not check the audience: the protected resource always does.
    if (!namesResource(token.audience, config.resource)) {
      return Result.fail(new InvalidToken({ reason: "wrong-audience", description: descriptions["wrong-audience"] }))
    }
    // Delegation is judged on the claims, whichever verifier produced them; a token with no `act` (and no `actors`
    // of a verifier's own) passes untouched. The cached token keeps the accepted chain.
    let accepted = token
    if (token.claims.act !== undefined || token.actors !== undefined) {
      const judged = judge(config.delegation, token)
      if (Result.isFailure(judged)) return judged
      accepted = judged.success
    }
    const until = Math.min(
      token.expiresAt === undefined ? Number.POSITIVE_INFINITY : token.expiresAt * 1000,
      token.reuseUntil ?? Number.POSITIVE_INFINITY,
      at + config.cacheTtlMs,
    )
    cache.set(key, accepted, until)
    return accepted === token ? result : Result.succeed(accepted)
  }

  const requiredFor = async (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
  ): Promise<ReadonlyArray<string> | ScanFailure> => {
    let required = config.baseScopes
    if (extra !== undefined && extra.length > 0) required = Scope.union(required, extra)
    const operations = config.operations
    if (operations !== undefined && request.method === "POST") {
      let scan: OperationScan
      if (request.parsedBody !== undefined) {
        scan = scanParsed(request.parsedBody, operations)
      } else if (request.readBody !== undefined) {
        scan = scanOperations(await request.readBody(), operations)
      } else {
        scan = { _tag: "Operations", scopes: [] }
      }
      if (scan._tag !== "Operations") return scan
      if (scan.scopes.length > 0) required = Scope.union(required, scan.scopes)
    }
    return required
  }

  // For requests that are not (yet) authenticated the body is read only when it is small and declared so.
  const challengeHint = async (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
  ): Promise<ReadonlyArray<string>> => {
    const base = extra === undefined || extra.length === 0 ? config.baseScopes : Scope.union(config.baseScopes, extra)
    if (config.operations === undefined || request.method !== "POST") return base
    if (request.parsedBody === undefined) {
      const length = Number(request.contentLength ?? Number.NaN)
      if (!(length >= 0 && length <= maxAnonymousBodyBytes)) return base
    }
    const required = await requiredFor(request, extra).catch((error: unknown) => {
      if (error instanceof PayloadTooLarge) return base
      throw error
    })
    return Array.isArray(required) ? (required as ReadonlyArray<string>) : base
  }

  // The check runs synchronously as long as nothing needs I/O (a cached token, no body to inspect): the common path
  // then costs no promise or microtask of its own.
  const check = (request: InboundRequest, extra?: ReadonlyArray<string>): Outcome | Promise<Outcome> => {
    const url = request.url
    const q = url.indexOf("?")
    if (q !== -1 && new URLSearchParams(url.slice(q + 1)).has("access_token")) {
      return { ok: false, rejection: reject(request.origin, "invalid_request", queryTokenDescription, undefined) }
    }
    // Fast path for a token verified before: its cache entry proves the syntax was checked then, so the full header
    // parse is skipped. Anything unusual (other spacing, several values, a form body) takes the full path below.
    const authorization = request.authorization
    let looked: LookedUp | undefined
    if (
      typeof authorization === "string" &&
      authorization.length > 7 &&
      authorization.charCodeAt(6) === 32 &&
      (authorization.startsWith("Bearer") || authorization.slice(0, 6).toLowerCase() === "bearer") &&
      (request.method === "GET" || !isForm(request.contentType))
    ) {
      const accessToken = authorization.slice(7)
      const key = tokenKey(accessToken)
      const at = now()
      const hit = cache.get(key, at)
      if (hit !== undefined && live(hit, at)) return authorize(request, extra, hit, accessToken)
      looked = { token: accessToken, key }
    }
    const credentials: BearerCredentials = parseAuthorization(authorization)
    if (credentials._tag === "Malformed") {
      return { ok: false, rejection: reject(request.origin, "invalid_request", credentials.description, undefined) }
    }
    // A token in a form body is refused (RFC 6750 §2.2 is not supported), for bodies small enough to inspect; larger
    // ones are not buffered here, and a body token is never used in any case.
    if (
      isForm(request.contentType) &&
      request.readBody !== undefined &&
      Number(request.contentLength ?? Number.NaN) <= maxAnonymousBodyBytes
    ) {
      return request.readBody().then(
        (body) =>
          new URLSearchParams(body).has("access_token")
            ? { ok: false, rejection: reject(request.origin, "invalid_request", bodyTokenDescription, undefined) }
            : afterCredentials(request, extra, credentials, looked),
        (error: unknown) => {
          if (error instanceof PayloadTooLarge) return { ok: false, rejection: tooLarge(request.origin) }
          throw error
        },
      )
    }
    return afterCredentials(request, extra, credentials, looked)
  }

  const isForm = (contentType: string | null | undefined): boolean =>
    contentType?.toLowerCase().startsWith("application/x-www-form-urlencoded") === true

  const isSimple = (extra: ReadonlyArray<string> | undefined): boolean =>
    config.operations === undefined && (extra === undefined || extra.length === 0)

  const unauthorized = (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
    error: "invalid_token" | undefined,
    description: string | undefined,
  ): Outcome | Promise<Outcome> => {
    const answer = (needed: ReadonlyArray<string>): Outcome => ({
      ok: false,
      rejection: reject(
        request.origin,
        error,
        description,
        needed.length > 0 ? challengeScopes(needed, []) : config.scopesSupported,
      ),
    })
    return isSimple(extra) ? answer(config.baseScopes) : challengeHint(request, extra).then(answer)
  }

  const afterCredentials = (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
    credentials: BearerCredentials,
    looked: LookedUp | undefined,
  ): Outcome | Promise<Outcome> => {
    if (credentials._tag === "OtherScheme" && schemes.length > 0) {
      const lower = credentials.scheme.toLowerCase()
      const scheme = schemes.find((s) => s.scheme.toLowerCase() === lower)
      if (scheme !== undefined) return presentedWith(request, extra, scheme, credentials.credentials, looked)
    }
    // No credentials: a challenge without error code (RFC 6750 §3.1), naming the scopes the request needs.
    if (credentials._tag !== "Token") return unauthorized(request, extra, undefined, undefined)
    const accessToken = credentials.token
    const verified = verifyCached(accessToken, looked)
    if (verified instanceof Promise) {
      return verified.then((result) => {
        if (Result.isSuccess(result)) return authorize(request, extra, result.success, accessToken)
        const error = result.failure
        const description = error instanceof InvalidToken ? error.description : unavailableDescription
        return unauthorized(request, extra, "invalid_token", description)
      })
    }
    if (!live(verified, now())) return unauthorized(request, extra, "invalid_token", descriptions.expired)
    return authorize(request, extra, verified, accessToken)
  }

  // A token presented with a registered scheme: verified as any other, then the scheme confirms the presentation;
  // every refusal carries that scheme's challenge.
  const presentedWith = (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
    scheme: PresentationScheme,
    accessToken: string,
    looked: LookedUp | undefined,
  ): Outcome | Promise<Outcome> => {
    const refuse = (
      error: string,
      description: string,
      scopes?: ReadonlyArray<string>,
      headers?: Readonly<Record<string, string>>,
    ): Outcome => ({ ok: false, rejection: reject(request.origin, error, description, scopes, scheme, headers) })
    if (accessToken === "" || !TOKEN68.test(accessToken)) {
      return refuse("invalid_request", Descriptions.illegalCharacters)
    }
    const confirmed = (token: VerifiedToken): Outcome | Promise<Outcome> => {
      const decide = (refusal: PresentationRefusal | undefined): Outcome | Promise<Outcome> => {
        if (refusal !== undefined) return refuse(refusal.error, refusal.description, undefined, refusal.headers)
        const outcome = authorize(request, extra, token, accessToken, scheme)
        return outcome
      }
      const refusal = scheme.confirm(request, token, accessToken)
      return refusal instanceof Promise ? refusal.then(decide) : decide(refusal)
    }
    const verified = verifyCached(accessToken, looked)
    if (verified instanceof Promise) {
      return verified.then((result) => {
        if (Result.isSuccess(result)) return confirmed(result.success)
        const error = result.failure
        return refuse("invalid_token", error instanceof InvalidToken ? error.description : unavailableDescription)
      })
    }
    if (!live(verified, now())) return refuse("invalid_token", descriptions.expired)
    return confirmed(verified)
  }

  // Scope.containsAll, without its set for the usual single required scope.
  const grants = (granted: ReadonlyArray<string>, needed: ReadonlyArray<string>): boolean =>
    needed.length === 1 ? granted.includes(needed[0]!) : Scope.containsAll(granted, needed)

  const tooLong = (contentLength: string): boolean =>
    /^\d+$/.test(contentLength) && Number(contentLength) > config.maxBodyBytes

  // Authenticated: now the body may be read in full (the handler reads it anyway).
  const authorize = (
    request: InboundRequest,
    extra: ReadonlyArray<string> | undefined,
    token: VerifiedToken,
    accessToken: string,
    presented?: PresentationScheme,
  ): Outcome | Promise<Outcome> => {
    // A token bound to a scheme (a DPoP key) is worthless as a bearer token (RFC 9449 §7.2), and so is any token
    // where a scheme is required.
    if (presented === undefined && schemes.length > 0) {
      const bound = schemes.find((s) => s.binds?.(token) === true)
      const binding = bound ?? schemes.find((s) => s.required === true)
      if (binding !== undefined) {
        return {
          ok: false,
          rejection: reject(
            request.origin,
            "invalid_token",
            bound === undefined
              ? `This resource accepts access tokens presented with the ${binding.scheme} scheme only`
              : `The access token is bound to a key: present it with the ${binding.scheme} scheme`,
            undefined,
            binding,
          ),
        }
      }
    }
    const decide = (required: ReadonlyArray<string> | ScanFailure): Outcome => {
      if (!Array.isArray(required)) {
        return { ok: false, rejection: badJsonRpc(required as ScanFailure, request.origin) }
      }
      const needed = required as ReadonlyArray<string>
      if (needed.length > 0 && !grants(token.scopes, needed)) {
        return {
          ok: false,
          rejection: reject(
            request.origin,
            "insufficient_scope",
            insufficientDescription,
            challengeScopes(needed, token.scopes),
            presented,
          ),
        }
      }
      return { ok: true, token, accessToken }
    }
    // An authenticated caller's body is about to be read (here or by the handler): a declared length over the limit
    // is refused before any of it is.
    if (request.method !== "GET" && request.contentLength != null && tooLong(request.contentLength)) {
      return { ok: false, rejection: tooLarge(request.origin) }
    }
    if (isSimple(extra)) return decide(config.baseScopes)
    return requiredFor(request, extra).then(decide, (error: unknown) => {
      if (error instanceof PayloadTooLarge) return { ok: false, rejection: tooLarge(request.origin) }
      throw error
    })
  }

  return { check, clearCache: () => cache.clear() }
}
