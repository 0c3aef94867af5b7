/**
 * The `TokenVerifier` service and its implementations: JWT access tokens checked against a remote JWKS, RFC 7662
 * introspection, or the caller's own function.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-4 | RFC 9068 §4}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2 | RFC 7662 §2}
 */
import { CanonicalUri, ClientAuth, Metadata, SecureUrl, WellKnown, Wire } from "@keyway/core"
import { Cache, Clock, Context, Duration, Effect, Exit, Layer, Result, Schema } from "effect"
import { type CompactJWSHeaderParameters, createRemoteJWKSet, customFetch, errors, type JWTVerifyGetKey } from "jose"
import { audiencesOf, namesResource } from "./internal/audience.js"
import { claimsProblem, claimTypesHold, typeMatches } from "./internal/claims.js"
import { withDirect } from "./internal/direct.js"
import * as Jws from "./internal/jws.js"
import { invalid } from "./internal/reasons.js"
import {
  fromClaims,
  InvalidToken,
  type InvalidTokenReason,
  type VerificationError,
  type VerifiedToken,
  VerifierUnavailable,
} from "./VerifiedToken.js"

/**
 * Verifies access tokens. Implementations check signature or activity, issuer, audience and lifetime; the protected
 * resource additionally re-checks audience and expiry and applies scopes.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export class TokenVerifier extends Context.Service<
  TokenVerifier,
  {
    readonly verify: (token: string) => Effect.Effect<VerifiedToken, VerificationError>
  }
>()("@keyway/resource-server/TokenVerifier") {
  /**
   * JWT access tokens (RFC 9068) verified with keys from a remote JWKS. Fails with {@link InvalidVerifierOptions} for
   * unusable options.
   */
  static readonly layerJwt = (options: JwtVerifierOptions): Layer.Layer<TokenVerifier, InvalidVerifierOptions> =>
    Layer.effect(
      TokenVerifier,
      Effect.flatMap(
        checked(() => prepareJwt(options)),
        makeJwtVerifier,
      ),
    )

  /**
   * Opaque or JWT tokens checked at an RFC 7662 introspection endpoint. Fails with {@link InvalidVerifierOptions} for
   * unusable options.
   */
  static readonly layerIntrospection = (
    options: IntrospectionVerifierOptions,
  ): Layer.Layer<TokenVerifier, InvalidVerifierOptions> =>
    Layer.effect(
      TokenVerifier,
      checked(() => TokenVerifier.of({ verify: makeIntrospectionVerify(options) })),
    )

  /** The caller's own verification function. */
  static readonly layerCustom = (verify: CustomVerify): Layer.Layer<TokenVerifier> =>
    Layer.succeed(TokenVerifier, TokenVerifier.of({ verify: makeCustomVerify(verify) }))
}

/**
 * Asymmetric JWS algorithms accepted by default: never `none`, never HMAC.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8725.html#section-3.1 | RFC 8725 §3.1}
 */
export const defaultAlgorithms: ReadonlyArray<string> = [
  "ES256",
  "ES384",
  "ES512",
  "PS256",
  "PS384",
  "PS512",
  "RS256",
  "RS384",
  "RS512",
  "EdDSA",
  "Ed25519",
]

/**
 * Largest clock skew any verifier accepts, in seconds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7519.html#section-4.1.4 | RFC 7519 §4.1.4}
 */
export const maxClockSkewSeconds = 300

/**
 * Options of the JWT verifier.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-4 | RFC 9068 §4}
 */
