/**
 * The abuse limits as the endpoints apply them: whose bucket a request counts in (its client address, the client it
 * authenticated as or claims to be, its refresh-token family, the identity its assertion proved), the 429 answers
 * (each naming the limit and the setting that changes it), client authentication within its limits, and the wrapper
 * the router puts around registration.
 */
import { isIPv4, isIPv6 } from "node:net"
import { ClientAuth } from "@keyway/core"
import { clientAddress as peerAddress } from "@keyway/http/node"
import { Effect } from "effect"
import { decodeJwt } from "jose"
import type { ResolvedConfig, ResolvedRateLimits } from "../Config.js"
import type { ClientAuthFailure } from "../Extension.js"
import {
  type BackoffRule,
  bucket,
  type Count,
  RateLimited,
  type RateLimiterService,
  type WindowRule,
} from "../RateLimiter.js"
import type { StorageError } from "../storage/Errors.js"
import type { ClientStore, GrantStore } from "../storage/Storage.js"
import { type AuthenticatedClient, authenticateClient } from "./clientAuth.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { CORS_HEADERS, json } from "./http.js"

const expand = (address: string): Array<string> | undefined => {
  const halves = address.split("::")
  if (halves.length > 2) return undefined
  const part = (s: string) => (s === "" ? [] : s.split(":"))
  const head = part(halves[0] ?? "")
  const tail = part(halves[1] ?? "")
  const missing = 8 - head.length - tail.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined
  return [...head, ...Array<string>(halves.length === 1 ? 0 : missing).fill("0"), ...tail]
}

/**
 * The bucket name of a client address: an IPv4 address as it is (also when written IPv4-mapped, `::ffff:192.0.2.1`);
 * an IPv6 address by its /64 prefix, the block one subscriber usually holds whole (RFC 6177), so that walking through
 * it does not give fresh buckets; anything else as given.
 */
