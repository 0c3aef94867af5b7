/**
 * The abuse limits as the endpoints apply them: whose bucket a request counts in (its client address, the client it
 * claims to be), the 429 answers, and the wrappers the router puts around the back-channel and registration endpoints.
 */
import { isIPv4, isIPv6 } from "node:net"
import { ClientAuth } from "@keyway/core"
import { clientAddress as peerAddress } from "@keyway/http/node"
import { Effect } from "effect"
import { decodeJwt } from "jose"
import type { ResolvedConfig } from "../Config.js"
import { bucket, type RateLimiterService, type WindowRule } from "../RateLimiter.js"
import type { StorageError } from "../storage/Errors.js"
import { nowSeconds } from "./clock.js"
import { CORS_HEADERS, json, mediaType, parseForm } from "./http.js"

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
 * The body of a clone of `request` as UTF-8 text, or `undefined` past `limit` bytes or for malformed UTF-8. Past the
 * limit the clone is cancelled without waiting: a cancelled branch of a teed body settles only once the other branch
 * is cancelled too, which happens only after the endpoint has read (and refused) the original.
 */
const readClone = async (request: Request, limit: number): Promise<string | undefined> => {
  const declared = request.headers.get("content-length")
  if (declared !== null && Number(declared) > limit) return undefined
  const body = request.clone().body
  if (body === null) return ""
  const reader = body.getReader()
  const parts: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      reader.cancel().catch(() => undefined)
      return undefined
    }
    parts.push(value)
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(parts))
  } catch {
    return undefined
  }
}

/**
 * The client a back-channel request claims to be, read before it is authenticated: the Basic credentials' id, else
 * the `sub` (or `iss`) of a `client_assertion`, else the form's `client_id`. Read from a clone, so the endpoint still
 * reads the body; `undefined` when there is no such claim (the endpoint refuses the request anyway).
 */
export const claimedClient = async (request: Request, maxBytes: number): Promise<string | undefined> => {
  const authorization = request.headers.get("authorization")
  if (authorization !== null && /^basic\s/i.test(authorization)) {
    return ClientAuth.decodeClientSecretBasic(authorization)?.clientId
  }
  if (mediaType(request) !== "application/x-www-form-urlencoded" || request.body === null) return undefined
  const text = await readClone(request, maxBytes)
  // Too large or not UTF-8: no claim, and the endpoint gives its own answer.
  if (text === undefined) return undefined
  const form = parseForm(text)
  if (!(form instanceof Map)) return undefined
  const assertion = form.get("client_assertion")
  if (assertion !== undefined) {
    try {
      const claims = decodeJwt(assertion)
      const claimed = typeof claims.sub === "string" ? claims.sub : claims.iss
      if (typeof claimed === "string" && claimed !== "") return claimed
    } catch {
      // Not a JWT: fall back to client_id, as the endpoint will refuse it.
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
 * The 429 of an OAuth endpoint (RFC 6585 §4): `Retry-After` in seconds, exposed to browser clients, and an RFC 6749
 * §5.2 error body. The code is `invalid_request`, the general refusal every OAuth client understands: RFC 6749 defines
 * `temporarily_unavailable` only for the authorization endpoint's redirects and RFC 8628's `slow_down` means "poll
 * less often" to a device-flow client; the status, `Retry-After` and the description carry what happened.
 */
export const tooManyRequests = (retryAfter: number, description: string): Response =>
  tooManyRequestsSaying(retryAfter, `${description}; retry after ${retryAfter} seconds`)

/** {@link tooManyRequests} with a description that already says when to retry. */
export const tooManyRequestsSaying = (retryAfter: number, description: string): Response =>
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

type Handler<R> = (request: Request) => Effect.Effect<Response, StorageError, R>

/**
 * `handler` behind a window limit on the bucket `key` finds for a request (requests it finds none for are not
 * counted); `refusal` is the 429's description.
 */
const windowLimited =
  <R>(
    limiter: RateLimiterService,
    kind: string,
    rule: WindowRule | false,
    refusal: string,
    key: (request: Request) => Effect.Effect<string | undefined>,
    handler: Handler<R>,
  ): Handler<R> =>
  (request) =>
    rule === false
      ? handler(request)
      : Effect.gen(function* () {
          const name = yield* key(request)
          if (name === undefined) return yield* handler(request)
          const decision = yield* limiter.hit(bucket(kind, name), rule, yield* nowSeconds)
          if (!decision.allowed) return tooManyRequests(decision.retryAfter, refusal)
          return yield* handler(request)
        })

/**
 * `handler` behind a per-client window limit (the client the request claims, checked before authentication, which
 * also slows the guessing of secrets); `what` names the requests in the 429's description.
 */
export const perClient = <R>(
  config: ResolvedConfig,
  limiter: RateLimiterService,
  kind: string,
  rule: WindowRule | false,
  what: string,
  handler: Handler<R>,
): Handler<R> =>
  windowLimited(
    limiter,
    kind,
    rule,
    `too many ${what} for this client`,
    (request) => Effect.promise(() => claimedClient(request, config.maxBodyBytes)),
    handler,
  )

/** `handler` behind a per-address window limit; requests whose address is unknown are not counted. */
export const perAddress = <R>(
  config: ResolvedConfig,
  limiter: RateLimiterService,
  kind: string,
  rule: WindowRule | false,
  what: string,
  handler: Handler<R>,
): Handler<R> =>
  windowLimited(
    limiter,
    kind,
    rule,
    `too many ${what} from this address`,
    (request) => Effect.sync(() => addressOf(config, request)),
    handler,
  )

/** The outcome of {@link loginGate}. */
export type LoginGate =
  | { readonly allowed: false; readonly retryAfter: number }
  | {
      readonly allowed: true
      /** The lock in force (seconds; 0 for none) should this sign-in fail. */
      readonly lockIfFailed: number
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
    const buckets: Array<{ readonly name: string; readonly reset: boolean; readonly rule: typeof account & object }> =
      []
    const from = address === false ? undefined : addressOf(config, request)
    if (address !== false && from !== undefined) {
      buckets.push({ name: bucket("login-address", from), reset: false, rule: address })
    }
    if (account !== false) {
      buckets.push({
        name: bucket("login-account", username.normalize("NFC").toLowerCase()),
        reset: true,
        rule: account,
      })
    }
    let lock = 0
    const counted: typeof buckets = []
    for (const b of buckets) {
      const decision = yield* limiter.attempt(b.name, b.rule, now)
      if (!decision.allowed) {
        // This attempt does not happen: the buckets already counted get it back.
        for (const c of counted) yield* limiter.forgive(c.name, now)
        return { allowed: false, retryAfter: decision.retryAfter }
      }
      counted.push(b)
      lock = Math.max(lock, decision.lockIfFailed)
    }
    return {
      allowed: true,
      lockIfFailed: lock,
      succeeded: Effect.forEach(counted, (c) => (c.reset ? limiter.reset(c.name) : limiter.forgive(c.name, now)), {
        discard: true,
      }),
    }
  })