export interface JwtVerifierOptions {
  /** This server's canonical URI: `aud` must name it (compared canonically). */
  readonly audience: string
  /** Accepted issuers (`iss`), normally the protected resource's authorization servers. */
  readonly issuers: ReadonlyArray<string>
  /**
   * The JWKS URL, or one per issuer. Without it, each issuer's `jwks_uri` is read from its authorization server
   * metadata (RFC 8414 / OpenID Discovery) on first use.
   */
  readonly jwksUri?: string | Readonly<Record<string, string>>
  /** Accepted `alg` values; HMAC and `none` are refused. Default {@link defaultAlgorithms}. */
  readonly algorithms?: ReadonlyArray<string>
  /** Tolerance for `exp`, `nbf` and `iat`, at most {@link maxClockSkewSeconds}. Default 30. */
  readonly clockSkewSeconds?: number
  /** Require `typ: at+jwt` (RFC 9068 §2.1). Default true. */
  readonly requireAccessTokenType?: boolean
  /** Minimum time between two JWKS fetches caused by an unknown `kid`. Default 30 000 ms. */
  readonly jwksCooldownMs?: number
  /** How long fetched keys are used before refetching. Default 600 000 ms. */
  readonly jwksCacheMaxAgeMs?: number
  /** Timeout of one JWKS fetch. Default 5 000 ms. */
  readonly jwksTimeoutMs?: number
  /** Allow `http:` JWKS URLs on non-loopback hosts (development only). Default false. */
  readonly allowInsecureHttp?: boolean
}

/**
 * Verifier options that cannot work: the failure of {@link TokenVerifier.layerJwt} and
 * {@link TokenVerifier.layerIntrospection}, thrown by {@link jwt} and when the protected resource is created.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8725.html#section-3.1 | RFC 8725 §3.1}
 */
export class InvalidVerifierOptions extends Schema.TaggedError<InvalidVerifierOptions>()("InvalidVerifierOptions", {
  /** The option at fault, e.g. `algorithms`, `jwksUri`, `endpoint`. */
  option: Schema.String,
  /** What is wrong with it and what is accepted. */
  message: Schema.String,
}) {}

const refuse = (option: string, message: string): InvalidVerifierOptions =>
  new InvalidVerifierOptions({ option, message })

/** Runs a constructor that checks options: a refusal becomes the failure, anything else stays a defect. */
const checked = <A>(make: () => A): Effect.Effect<A, InvalidVerifierOptions> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(make())
    } catch (error) {
      if (error instanceof InvalidVerifierOptions) return Effect.fail(error)
      throw error
    }
  })

const checkAudience = (audience: string): CanonicalUri.CanonicalUri => {
  const result = CanonicalUri.validate(audience)
  if (Result.isFailure(result)) throw refuse("audience", `audience is not a canonical URI: ${result.failure.message}`)
  return result.success
}

const checkAlgorithms = (algorithms: ReadonlyArray<string>): ReadonlyArray<string> => {
  if (algorithms.length === 0) throw refuse("algorithms", "algorithms must not be empty")
  for (const alg of algorithms) {
    if (alg.toLowerCase() === "none") throw refuse("algorithms", 'algorithm "none" is never accepted')
    if (/^HS\d+$/i.test(alg)) {
      throw refuse("algorithms", `HMAC algorithm "${alg}" is not accepted: a public JWKS cannot verify it`)
    }
  }
  return algorithms
}

const checkEndpoint = (name: string, value: string, allowInsecure: boolean | undefined): URL => {
  if (!URL.canParse(value)) throw refuse(name, `${name} is not a URL: ${value}`)
  const url = new URL(value)
  if (!SecureUrl.isAllowed(url, { httpLoopback: true, httpAnyHost: allowInsecure === true })) {
    throw refuse(name, `${name} must use https: ${value}`)
  }
  return url
}

const checkSkew = (skew: number | undefined): number => {
  const value = skew ?? 30
  if (!Number.isFinite(value) || value < 0 || value > maxClockSkewSeconds) {
    throw refuse("clockSkewSeconds", `clockSkewSeconds must be between 0 and ${maxClockSkewSeconds}`)
  }
  return value
}

/** A JWKS retrieval failure, kept apart from key-selection errors that say something about the token. */
class JwksFailure extends Error {}