export const addressBucket = (address: string): string => {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null && isIPv4(mapped[1]!)) return mapped[1]!
  if (isIPv4(address)) return address
  const zoneless = address.replace(/%.*$/, "")
  if (!isIPv6(zoneless) || zoneless.includes(".")) return address
  const groups = expand(zoneless.toLowerCase())
  if (groups === undefined) return address
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ""))
    .join(":")}::/64`
}

/** The client address of a request (the configured function, else the node:http bridge's peer), if known. */
export const addressOf = (config: ResolvedConfig, request: Request): string | undefined => {
  const address = (config.rateLimits.clientAddress ?? peerAddress)(request)
  return address === undefined || address === "" ? undefined : addressBucket(address)
}

/**
 * The client a back-channel request claims to be, whether or not it authenticates: the Basic credentials' id, else
 * the `sub` (or `iss`) of a `client_assertion`, else the form's `client_id`; `undefined` when it names none.
 */
export const claimedClient = (request: Request, form: ReadonlyMap<string, string>): string | undefined => {
  const authorization = request.headers.get("authorization")
  if (authorization !== null && /^basic\s/i.test(authorization)) {
    return ClientAuth.decodeClientSecretBasic(authorization)?.clientId
  }
  const assertion = form.get("client_assertion")
  if (assertion !== undefined) {
    try {
      const claims = decodeJwt(assertion)
      const claimed = typeof claims.sub === "string" ? claims.sub : claims.iss
      if (typeof claimed === "string" && claimed !== "") return claimed
    } catch {
      // Not a JWT: the form's client_id, if any, is the claim.
    }
  }
  const clientId = form.get("client_id")
  return clientId === undefined || clientId === "" ? undefined : clientId
}

/** "42 seconds", "2 minutes", "3 hours": a wait in the reader's terms, rounded up. */
export const waitText = (seconds: number): string => {
  const unit = (n: number, name: string) => `${n} ${name}${n === 1 ? "" : "s"}`
  if (seconds < 60) return unit(Math.max(1, seconds), "second")
  if (seconds < 2 * 3600) return unit(Math.ceil(seconds / 60), "minute")
  return unit(Math.ceil(seconds / 3600), "hour")
}

/**
 * The description of a 429 under a window limit: what was refused, the setting that changes it and its limit, and when
 * to retry (`too many registrations from this address: rateLimits.registration allows 20 in 3600 seconds; retry after
 * 3600 seconds`).
 */
export const refusal = (what: string, setting: string, rule: WindowRule, retryAfter: number): string =>
  `${what}: ${setting} allows ${rule.max} in ${rule.window} seconds; retry after ${retryAfter} seconds`

/**
 * The 429 of an OAuth endpoint (RFC 6585 §4): `Retry-After` in seconds, exposed to browser clients, and an RFC 6749
 * §5.2 error body whose description says which limit was reached and when to retry. The code is `invalid_request`,
 * the general refusal every OAuth client understands: RFC 6749 defines `temporarily_unavailable` only for the
 * authorization endpoint's redirects and RFC 8628's `slow_down` means "poll less often" to a device-flow client; the
 * status, `Retry-After` and the description carry what happened.
 */
export const tooManyRequests = (retryAfter: number, description: string): Response =>
  json(
    { error: "invalid_request", error_description: description },
    {
      status: 429,
      headers: {
        ...CORS_HEADERS,
        "Access-Control-Expose-Headers": "WWW-Authenticate, Retry-After",
        "Retry-After": String(retryAfter),
      },
    },
  )

/** One window limit as the endpoints apply it: the setting that changes it, its rule, its buckets, what it counts. */
export interface Limit {
  /** The configuration setting (`rateLimits.token`). */
  readonly setting: string
  readonly rule: WindowRule
  /** The kind of its buckets (see {@link bucket}). */
  readonly kind: string
  /** What the 429 says was refused: "too many token requests from this address". */
  readonly what: string
}

const limit = (
  rules: ResolvedRateLimits,
  name: keyof Omit<ResolvedRateLimits, "login" | "clientAddress">,
  kind: string,
  what: string,
): Limit | undefined => {
  const rule = rules[name]
  return rule === false ? undefined : { setting: `rateLimits.${name}`, rule, kind, what }
}

/** The back-channel endpoints, each with its own allowance. */
export type BackChannel = "token" | "revocation" | "introspection"

/** The window limits of a configuration; `undefined` for a limit that is off. */
export interface Limits {
  readonly registration: Limit | undefined
  /** Per authenticated client, and per client address for public clients (and grants without a client). */
  readonly perClient: Readonly<Record<BackChannel, Limit | undefined>>
  readonly perAddress: Readonly<Record<BackChannel, Limit | undefined>>
  readonly refresh: Limit | undefined
  readonly workload: Limit | undefined
  readonly clientAuthentication: Limit | undefined
}

const limitsCache = new WeakMap<ResolvedConfig, Limits>()

/** The window limits of `config` (made once per configuration). */
export const limitsOf = (config: ResolvedConfig): Limits => {
  const cached = limitsCache.get(config)
  if (cached !== undefined) return cached
  const r = config.rateLimits
  const made: Limits = {
    registration: limit(r, "registration", "registration", "too many registrations from this address"),
    perClient: {
      // The bucket kinds of the endpoints' per-client counts are their names, as they have always been.
      token: limit(r, "token", "token", "too many token requests for this client"),
      revocation: limit(r, "revocation", "revocation", "too many revocation requests for this client"),
      introspection: limit(r, "introspection", "introspection", "too many introspection requests for this client"),
    },
    perAddress: {
      token: limit(r, "token", "token-address", "too many token requests from this address"),
      revocation: limit(r, "revocation", "revocation-address", "too many revocation requests from this address"),
      introspection: limit(
        r,
        "introspection",
        "introspection-address",
        "too many introspection requests from this address",
      ),
    },
    refresh: limit(r, "refresh", "refresh-family", "too many refresh requests for this refresh token"),
    workload: limit(r, "workload", "workload", "too many token requests for this workload"),
    clientAuthentication: limit(
      r,
      "clientAuthentication",
      "client-authentication-failure",
      "too many failed client authentications for this client from this address",
    ),
  }
  limitsCache.set(config, made)
  return made
}

/** A request counted (or, with `peek`, judged) under `limit` in the bucket of `key`. */
export interface Keyed {
  readonly limit: Limit
  readonly key: string
  readonly peek?: boolean
}

/** `limit` keyed on `key`, or nothing when the limit is off or the key unknown (an address that is not known). */
export const keyed = (limit: Limit | undefined, key: string | undefined, peek = false): Keyed | undefined =>
  limit === undefined || key === undefined ? undefined : { limit, key, ...(peek ? { peek } : {}) }

/**
 * Counts the request under every given limit in one check (one statement in the database), and fails with
 * {@link RateLimited} when one refuses it: the one whose wait is longest, named in the description.
 */
export const enforce = (
  limiter: RateLimiterService,
  all: ReadonlyArray<Keyed | undefined>,
): Effect.Effect<void, RateLimited | StorageError> =>
  Effect.gen(function* () {
    const present = all.filter((k): k is Keyed => k !== undefined)
    if (present.length === 0) return
    const counts = present.map(
      (k): Count => ({ bucket: bucket(k.limit.kind, k.key), rule: k.limit.rule, ...(k.peek ? { peek: true } : {}) }),
    )
    const decision = yield* limiter.hitAll(counts, yield* nowSeconds)
    if (decision.allowed) return
    const { limit } = present[decision.refusedBy]!
    return yield* new RateLimited({
      limit: limit.setting,
      retryAfter: decision.retryAfter,
      description: refusal(limit.what, limit.setting, limit.rule, decision.retryAfter),
    })
  })

/** The bucket key of the failed authentications of `claimed` (a client ID, or none) from `address`. */
const failureKey = (claimed: string | undefined, address: string | undefined): string | undefined =>
  address === undefined ? undefined : JSON.stringify([claimed ?? "", address])

/** {@link AuthenticatedClient} with the request's client address (if known). */
export interface LimitedClient extends AuthenticatedClient {
  readonly address: string | undefined
}

/**
 * Authenticates the client of a back-channel request (see {@link authenticateClient}) within the abuse limits, none
 * of which a stranger can spend for someone else:
 * - a failed authentication counts under `rateLimits.clientAuthentication` for the client it claims and the client
 *   address, and is refused 429 past it; a client that authenticates from that address is refused too while the
 *   count is past the limit (so a guess that happens to be right is answered like the wrong ones), from any other
 *   address it is not;
 * - a client that authenticated with credentials spends its own allowance (`rateLimits.token`, `revocation`,
 *   `introspection`), which nobody else can;
 * - a public client (method `none`, an ID anyone can send) is counted per client address instead: here at the
 *   revocation and introspection endpoints; the token endpoint counts it with the refresh-token family, where that is
 *   known (see {@link limitPublicToken}).
 */
export const authenticateWithinLimits = (
  config: ResolvedConfig,
  limiter: RateLimiterService,
  endpoint: BackChannel,
  request: Request,
  form: ReadonlyMap<string, string>,
  audiences: ReadonlyArray<string>,
): Effect.Effect<
  LimitedClient,
  ClientAuthFailure | RateLimited | StorageError,
  ClientStore | GrantStore | MetadataDocuments
> =>
  Effect.gen(function* () {
    const limits = limitsOf(config)
    const address = addressOf(config, request)
    const authenticated = yield* authenticateClient(config, request, form, audiences).pipe(
      Effect.catchTag("ClientAuthFailure", (failure) =>
        // A client document or key set that may not be fetched yet is no failure of the requester's.
        failure.retryAfter !== undefined
          ? Effect.fail(failure)
          : enforce(limiter, [
              keyed(limits.clientAuthentication, failureKey(claimedClient(request, form), address)),
            ]).pipe(Effect.andThen(Effect.fail(failure))),
      ),
    )
    if (authenticated.method === "none") {
      if (endpoint !== "token") yield* enforce(limiter, [keyed(limits.perAddress[endpoint], address)])
    } else {
      yield* enforce(limiter, [
        keyed(limits.perClient[endpoint], authenticated.client.client_id),
        keyed(limits.clientAuthentication, failureKey(authenticated.client.client_id, address), true),
      ])
    }
    return { ...authenticated, address }
  })

/**
 * The token-endpoint limits of a public client or a grant without a client, in one check: per client address
 * (`rateLimits.token`) and, for a refresh, per refresh-token family (`rateLimits.refresh`), which only the holder of
 * one of its tokens can spend.
 */
export const limitPublicToken = (
  config: ResolvedConfig,
  limiter: RateLimiterService,
  address: string | undefined,
  family?: string,
): Effect.Effect<void, RateLimited | StorageError> => {
  const limits = limitsOf(config)
  return enforce(limiter, [keyed(limits.perAddress.token, address), keyed(limits.refresh, family)])
}

/**
 * The limit on the identity an assertion proved (`rateLimits.workload`), keyed on its issuer and subject; for grant
 * handlers through `GrantContext.limitIdentity`, once the assertion is verified and unused.
 */
export const limitIdentity = (
  config: ResolvedConfig,
  limiter: RateLimiterService,
  issuer: string,
  subject: string,
): Effect.Effect<void, RateLimited | StorageError> =>
  enforce(limiter, [keyed(limitsOf(config).workload, JSON.stringify([issuer, subject]))])

type Handler<R> = (request: Request) => Effect.Effect<Response, StorageError, R>

/**
 * `handler` behind `limit` per client address (registration); requests whose address is unknown are not counted.
 */
export const perAddress =
  <R>(config: ResolvedConfig, limiter: RateLimiterService, limit: Limit | undefined, handler: Handler<R>): Handler<R> =>
  (request) =>
    limit === undefined
      ? handler(request)
      : enforce(limiter, [keyed(limit, addressOf(config, request))]).pipe(
          Effect.andThen(handler(request)),
          Effect.catchTag("RateLimited", (e) => Effect.succeed(tooManyRequests(e.retryAfter, e.description))),
        )

/** The setting of a sign-in limit, which a locked sign-in names. */
export type LoginLimit = "rateLimits.login.account" | "rateLimits.login.address"

/** The outcome of {@link loginGate}. */
export type LoginGate =
  | { readonly allowed: false; readonly retryAfter: number; readonly limit: LoginLimit }
  | {
      readonly allowed: true
      /** The lock in force (seconds; 0 for none) should this sign-in fail. */
      readonly lockIfFailed: number
      /** The limit whose lock that is (the longer one; the account's on a tie). */
      readonly lockedBy: LoginLimit
      /** To run when the sign-in succeeds: resets the account's count, gives the address its attempt back. */
      readonly succeeded: Effect.Effect<void, StorageError>
    }

/**
 * Counts a sign-in attempt for the submitted account name and for the client address before the password is checked,
 * or refuses it while either is locked. The account bucket is the name as submitted (lower-cased, NFC), whether or
 * not such an account exists, so that locks say nothing about which accounts exist.
 */
export const loginGate = (
  config: ResolvedConfig,
  limiter: RateLimiterService,
  request: Request,
  username: string,
): Effect.Effect<LoginGate, StorageError> =>
  Effect.gen(function* () {
    const { account, address } = config.rateLimits.login
    const now = yield* nowSeconds
    const buckets: Array<{
      readonly name: string
      readonly reset: boolean
      readonly rule: BackoffRule
      readonly limit: LoginLimit
    }> = []
    const from = address === false ? undefined : addressOf(config, request)
    if (address !== false && from !== undefined) {
      buckets.push({
        name: bucket("login-address", from),
        reset: false,
        rule: address,
        limit: "rateLimits.login.address",
      })
    }
    if (account !== false) {
      buckets.push({
        name: bucket("login-account", username.normalize("NFC").toLowerCase()),
        reset: true,
        rule: account,
        limit: "rateLimits.login.account",
      })
    }
    let lock = 0
    let lockedBy: LoginLimit = "rateLimits.login.account"
    const counted: typeof buckets = []
    for (const b of buckets) {
      const decision = yield* limiter.attempt(b.name, b.rule, now)
      if (!decision.allowed) {
        // This attempt does not happen: the buckets already counted get it back.
        for (const c of counted) yield* limiter.forgive(c.name, now)
        return { allowed: false, retryAfter: decision.retryAfter, limit: b.limit }
      }
      counted.push(b)
      // The account's lock is named on a tie: it is counted last.
      if (decision.lockIfFailed >= lock) {
        lock = decision.lockIfFailed
        lockedBy = b.limit
      }
    }
    return {
      allowed: true,
      lockIfFailed: lock,
      lockedBy,
      succeeded: Effect.forEach(counted, (c) => (c.reset ? limiter.reset(c.name) : limiter.forgive(c.name, now)), {
        discard: true,
      }),
    }
  })