const KEY_SELECTION_CODES = new Set([
  "ERR_JWKS_NO_MATCHING_KEY",
  "ERR_JWKS_MULTIPLE_MATCHING_KEYS",
  "ERR_JOSE_ALG_NOT_ALLOWED",
  "ERR_JOSE_NOT_SUPPORTED",
  "ERR_JWK_INVALID",
])

const codeOf = (error: unknown): string | undefined =>
  error instanceof errors.JOSEError ? (error as { readonly code: string }).code : undefined

interface RemoteOptions {
  readonly cooldownDuration: number
  readonly cacheMaxAge: number
  readonly timeoutDuration: number
}

/** A key selection: jose's key function, always asynchronous. */
type SelectKey = (...args: Parameters<JWTVerifyGetKey>) => Promise<Awaited<ReturnType<JWTVerifyGetKey>>>

/** Most keys a {@link KeySet} remembers: as many as a JWKS holds, times the algorithms each may verify. */
const REMEMBERED_KEYS = 256

/**
 * A remote JWKS (jose's fetching, caching and cooldown), and the keys jose selected from its current fetch by the
 * header's `alg` and `kid`, remembered so that the next token with the same header parameters gets its key without
 * a promise. Each fetch forgets them: a key removed from the set is never used after the fetch that removed it.
 */
interface KeySet {
  /** The key jose would select for `header` now, when it selected one before from the same fetch. */
  readonly remembered: (header: Readonly<Record<string, unknown>>) => CryptoKey | undefined
  /** jose's selection, fetching the set when it is stale or the `kid` unknown. */
  readonly select: SelectKey
}

// jose selects by `alg` and `kid` only (a string `kid`, or none).
const slotOf = (header: Readonly<Record<string, unknown>>): string | undefined => {
  const { alg, kid } = header
  if (typeof alg !== "string") return undefined
  if (kid === undefined) return alg
  return typeof kid === "string" ? `${alg}\n${kid}` : undefined
}

const remoteKeySet = (url: URL, options: RemoteOptions): KeySet => {
  const keys = new Map<string, CryptoKey>()
  let fetches = 0
  const remote = createRemoteJWKSet(url, {
    ...options,
    // Every fetch of the set starts here: the keys remembered from the previous one are forgotten.
    [customFetch]: (input, init) => {
      fetches++
      keys.clear()
      return globalThis.fetch(input, init)
    },
  })
  const guarded = guard(remote)
  return {
    // jose uses its current set without fetching while it is fresh: the remembered key is the one it would select.
    remembered: (header) => {
      const slot = slotOf(header)
      return slot === undefined || !remote.fresh ? undefined : keys.get(slot)
    },
    select: (header, token) => {
      const before = fetches
      return guarded(header, token).then((key) => {
        const slot = slotOf(header as Readonly<Record<string, unknown>>)
        // Remembered only when selected from the set still current, with no fetch since or under way.
        if (
          slot !== undefined &&
          before === fetches &&
          !remote.reloading &&
          remote.fresh &&
          keys.size < REMEMBERED_KEYS &&
          key instanceof CryptoKey
        ) {
          keys.set(slot, key)
        }
        return key
      })
    },
  }
}

/** The JWT verifier's options, checked, with the key sets that need no discovery. */
interface JwtSetup {
  readonly algorithms: ReadonlySet<string>
  readonly clockTolerance: number
  readonly audience: CanonicalUri.CanonicalUri
  readonly issuers: ReadonlyArray<string>
  readonly remoteOptions: RemoteOptions
  readonly shared: KeySet | undefined
  readonly perIssuer: ReadonlyMap<string, KeySet>
  readonly typ: string | undefined
  readonly allowInsecureHttp: boolean | undefined
}

const prepareJwt = (options: JwtVerifierOptions): JwtSetup => {
  const algorithms = new Set(checkAlgorithms(options.algorithms ?? defaultAlgorithms))
  const clockTolerance = checkSkew(options.clockSkewSeconds)
  if (options.issuers.length === 0) throw refuse("issuers", "issuers must not be empty")
  const audience = checkAudience(options.audience)
  const issuers = [...options.issuers]
  const remoteOptions = {
    cooldownDuration: options.jwksCooldownMs ?? 30_000,
    cacheMaxAge: options.jwksCacheMaxAgeMs ?? 600_000,
    timeoutDuration: options.jwksTimeoutMs ?? 5_000,
  }
  const perIssuer = new Map<string, KeySet>()
  const jwksUri = options.jwksUri
  const shared =
    typeof jwksUri === "string"
      ? remoteKeySet(checkEndpoint("jwksUri", jwksUri, options.allowInsecureHttp), remoteOptions)
      : undefined
  if (typeof jwksUri === "object") {
    for (const issuer of issuers) {
      const uri = jwksUri[issuer]
      if (uri === undefined) throw refuse("jwksUri", `no jwksUri for issuer ${issuer}`)
      perIssuer.set(issuer, remoteKeySet(checkEndpoint("jwksUri", uri, options.allowInsecureHttp), remoteOptions))
    }
  }
  return {
    algorithms,
    clockTolerance,
    audience,
    issuers,
    remoteOptions,
    shared,
    perIssuer,
    typ: options.requireAccessTokenType === false ? undefined : "at+jwt",
    allowInsecureHttp: options.allowInsecureHttp,
  }
}

/** A JWT read up to its issuer: the encoded parts and the decoded claims. */
interface Read {
  readonly token: string
  readonly parts: readonly [string, string, string]
  readonly claims: Record<string, unknown>
  readonly iss: string
}

/** What a protected header allows, decided once per distinct header (see `headerOf` below). */
interface HeaderInfo {
  readonly header: Readonly<Record<string, unknown>>
  /** The header's algorithm, or why the header is refused. */
  readonly algorithm: Jws.SignatureAlgorithm | InvalidTokenReason
  /** Whether its `typ` is the one required. */
  readonly typed: boolean
}

/** Most distinct protected headers a verifier remembers; an authorization server signs with a handful. */
const REMEMBERED_HEADERS = 64

type Verified = Result.Result<VerifiedToken, VerificationError>

const makeJwtVerifier = (setup: JwtSetup): Effect.Effect<TokenVerifier["Service"]> =>
  Effect.gen(function* () {
    const { algorithms, audience, clockTolerance, issuers, perIssuer, remoteOptions, shared, typ } = setup
    // Without a jwksUri, each issuer's `jwks_uri` is discovered from its metadata on first use, once for concurrent
    // requests; a failed discovery is kept for the JWKS cooldown, so an unreachable authorization server is not
    // hammered.
    const discovered = yield* Cache.makeWith(
      (issuer: string) => discoverJwks(issuer, remoteOptions, setup.allowInsecureHttp),
      {
        capacity: Math.max(1, issuers.length),
        timeToLive: (exit) =>
          Exit.isSuccess(exit) ? Duration.infinity : Duration.millis(remoteOptions.cooldownDuration),
      },
    )
    // Discovered key sets, for the direct form (the Effect form reads them from the cache above).
    const found = new Map<string, KeySet>()
    const keysOf = (iss: string): KeySet | undefined => shared ?? perIssuer.get(iss) ?? found.get(iss)

    // Each part is decoded once: the claims first, so that the key set is chosen by issuer and a token from an
    // unknown issuer never triggers a JWKS fetch.
    const read = (token: string): Read | InvalidToken => {
      const parts = Jws.split(token)
      const claims = parts === undefined ? undefined : Jws.decodeObject(parts[1])
      if (parts === undefined || claims === undefined) return invalid("malformed")
      const iss = claims.iss
      if (typeof iss !== "string" || !issuers.includes(iss)) return invalid("wrong-issuer")
      return { token, parts, claims, iss }
    }

    // The tokens of one authorization server share a few protected headers: what each allows is decided once, from
    // the header exactly as encoded. Emptied when full, so headers sent to fill it cost only their own decoding.
    const headers = new Map<string, HeaderInfo>()
    const headerOf = (encoded: string): HeaderInfo | undefined => {
      const known = headers.get(encoded)
      if (known !== undefined) return known
      const header = Jws.decodeObject(encoded)
      if (header === undefined) return undefined
      const info: HeaderInfo = {
        header: Object.freeze(header),
        algorithm: Jws.algorithmOf(header, algorithms),
        typed: typeMatches(header, typ),
      }
      if (headers.size >= REMEMBERED_HEADERS) headers.clear()
      headers.set(encoded, info)
      return info
    }

    const refused = (reason: InvalidTokenReason): Verified => Result.fail(invalid(reason))

    // The signed claims' checks, in the order jose's `jwtVerify` made them for this verifier.
    const accept = (info: HeaderInfo, claims: Record<string, unknown>, now: number): Verified => {
      if (!info.typed) return refused("wrong-type")
      const problem = claimsProblem(claims, Math.floor(now / 1000), clockTolerance)
      if (problem !== undefined) return refused(problem)
      if (!claimTypesHold(claims)) return refused("malformed")
      if (!namesResource(audiencesOf(claims.aud), audience)) return refused("wrong-audience")
      return Result.succeed(fromClaims(claims))
    }

    // The rest of the verification, one code for both forms, handing its result to `settle` once. A key remembered
    // from the current JWKS and `node:crypto`'s callback leave the caller's promise the only one of a verification.
    const finish = ({ token, parts, claims }: Read, keys: KeySet, now: number, settle: (r: Verified) => void) => {
      const failed = (error: unknown) => settle(Result.fail(toVerificationError(error, "jwt")))
      const info = headerOf(parts[0])
      if (info === undefined) return settle(refused("malformed"))
      const algorithm = info.algorithm
      if (typeof algorithm === "string") return settle(refused(algorithm))
      const withKey = (key: unknown): void => {
        try {
          const signature = Jws.decodeSignature(parts[2])
          if (!Jws.fits(key, algorithm) || signature === undefined) {
            settle(refused("malformed"))
            return
          }
          const signingInput = token.slice(0, parts[0].length + 1 + parts[1].length)
          Jws.verifySignatureThen(algorithm, key, signingInput, signature, (verified) => {
            try {
              settle(verified ? accept(info, claims, now) : refused("bad-signature"))
            } catch (error) {
              failed(error)
            }
          })
        } catch (error) {
          failed(error)
        }
      }
      const key = keys.remembered(info.header)
      if (key !== undefined) return withKey(key)
      keys
        .select(info.header as CompactJWSHeaderParameters, {
          protected: parts[0],
          payload: parts[1],
          signature: parts[2],
        })
        .then(withKey, (error: unknown) => settle(Result.fail(toVerificationError(mapJoseError(error), "jwks"))))
    }
    const run = (reading: Read, keys: KeySet, now: number): Promise<Verified> =>
      new Promise((resolve) => {
        try {
          finish(reading, keys, now, resolve)
        } catch (error) {
          resolve(Result.fail(toVerificationError(error, "jwt")))
        }
      })

    const verify = Effect.fnUntraced(function* (token: string) {
      const reading = read(token)
      if (reading instanceof InvalidToken) return yield* reading
      let keys = keysOf(reading.iss)
      if (keys === undefined) {
        keys = yield* Cache.get(discovered, reading.iss)
        found.set(reading.iss, keys)
      }
      const now = yield* Clock.currentTimeMillis
      const using = keys
      return yield* Effect.fromResult(yield* Effect.promise(() => run(reading, using, now)))
    })
    const direct = (token: string, now: number) => {
      const reading = read(token)
      if (reading instanceof InvalidToken) return Promise.resolve(Result.fail(reading))
      const keys = keysOf(reading.iss)
      if (keys === undefined) return undefined
      return run(reading, keys, now)
    }
    return TokenVerifier.of({ verify: withDirect(verify, direct) })
  })

/**
 * Finds an issuer's `jwks_uri` in its authorization server metadata, trying the well-known locations in the MCP
 * order and using the first that answers 200. The document is processed by core's
 * {@link Metadata.processAuthorizationServerMetadata}, as every role does: its schema, its `issuer` identical to the
 * issuer (RFC 8414 §3.3) and a published `jwks_uri`; PKCE is not this reader's concern. The `jwks_uri` itself must
 * use https except on loopback.
 */
const discoverJwks = Effect.fnUntraced(function* (
  issuer: string,
  remoteOptions: RemoteOptions,
  allowInsecure: boolean | undefined,
) {
  const unavailable = (detail: string) => new VerifierUnavailable({ source: "jwks", detail })
  for (const location of WellKnown.authorizationServerMetadataUrls(issuer)) {
    const response = yield* Effect.tryPromise({
      try: () =>
        fetch(location.url, {
          headers: { accept: "application/json" },
          redirect: "manual",
          signal: AbortSignal.timeout(remoteOptions.timeoutDuration),
        }),
      catch: (error) =>
        unavailable(`metadata of ${issuer}: ${error instanceof Error ? error.message : "request failed"}`),
    })
    if (response.status !== 200) {
      yield* Effect.ignore(Effect.tryPromise(async () => response.body?.cancel()))
      continue
    }
    const document: unknown = yield* Effect.promise(() => response.json().catch(() => undefined))
    const metadata = Metadata.processAuthorizationServerMetadata(issuer, location.url, document, {
      pkce: false,
      endpoints: ["jwks_uri"],
    })
    if (Result.isFailure(metadata)) return yield* unavailable(metadata.failure.message)
    const jwksUri = metadata.success.jwks_uri!
    const url = yield* Effect.try({
      try: () => checkEndpoint("jwks_uri", jwksUri, allowInsecure),
      catch: (error) => unavailable(error instanceof Error ? error.message : "invalid jwks_uri"),
    })
    return remoteKeySet(url, remoteOptions)
  }
  return yield* unavailable(`no authorization server metadata found for ${issuer}`)
})

const guard =
  (keys: JWTVerifyGetKey): SelectKey =>
  async (header, token) => {
    try {
      return await keys(header, token)
    } catch (error) {
      const code = codeOf(error)
      if (code !== undefined && KEY_SELECTION_CODES.has(code)) throw error
      throw new JwksFailure(error instanceof Error ? error.message : "JWKS retrieval failed")
    }
  }

// Only the key function's failures reach here: JWKS retrieval, or no usable key for the token.
const mapJoseError = (error: unknown): unknown => {
  if (error instanceof JwksFailure) return error
  switch (codeOf(error)) {
    case "ERR_JOSE_ALG_NOT_ALLOWED":
    case "ERR_JOSE_NOT_SUPPORTED":
      return invalid("algorithm-not-allowed")
    case "ERR_JWKS_NO_MATCHING_KEY":
    case "ERR_JWKS_MULTIPLE_MATCHING_KEYS":
    case "ERR_JWK_INVALID":
      return invalid("unknown-key")
    default:
      return invalid("malformed")
  }
}

const toVerificationError = (error: unknown, source: string): VerificationError => {
  if (error instanceof InvalidToken || error instanceof VerifierUnavailable) return error
  return new VerifierUnavailable({ source, detail: error instanceof Error ? error.message : String(error) })
}

/**
 * How the resource server authenticates to the introspection endpoint.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2.1 | RFC 7662 §2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 */
export type IntrospectionClientAuth =
  | {
      readonly method: "client_secret_basic" | "client_secret_post"
      readonly clientId: string
      readonly clientSecret: string
    }
  | { readonly method: "bearer"; readonly token: string }

/**
 * Options of the introspection verifier.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2 | RFC 7662 §2}
 */
export interface IntrospectionVerifierOptions {
  /** The introspection endpoint URL. */
  readonly endpoint: string
  /** How to authenticate to it. */
  readonly clientAuth: IntrospectionClientAuth
  /** This server's canonical URI: the response's `aud` must name it. */
  readonly audience: string
  /** When given, a response `iss` must be one of these. */
  readonly issuers?: ReadonlyArray<string>
  /** Refuse responses without `aud`. Default true (MCP requires audience validation). */
  readonly requireAudience?: boolean
  /** How long an `active` answer is reused (never beyond `exp`). Default 60 s. */
  readonly cacheTtlSeconds?: number
  /** Tolerance for `exp` and `nbf`. Default 30 s, at most {@link maxClockSkewSeconds}. */
  readonly clockSkewSeconds?: number
  /** Timeout of one introspection call. Default 5 000 ms. */
  readonly timeoutMs?: number
  /** The fetch to use; the global one by default. */
  readonly fetch?: typeof globalThis.fetch
  /** Allow an `http:` endpoint on a non-loopback host (development only). Default false. */
  readonly allowInsecureHttp?: boolean
}

const formEncode = ClientAuth.formUrlEncode

const makeIntrospectionVerify = (
  options: IntrospectionVerifierOptions,
): ((token: string) => Effect.Effect<VerifiedToken, VerificationError>) => {
  const endpoint = checkEndpoint("endpoint", options.endpoint, options.allowInsecureHttp).href
  const audience = checkAudience(options.audience)
  const skew = checkSkew(options.clockSkewSeconds)
  const ttlMs = (options.cacheTtlSeconds ?? 60) * 1000
  const timeoutMs = options.timeoutMs ?? 5_000
  const requireAudience = options.requireAudience ?? true
  const doFetch = options.fetch ?? globalThis.fetch
  const auth = options.clientAuth
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json",
  }
  let extraForm = ""
  if (auth.method === "bearer") {
    headers.authorization = `Bearer ${auth.token}`
  } else {
    const applied = ClientAuth.apply(auth.method, { clientId: auth.clientId, clientSecret: auth.clientSecret })
    Object.assign(headers, applied.headers)
    for (const [name, value] of Object.entries(applied.form)) extraForm += `&${name}=${formEncode(value)}`
  }

  const unavailable = (detail: string) => new VerifierUnavailable({ source: "introspection", detail })
  return Effect.fnUntraced(function* (token: string) {
    const response = yield* Effect.tryPromise({
      try: () =>
        doFetch(endpoint, {
          method: "POST",
          headers,
          body: `token=${formEncode(token)}&token_type_hint=access_token${extraForm}`,
          redirect: "manual",
          signal: AbortSignal.timeout(timeoutMs),
        }),
      catch: (error) => unavailable(error instanceof Error ? error.message : "request failed"),
    })
    if (response.status !== 200) {
      // Let go of the body without waiting: the caller's fetch may keep a clone, which holds the cancellation open.
      response.body?.cancel().catch(() => undefined)
      return yield* unavailable(`status ${response.status}`)
    }
    const body: unknown = yield* Effect.tryPromise({
      try: () => response.json(),
      catch: () => unavailable("response is not JSON"),
    })
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* unavailable("response is not a JSON object")
    }
    const claims = body as Record<string, unknown>
    if (claims.active !== true) return yield* invalid("inactive")
    const nowMs = yield* Clock.currentTimeMillis
    const now = nowMs / 1000
    if (typeof claims.exp === "number" && claims.exp + skew <= now) return yield* invalid("expired")
    if (typeof claims.nbf === "number" && claims.nbf - skew > now) return yield* invalid("not-yet-valid")
    if (options.issuers !== undefined && claims.iss !== undefined) {
      if (typeof claims.iss !== "string" || !options.issuers.includes(claims.iss)) return yield* invalid("wrong-issuer")
    }
    const audiences = audiencesOf(claims.aud)
    if (audiences.length === 0 ? requireAudience : !namesResource(audiences, audience)) {
      return yield* invalid("wrong-audience")
    }
    // The remaining members must have their RFC 7662 §2.2 types: a misspelt `exp` must not read as "no expiry".
    const typed = Wire.validate(Wire.IntrospectionResponse, claims, Wire.Documents.introspectionResponse)
    if (Result.isFailure(typed)) return yield* unavailable(typed.failure.message)
    return fromClaims(claims, nowMs + ttlMs)
  })
}

/**
 * A caller-supplied verifier. Return the verified token, or `null`/`undefined` to refuse it; throw
 * {@link InvalidToken} to refuse with a specific reason. Any other exception counts as "verification unavailable"
 * (still a 401: the server fails closed).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export type CustomVerify = (
  token: string,
) => Promise<VerifiedToken | null | undefined> | VerifiedToken | null | undefined

const makeCustomVerify =
  (verify: CustomVerify): ((token: string) => Effect.Effect<VerifiedToken, VerificationError>) =>
  (token) =>
    Effect.tryPromise({
      try: async () => {
        const result = await verify(token)
        if (result === null || result === undefined) throw invalid("rejected")
        return result
      },
      catch: (error) => toVerificationError(error, "custom"),
    })

/**
 * What the protected resource tells a verifier definition about itself, so the plain-face helpers
 * ({@link jwt}, {@link introspection}) can default audience and issuers.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 */
export interface ResourceIdentity {
  /** The canonical server URI. */
  readonly resource: string
  /** The authorization servers of the protected resource metadata. */
  readonly authorizationServers: ReadonlyArray<string>
}

/**
 * A verifier choice for the plain face: turned into a {@link TokenVerifier} layer once the protected resource knows
 * its own identity.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export interface VerifierDefinition {
  readonly _tag: "VerifierDefinition"
  readonly layer: (identity: ResourceIdentity) => Layer.Layer<TokenVerifier, InvalidVerifierOptions>
}

/**
 * Options of {@link jwt}: {@link JwtVerifierOptions} whose audience defaults to the resource and whose issuers default
 * to its authorization servers.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-4 | RFC 9068 §4}
 */
export type JwtOptions = Omit<JwtVerifierOptions, "audience" | "issuers"> & {
  readonly audience?: string
  readonly issuers?: ReadonlyArray<string>
}

/**
 * JWT access tokens verified against a remote JWKS.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-4 | RFC 9068 §4}
 */
export const jwt = (options: JwtOptions = {}): VerifierDefinition => {
  const build = (identity: ResourceIdentity): JwtVerifierOptions => ({
    ...options,
    audience: options.audience ?? identity.resource,
    issuers: options.issuers ?? identity.authorizationServers,
  })
  // Fail at definition time for option errors that do not depend on the resource.
  checkAlgorithms(options.algorithms ?? defaultAlgorithms)
  checkSkew(options.clockSkewSeconds)
  return {
    _tag: "VerifierDefinition",
    layer: (identity) => TokenVerifier.layerJwt(build(identity)),
  }
}

/**
 * Options of {@link introspection}: {@link IntrospectionVerifierOptions} whose audience defaults to the resource and
 * whose issuers default to its authorization servers.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2 | RFC 7662 §2}
 */
export type IntrospectionOptions = Omit<IntrospectionVerifierOptions, "audience" | "issuers"> & {
  readonly audience?: string
  readonly issuers?: ReadonlyArray<string>
}

/**
 * Tokens checked at an RFC 7662 introspection endpoint.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2 | RFC 7662 §2}
 */
export const introspection = (options: IntrospectionOptions): VerifierDefinition => ({
  _tag: "VerifierDefinition",
  layer: (identity) =>
    TokenVerifier.layerIntrospection({
      ...options,
      audience: options.audience ?? identity.resource,
      issuers: options.issuers ?? identity.authorizationServers,
    }),
})

/**
 * The caller's own verification function. The protected resource still checks audience and expiry of what it returns.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export const custom = (verify: CustomVerify): VerifierDefinition => ({
  _tag: "VerifierDefinition",
  layer: () => TokenVerifier.layerCustom(verify),
})
