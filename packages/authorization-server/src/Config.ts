/**
 * Configuration of the authorization server: issuer, the MCP servers (resources) it issues tokens for, users,
 * pre-registered clients, token lifetimes, registration and the development relaxations.
 *
 * Each shape of the options is declared once, as a zod schema; the types users write (`ConfigOptions`,
 * `ClientOptions`, ...) are derived from the schemas with `z.input`, so the types and the rules cannot drift apart.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13 | OAuth 2.1}
 * @module
 */
import { CanonicalUri, Grant, Scope, SecureUrl } from "@keyway/core"
import { Effect, Result, Schema } from "effect"
import { z } from "zod"
import type { ResolverOptions } from "./cimd/ClientMetadataResolver.js"
import type { PolicyFunction, PolicyOptions } from "./cimd/TrustPolicy.js"
import type { AuthorizationServerExtension } from "./Extension.js"
import { grantTypes as servedGrantTypes } from "./grants/grantTypes.js"
import { declarationProblem } from "./internal/extensionMetadata.js"
import { resolveUpstream } from "./internal/upstreamOptions.js"
import type { Options as OutboundOptions } from "./outbound/OutboundFetch.js"
import type { ResolvedUpstream, UpstreamIdentityFunction, UpstreamOptions } from "./proxy/UpstreamProvider.js"
import type { BackoffRule, WindowRule } from "./RateLimiter.js"

export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  /** Which option is unusable, why, and what is accepted. */
  message: Schema.String,
}) {}

/**
 * The defaults {@link resolve} applies to options left out, in seconds (bytes for `maxBodyBytes`). Other
 * configuration front ends (the runnable app) take them from here rather than restating them.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2 (code lifetime)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5 (JWK Set)}
 */
export const defaults = {
  lifetimes: {
    accessToken: 300,
    refreshToken: 30 * 24 * 3600,
    authorizationCode: 60,
    session: 8 * 3600,
    refreshTokenReuseInterval: 60,
    unusedRegistration: 24 * 3600,
    registeredClientSecret: false,
  },
  signingKeys: { rotateEvery: 30 * 24 * 3600, publishAhead: 600, checkEvery: 60, clockSkew: 60 },
  maintenance: { purgeEvery: 300 },
  maxBodyBytes: 64 * 1024,
  registration: false,
  rotateConfidentialRefreshTokens: true,
  rateLimits: {
    login: {
      account: { freeAttempts: 5, delay: 60, maxDelay: 900, forgetAfter: 3600 },
      address: { freeAttempts: 5, delay: 60, maxDelay: 900, forgetAfter: 3600 },
    },
    registration: { max: 20, window: 3600 },
    token: { max: 1200, window: 60 },
    refresh: { max: 60, window: 60 },
    workload: { max: 600, window: 60 },
    revocation: { max: 600, window: 60 },
    introspection: { max: 6000, window: 60 },
    clientAuthentication: { max: 20, window: 60 },
    metadataFetches: { max: 20, window: 60 },
  },
} as const

/**
 * The bounds {@link resolve} enforces beyond "a positive number": the longest authorization-code lifetime (OAuth 2.1
 * recommends at most a minute), the shortest secret (client secrets and `sessionSecret`: the store hashes secrets
 * with unsalted SHA-256, safe only for high-entropy values) and the shortest user password (see
 * {@link passwordProblem}).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-10.10 | RFC 6749 §10.10 (credentials entropy)}
 * @see {@link https://pages.nist.gov/800-63-4/sp800-63b.html#password | NIST SP 800-63B-4 §3.1.1.2 (password verifiers)}
 */
export const limits = {
  /** Seconds. */
  authorizationCodeMax: 60,
  /** Characters. */
  secretMinLength: 32,
  /** Characters (Unicode code points): a password used alone, as the login page uses it. */
  passwordMinLength: 15,
} as const

/**
 * What is wrong with a user's new password, or `undefined` when it is long enough: a password that is the only
 * factor must have at least {@link limits}`.passwordMinLength` (15) characters, each Unicode code point counting as
 * one (after NFC normalisation, as it is hashed). `UserAuthenticator.hashPassword` applies it, and so should every
 * other place that takes a new password; passwords hashed before keep signing in.
 *
 * @see {@link https://pages.nist.gov/800-63-4/sp800-63b.html#password | NIST SP 800-63B-4 §3.1.1.2 (password verifiers)}
 */
export const passwordProblem = (password: string): string | undefined =>
  [...password.normalize("NFC")].length < limits.passwordMinLength
    ? `must be at least ${limits.passwordMinLength} characters long (NIST SP 800-63B-4 §3.1.1.2, a password used alone); a few unrelated words make one easy to remember`
    : undefined

/**
 * Whether `publishAhead` can work with `rotateEvery` (a missing value takes its default): a new key must start
 * signing before the next rotation begins, or no new key would ever take over. The rotation period it is checked
 * against, or `undefined` when they fit.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5 (JWK Set)}
 */
export const publishAheadConflict = (options: SigningKeyOptions | undefined): number | undefined => {
  const rotateEvery = options?.rotateEvery ?? defaults.signingKeys.rotateEvery
  const publishAhead = options?.publishAhead ?? defaults.signingKeys.publishAhead
  return rotateEvery !== false && publishAhead >= rotateEvery ? rotateEvery : undefined
}

/**
 * The token endpoint authentication method of a configured client: the explicit one, else `client_secret_basic` with a
 * secret, `private_key_jwt` with keys, `none` otherwise.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export const clientAuthMethod = (c: ClientOptions): TokenEndpointAuthMethod =>
  c.tokenEndpointAuthMethod ??
  (c.clientSecret !== undefined ? "client_secret_basic" : c.jwks !== undefined ? "private_key_jwt" : "none")

const aString = z.string({ error: "must be a string" })
const nonEmpty = aString.min(1, "must not be empty")
const aBoolean = z.boolean({ error: "must be true or false" })
const anObject = { error: "must be an object" }
const anArray = { error: "must be an array" }
const aNumber = z.number({ error: "must be a number" })
/** Seconds (or milliseconds, or bytes) that count whole units. */
const positiveWhole = aNumber.int("must be a whole number").positive("must be positive")
const wholeFromZero = aNumber.int("must be a whole number").min(0, "must not be negative")
/** A period between two runs of a timer: fractions of a second are fine. */
const period = aNumber.positive("must be positive")
const orFalse = <T extends z.ZodType>(schema: T, what: string) =>
  z.union([schema, z.literal(false)], {
    // A wrong type gets one message; a number out of range keeps the number rule's own message (first branch).
    error: (issue) =>
      issue.code === "invalid_union" && typeof issue.input === "number"
        ? (issue.errors[0]?.[0]?.message ?? what)
        : what,
  })
/**
 * The members of a shape as the options types have always declared them: an optional member may be left out, and
 * where it is given it has a value (`name?: string`, which with `exactOptionalPropertyTypes` does not take
 * `undefined`). Only the type changes: validation still takes a member given as `undefined` as left out, as
 * JavaScript callers (and TypeScript callers without that setting) write it.
 */
type ExactShape<S> = { [K in keyof S]: S[K] extends z.ZodOptional<infer T> ? z.ZodExactOptional<T> : S[K] }
const exact = <S extends z.core.$ZodLooseShape>(shape: S): ExactShape<S> => shape as unknown as ExactShape<S>
// The array schema as the type of what it accepts and gives: options are read, never modified, so a caller's
// read-only array is as good as any.
const readonlyArray = <T extends z.ZodType>(
  items: z.ZodArray<T>,
): z.ZodType<ReadonlyArray<z.output<T>>, ReadonlyArray<z.input<T>>> => items

/**
 * The schema of {@link ResourceOptions}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export const resourceSchema = z.strictObject(
  exact({
    /** The canonical server URI (the `resource` value and the `aud` of its tokens). */
    uri: nonEmpty,
    /** Human-readable name shown on the consent page. */
    name: aString.optional(),
    /** The scopes this resource understands, each with the description shown on the consent page. */
    scopes: z
      .record(z.string(), aString, { error: "must be an object mapping each scope to its description" })
      .refine(
        (scopes) => Object.keys(scopes).length > 0,
        "must name at least one scope (each with the description shown on the consent page): a client can be granted only scopes a resource defines",
      ),
  }),
  anObject,
)

/**
 * A protected MCP server this authorization server issues access tokens for, identified by its canonical URI.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 * @interface
 */
export type ResourceOptions = Readonly<z.input<typeof resourceSchema>>

/**
 * The schema of {@link TokenEndpointAuthMethod}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export const tokenEndpointAuthMethodSchema = z.enum(
  ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"],
  { error: "must be one of none, client_secret_basic, client_secret_post, private_key_jwt" },
)

/**
 * How a client authenticates at the token endpoint.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export type TokenEndpointAuthMethod = z.input<typeof tokenEndpointAuthMethodSchema>

/**
 * A grant type: `authorization_code` and `refresh_token` are built in; extensions add others (for example
 * `client_credentials`). Any non-empty string passes the schema; which ones a configuration serves is checked by
 * {@link resolve}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2 (grant_types)}
 */
export type GrantType = "authorization_code" | "refresh_token" | (string & {})

// A string schema typed with the built-in names, so that editors offer them.
const grantType: z.ZodType<GrantType, GrantType> = nonEmpty

/**
 * The schema of {@link ClientOptions}; the rules between its fields (a secret for the secret methods, keys for
 * `private_key_jwt`, a redirect URI for a client with grants) are checked by {@link resolve}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-2 | OAuth 2.1 §2}
 */
export const clientSchema = z.strictObject(
  exact({
    clientId: nonEmpty,
    clientName: aString.optional(),
    /** The client secret in clear; it is hashed before it reaches storage. */
    clientSecret: nonEmpty.optional(),
    redirectUris: readonlyArray(z.array(nonEmpty, { error: "must be an array of URLs" })),
    /** `none` (public client) when omitted and no secret or key set is given. */
    tokenEndpointAuthMethod: tokenEndpointAuthMethodSchema.optional(),
    /** Scopes this client may request; any scope of the resource when omitted. */
    scope: aString.optional(),
    /** Public keys for `private_key_jwt` (a JWK Set). */
    jwks: z.object({ keys: readonlyArray(z.array(z.record(z.string(), z.unknown()), anArray)) }, anObject).optional(),
    /**
     * Grant types this client may use; `authorization_code` and `refresh_token` by default. Others need the extension
     * that registers them.
     */
    grantTypes: readonlyArray(z.array(grantType, anArray)).optional(),
  }),
  anObject,
)

/**
 * A pre-registered client, from configuration.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-2 | OAuth 2.1 §2}
 * @interface
 */
export type ClientOptions = Readonly<z.input<typeof clientSchema>>

/**
 * The schema of {@link UserOptions}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 */
export const userSchema = z.strictObject(
  exact({
    username: nonEmpty,
    passwordHash: nonEmpty,
    /** The `sub` claim; the username when omitted. */
    subject: nonEmpty.optional(),
    displayName: aString.optional(),
  }),
  anObject,
)

/**
 * A user of the default user-authentication service. `passwordHash` comes from `UserAuthenticator.hashPassword`.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 * @interface
 */
export type UserOptions = Readonly<z.input<typeof userSchema>>

/**
 * The schema of {@link TokenLifetimes}: whole seconds, the authorization code's at most
 * {@link limits}`.authorizationCodeMax`.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2 (code lifetime)}
 */
export const lifetimesSchema = z.strictObject(
  exact({
    /** Access token lifetime; 300 s by default. */
    accessToken: positiveWhole.optional(),
    /** Refresh token lifetime; 30 days by default. */
    refreshToken: positiveWhole.optional(),
    /** Authorization code lifetime; 60 s by default and at most 60 s. */
    authorizationCode: positiveWhole
      .max(limits.authorizationCodeMax, `must be at most ${limits.authorizationCodeMax}`)
      .optional(),
    /** Login session lifetime; 8 hours by default. */
    session: positiveWhole.optional(),
    /**
     * Seconds after a refresh-token rotation during which the rotated-out token, presented again by the same client,
     * returns the same successor (with a fresh access token) instead of counting as reuse; 60 s by default, 0 turns it
     * off. It lets concurrent refreshes (several processes sharing one token file) and retries after a lost response
     * or a server crash converge on one live token; any older token, or this one after the interval, still revokes
     * the family.
     */
    refreshTokenReuseInterval: wholeFromZero.optional(),
    /**
     * A dynamically registered client that has not completed an authorization (redeemed a code) this long after it
     * registered is removed (with the purge job); 24 hours by default; `false` keeps every registration.
     */
    unusedRegistration: orFalse(positiveWhole, "must be a number of seconds or false").optional(),
    /**
     * How long a client secret issued by dynamic registration stays valid (`client_secret_expires_at`); `false` (the
     * default) issues secrets that do not expire (`client_secret_expires_at: 0`).
     */
    registeredClientSecret: orFalse(positiveWhole, "must be a number of seconds or false").optional(),
  }),
  anObject,
)

/**
 * Lifetimes, in seconds.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2 (code lifetime)}
 * @interface
 */
export type TokenLifetimes = Readonly<z.input<typeof lifetimesSchema>>

const signingKeyFields = exact({
  /** Rotate when the newest key is this old; 30 days by default; `false` rotates only on demand. */
  rotateEvery: orFalse(positiveWhole, "must be a number of seconds or false").optional(),
  /**
   * How long a new key is published before it signs; 600 s by default. It must exceed the time resource servers
   * cache the JWK Set (this server sends `max-age=300`) and be shorter than `rotateEvery`.
   */
  publishAhead: wholeFromZero.optional(),
  /** How often each instance checks the schedule and retires superseded keys; 60 s by default (fractions allowed). */
  checkEvery: period.optional(),
  /** Allowance for clocks differing between instances and verifiers; 60 s by default. */
  clockSkew: wholeFromZero.optional(),
})

/**
 * The schema of {@link SigningKeyOptions}, with {@link publishAheadConflict} reported on the field that was set
 * (`publishAhead`, else `rotateEvery`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5 (JWK Set)}
 */
export const signingKeysSchema = z.strictObject(signingKeyFields, anObject).superRefine((keys, ctx) => {
  // Compared only once both are valid on their own: each field's own problem is the one worth reading.
  const fieldsValid =
    signingKeyFields.rotateEvery.safeParse(keys.rotateEvery).success &&
    signingKeyFields.publishAhead.safeParse(keys.publishAhead).success
  if (!fieldsValid) return
  const rotateEvery = publishAheadConflict(keys)
  if (rotateEvery === undefined) return
  ctx.addIssue(
    keys.publishAhead === undefined
      ? {
          code: "custom",
          path: ["rotateEvery"],
          message: `must be longer than publishAhead (${defaults.signingKeys.publishAhead} s)`,
        }
      : { code: "custom", path: ["publishAhead"], message: `must be shorter than rotateEvery (${rotateEvery} s)` },
  )
})

/**
 * Signing-key rotation, in seconds. A new key is published in the JWK Set `publishAhead` seconds before it signs
 * anything, so resource servers that cache the JWK Set see it first; the key it replaces stays published until every
 * token it signed has expired (its last signing moment plus the access-token lifetime plus `clockSkew`). The state
 * lives in the key store, so the schedule survives restarts and every instance sharing the store follows it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5 (JWK Set)}
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#RotateSigKeys | OpenID Connect Core §10.1.1 (rotation of asymmetric signing keys)}
 * @interface
 */
export type SigningKeyOptions = Readonly<z.input<typeof signingKeysSchema>>

/**
 * The schema of {@link MaintenanceOptions}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const maintenanceSchema = z.strictObject(
  exact({
    /**
     * Seconds between two purges of what can no longer matter (expired codes, access-token ids, assertion ids,
     * refresh tokens, dead families, expired cached metadata documents, retired keys); 300 by default (fractions
     * allowed); `false` turns the purge off (then call `Storage.purgeExpired` yourself).
     */
    purgeEvery: orFalse(period, "must be a number of seconds or false").optional(),
  }),
  anObject,
)

/**
 * Background maintenance while the server runs.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 * @interface
 */
export type MaintenanceOptions = Readonly<z.input<typeof maintenanceSchema>>

const windowLimitSchema = z.strictObject(
  exact({
    max: positiveWhole.optional(),
    /** Seconds. */
    window: positiveWhole.optional(),
  }),
  anObject,
)
const backoffSchema = z.strictObject(
  exact({
    freeAttempts: positiveWhole.optional(),
    /** Seconds. */
    delay: positiveWhole.optional(),
    /** Seconds. */
    maxDelay: positiveWhole.optional(),
    /** Seconds. */
    forgetAfter: positiveWhole.optional(),
  }),
  anObject,
)

/**
 * A fixed-window limit: at most `max` requests per bucket in `window` seconds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4 (429 Too Many Requests)}
 * @interface
 */
export type WindowLimitOptions = Readonly<z.input<typeof windowLimitSchema>>

/**
 * Growing delays after failed sign-ins: the failure that makes `freeAttempts` locks the bucket for `delay` seconds,
 * each further failure for twice as long, at most `maxDelay`; the count is forgotten `forgetAfter` seconds after the
 * last attempt.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6}
 * @interface
 */
export type BackoffOptions = Readonly<z.input<typeof backoffSchema>>

/**
 * `schema` or `false` (a limit switched off). A problem inside the object keeps its own path and message
 * (`rateLimits.token.max: must be a whole number`), which a plain union would lose.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export const switchable = <T extends z.ZodType>(schema: T) =>
  // Any value reaches the transform, which checks it; the custom schema only gives it its type.
  z.custom<z.input<T> | false>().transform((value, ctx): z.output<T> | false => {
    if (value === false) return false
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      ctx.addIssue({ code: "custom", message: "must be an object or false" })
      return z.NEVER
    }
    const parsed = schema.safeParse(value)
    if (parsed.success) return parsed.data
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue })
    return z.NEVER
  })

/**
 * The data members of {@link RateLimitOptions} (what a JSON file can hold): whole seconds and counts, each limit an
 * object or `false`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export const rateLimitsDataSchema = z.strictObject(
  exact({
    /** Failed sign-ins on the login page, per account (the submitted username) and per client address. */
    login: switchable(
      z.strictObject(
        exact({ account: switchable(backoffSchema).optional(), address: switchable(backoffSchema).optional() }),
        anObject,
      ),
    ).optional(),
    /** Dynamic registrations per client address. */
    registration: switchable(windowLimitSchema).optional(),
    /**
     * Token requests per client once it has authenticated with credentials (only the holder of its secret or key
     * spends this); the requests of public clients (whose ID anyone can send) and of grants without a client, per
     * client address.
     */
    token: switchable(windowLimitSchema).optional(),
    /** Refresh requests of public clients per refresh-token family (the grant), wherever they come from. */
    refresh: switchable(windowLimitSchema).optional(),
    /**
     * Token requests of grants without a client (workload identity federation), per identity an assertion proved:
     * its issuer and subject, counted once the grant has verified the assertion and found it unused.
     */
    workload: switchable(windowLimitSchema).optional(),
    /** Revocation requests per authenticated client; those of public clients per client address. */
    revocation: switchable(windowLimitSchema).optional(),
    /** Introspection requests per authenticated client; those of public clients per client address. */
    introspection: switchable(windowLimitSchema).optional(),
    /**
     * Failed client authentications (a wrong secret, a forged assertion, an unknown client) at the token, revocation
     * and introspection endpoints, per claimed client and client address, apart from the client's own allowance. Past
     * the limit that client is refused from that address, even with the right credentials, until the window ends;
     * requests from other addresses are not affected.
     */
    clientAuthentication: switchable(windowLimitSchema).optional(),
    /** Fetches of client ID metadata documents and their `jwks_uri` key sets, per host. */
    metadataFetches: switchable(windowLimitSchema).optional(),
  }),
  anObject,
)

/**
 * The schema of {@link RateLimitOptions}, or `false`: {@link rateLimitsDataSchema} and the `clientAddress` function.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export const rateLimitsSchema = switchable(
  rateLimitsDataSchema.extend(
    exact({
      /**
       * The client address of a request, for deployments behind a reverse proxy: for example the last entry of
       * `X-Forwarded-For` as your proxy writes it. Off by default (the TCP peer's address); never trust a header a
       * client could send past your proxy.
       */
      clientAddress: z
        .custom<(request: Request) => string | undefined>((value) => typeof value === "function", {
          error: "must be a function",
        })
        .optional(),
    }),
  ),
)

/**
 * Abuse limits, each answered with HTTP 429 and `Retry-After`. Every limit is on by default and can be tuned (a
 * partial object keeps the defaults of the members left out) or switched off with `false`; `rateLimits: false`
 * switches them all off. Counts live in the storage's `RateLimiter` (in the database for SQLite and PostgreSQL,
 * so instances sharing it enforce one limit together).
 *
 * The client address is the TCP peer's address from the node:http bridge; behind a reverse proxy that is the proxy's,
 * so set `clientAddress` to read the proxy's header. Where no address is known (a Web handler mounted outside the
 * bridge, without `clientAddress`), the per-address limits do not apply: sign-in is then limited per account only,
 * public clients' refreshes per family only, and registration, failed client authentications and the other requests
 * of public clients and of grants without a client not at all.
 *
 * Every 429 says in its `error_description` which limit was reached and the setting that changes it
 * (`rateLimits.registration allows 20 in 3600 seconds`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4 (429 Too Many Requests)}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.6 | OAuth 2.1 §7.6}
 * @interface
 */
export type RateLimitOptions = Readonly<Exclude<z.input<typeof rateLimitsSchema>, false>>

/**
 * The schema of {@link DevelopmentOptions}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-1.5 | OAuth 2.1 §1.5 (TLS)}
 */
export const developmentSchema = z.strictObject(
  exact({
    /** Accept an `http` issuer whose host is loopback (127.0.0.1, [::1] or localhost). */
    allowHttpLoopbackIssuer: aBoolean.optional(),
    /** Accept an `http` `upstream.issuer` on a loopback host (proxy mode). */
    allowHttpLoopbackUpstream: aBoolean.optional(),
  }),
  anObject,
)

/**
 * Development relaxations. Off by default; each one logs a warning at start-up when on.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-1.5 | OAuth 2.1 §1.5 (TLS)}
 * @interface
 */
export type DevelopmentOptions = Readonly<z.input<typeof developmentSchema>>

/**
 * The schema of the switches of {@link ClientIdMetadataDocumentOptions}; its other members (cache bounds, trust
 * policy, outbound limits) are checked where they are used, and pass through.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export const clientIdMetadataDocumentsSchema = z.object(
  exact({
    /** True by default; false makes URL client IDs unknown clients, like any unregistered ID. */
    enabled: aBoolean.optional(),
    // Documented with the resolver's options, whose member it is too.
    allowHttpLoopbackClientIds: aBoolean.optional(),
  }),
  anObject,
)

const clientIdMetadataDocumentsFields = clientIdMetadataDocumentsSchema.extend(
  exact({
    /** Which hosts are accepted and which are verified: domain rules or a function; any https host by default. */
    trust: z.custom<PolicyOptions | PolicyFunction>().optional(),
    /** Limits of the outbound fetch (size, time, redirects, trust anchors). */
    outbound: z.custom<OutboundOptions>().optional(),
  }),
)

// The resolver's other options (all optional, checked where they are used) pass through this non-strict object.
const clientIdMetadataDocumentOptionsSchema: z.ZodType<
  ResolverOptions & z.output<typeof clientIdMetadataDocumentsFields>,
  ResolverOptions & z.input<typeof clientIdMetadataDocumentsFields>
> = clientIdMetadataDocumentsFields

/**
 * Client ID metadata documents: a `client_id` that is an https URL is resolved by fetching the document at that URL
 * (through the SSRF-guarded outbound fetch), validated and cached. On by default, accepting any https client ID
 * (unverified on the consent page), since MCP says authorization servers SHOULD support them. The cache bounds,
 * size and back-off options are those of {@link ResolverOptions}; `allowHttpLoopbackClientIds` (development only,
 * logged loudly) also lets the outbound fetch reach http loopback hosts.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html | draft-ietf-oauth-client-id-metadata-document-02}
 * @interface
 */
export type ClientIdMetadataDocumentOptions = Readonly<z.input<typeof clientIdMetadataDocumentOptionsSchema>>

/**
 * The `subjectFrom` values of {@link UpstreamOptions} that are names (the forms a configuration file can hold).
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#IDTokenValidation | OpenID Connect Core 1.0 §3.1.3.7}
 */
export const subjectSourceNameSchema = z.enum(["id_token", "access_token"], {
  error: "must be id_token or access_token",
})

/**
 * The schema of {@link UpstreamOptions}; the rules between its fields (https issuer, a source for the subject) are
 * checked by {@link resolve}.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#confused-deputy-problem | MCP 2025-11-25 Security Best Practices: Confused Deputy Problem}
 */
export const upstreamSchema = z.strictObject(
  exact({
    /**
     * The upstream issuer identifier; its metadata is discovered (RFC 8414, then OpenID Connect Discovery) and must
     * name the same issuer. https, except on a loopback host with `development.allowHttpLoopbackUpstream`.
     */
    issuer: nonEmpty,
    /** Keyway's static client ID at the upstream. */
    clientId: nonEmpty,
    /** With a secret, Keyway authenticates with `client_secret_basic`; without, it is a public client. */
    clientSecret: nonEmpty.optional(),
    /** The `scope` of the upstream authorization request. */
    scope: aString.optional(),
    /**
     * The `resource` (RFC 8707) of the upstream requests; also the audience checked for
     * `subjectFrom: "access_token"`.
     */
    resource: nonEmpty.optional(),
    /** `id_token` when `scope` has `openid`, `access_token` otherwise. */
    subjectFrom: z
      .union([subjectSourceNameSchema, z.custom<UpstreamIdentityFunction>((value) => typeof value === "function")], {
        error: "must be id_token, access_token or a function",
      })
      .optional(),
    /** The name shown on the consent page; the upstream host when omitted. */
    name: nonEmpty.optional(),
    /** Cap on each call to the upstream (metadata, keys, token request), in milliseconds. Default 10000. */
    timeoutMs: positiveWhole.optional(),
    /** How long a browser's consent to a client is remembered, in seconds. Default 180 days. */
    consentSeconds: positiveWhole.optional(),
  }),
  anObject,
)

/**
 * The schema of {@link ConfigOptions}: {@link resolve} validates options with it first, so that every problem of a
 * value names its field the same way for every front end. The members that are functions, extensions or objects of
 * other modules (`warn`, `extensions`, `clientIdMetadataDocuments.trust`) pass through and are checked where they
 * are used; the rules between members are {@link resolve}'s.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export const configSchema = z.object(
  exact({
    /** The issuer identifier: an https URL without query or fragment. */
    issuer: nonEmpty,
    /**
     * Moves a database to a new issuer (a new domain, say). A SQLite or PostgreSQL database records the issuer it
     * serves on its first start and refuses to start for another one, since its clients, keys and tokens are that
     * issuer's. Set this to the issuer the database served so far: the next start records `issuer` in its place, and
     * its clients, consents, refresh tokens and signing keys carry over; access tokens issued before still name the
     * previous issuer. A database that already serves `issuer` is left as it is, so the option can stay until every
     * instance has moved.
     */
    previousIssuer: nonEmpty.optional(),
    resources: readonlyArray(z.array(resourceSchema, anArray).min(1, "must name at least one MCP server")),
    /** The resource used when an authorization request has no `resource` parameter (older clients). */
    defaultResource: nonEmpty.optional(),
    users: readonlyArray(z.array(userSchema, anArray)).optional(),
    clients: readonlyArray(z.array(clientSchema, anArray)).optional(),
    lifetimes: lifetimesSchema.optional(),
    /** Rotate refresh tokens of confidential clients too (public clients always rotate); true by default. */
    rotateConfidentialRefreshTokens: aBoolean.optional(),
    /**
     * OpenID Connect: `openid` may be requested besides a resource's scopes, and the authorization code grant then
     * also answers an ID token for the client (`iss`, `sub`, `aud`, `exp`, `iat`, `auth_time`, the request's
     * `nonce`), for clients that sign users in with this server (an enterprise identity provider). False by default.
     *
     * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#CodeFlowAuth | OpenID Connect Core 1.0 §3.1}
     */
    openid: aBoolean.optional(),
    /**
     * Client IDs whose remembered consent is reused even though they cannot be verified. A public client whose
     * redirect URIs are all loopback or private-use (custom scheme) URIs could be any local program choosing its own
     * port and PKCE pair, so by default it is shown the consent page on every authorization (RFC 8252 §8.6); list a
     * client here when you vouch for it, e.g. a pre-registered desktop app of your own.
     */
    rememberConsentFor: readonlyArray(z.array(nonEmpty, anArray)).optional(),
    /**
     * Clients (configured in `clients`, with credentials) that may introspect every token (RFC 7662): the resource
     * servers. Any other confidential client may introspect only tokens issued to itself; public clients may not
     * call the introspection endpoint. A resource server that is never sent through the authorization endpoint can
     * be a client with `grantTypes: []` and no redirect URIs.
     */
    introspectionClients: readonlyArray(z.array(nonEmpty, anArray)).optional(),
    /** Client ID metadata documents; on by default (see {@link ClientIdMetadataDocumentOptions}). */
    clientIdMetadataDocuments: clientIdMetadataDocumentOptionsSchema.optional(),
    /** Dynamic Client Registration (RFC 7591); off by default. */
    registration: aBoolean.optional(),
    /**
     * Proxy mode: users sign in at this upstream authorization server instead of the local login page, after
     * Keyway's own per-client consent (see {@link UpstreamOptions}).
     */
    upstream: upstreamSchema.optional(),
    development: developmentSchema.optional(),
    /** Largest request body accepted, in bytes; 64 KiB by default. */
    maxBodyBytes: positiveWhole.optional(),
    /** Where warnings go (development relaxations); `console.warn` by default. Tokens are never logged. */
    warn: z.custom<(message: string) => void>().optional(),
    /**
     * The secret login sessions are signed with (at least 32 random characters). Give every instance behind one
     * issuer the same value, so a browser can land on any of them during login and consent; a random per-process key
     * when omitted (then a restart signs users out, and several instances need sticky sessions).
     */
    sessionSecret: aString
      .min(limits.secretMinLength, `must be at least ${limits.secretMinLength} random characters`)
      .optional(),
    /** Signing-key rotation (see {@link SigningKeyOptions}); on, every 30 days, by default. */
    signingKeys: signingKeysSchema.optional(),
    /** Background purge of expired records (see {@link MaintenanceOptions}); every 5 minutes by default. */
    maintenance: maintenanceSchema.optional(),
    /** Abuse limits (see {@link RateLimitOptions}); all on by default; `false` turns them all off. */
    rateLimits: rateLimitsSchema.optional(),
    /** Extensions: further grant types, client-authentication methods and token bindings (see `Extension`). */
    extensions: z.custom<ReadonlyArray<AuthorizationServerExtension>>().optional(),
  }),
  { error: "must be an object" },
)

/**
 * The options of the authorization server, as users write them.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 * @interface
 */
export type ConfigOptions = Readonly<z.input<typeof configSchema>>

/**
 * A resource after validation.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export interface Resource {
  readonly uri: string
  readonly name: string
  readonly scopes: ReadonlyMap<string, string>
}

/**
 * The configuration after validation and defaults.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export interface ResolvedConfig {
  readonly issuer: string
  readonly issuerUrl: URL
  /** The issuer a database may be moved from (see {@link ConfigOptions.previousIssuer}), in the issuer's form. */
  readonly previousIssuer: string | undefined
  readonly resources: ReadonlyMap<string, Resource>
  readonly defaultResource: string | undefined
  readonly users: ReadonlyArray<UserOptions>
  readonly clients: ReadonlyArray<ClientOptions>
  readonly accessTokenTtl: number
  readonly refreshTokenTtl: number
  readonly codeTtl: number
  readonly sessionTtl: number
  /** Seconds; 0 when off. */
  readonly refreshTokenReuseInterval: number
  readonly unusedRegistration: number | false
  readonly registeredClientSecret: number | false
  /** Public clients with loopback or private-use redirect URIs whose remembered consent is reused all the same. */
  readonly rememberConsentFor: ReadonlySet<string>
  readonly rotateConfidentialRefreshTokens: boolean
  /** Whether ID tokens are issued for `openid` (OpenID Connect Core 1.0 §3.1). */
  readonly openid: boolean
  readonly registration: boolean
  /** Whether URL client IDs are resolved through client ID metadata documents. */
  readonly clientIdMetadataDocuments: boolean
  /** Client IDs allowed to introspect every token. */
  readonly introspectionClients: ReadonlySet<string>
  readonly secureCookies: boolean
  readonly maxBodyBytes: number
  readonly endpoints: Endpoints
  /** Proxy mode, when configured. */
  readonly upstream: ResolvedUpstream | undefined
  readonly signingKeys: ResolvedSigningKeys
  /** The shared session secret, if configured. */
  readonly sessionSecret: string | undefined
  /** Seconds between purges, or false when the purge is off. */
  readonly purgeEvery: number | false
  /** The abuse limits; `false` for a limit that is off. */
  readonly rateLimits: ResolvedRateLimits
  /** The extensions, in the order given. */
  readonly extensions: ReadonlyArray<AuthorizationServerExtension>
}

/**
 * The abuse limits after defaults; `false` for a limit that is off.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export interface ResolvedRateLimits {
  readonly login: { readonly account: BackoffRule | false; readonly address: BackoffRule | false }
  readonly registration: WindowRule | false
  readonly token: WindowRule | false
  readonly refresh: WindowRule | false
  readonly workload: WindowRule | false
  readonly revocation: WindowRule | false
  readonly introspection: WindowRule | false
  readonly clientAuthentication: WindowRule | false
  readonly metadataFetches: WindowRule | false
  /** The configured address function; `undefined` uses the node:http bridge's peer address. */
  readonly clientAddress: RateLimitOptions["clientAddress"]
}

/**
 * Signing-key rotation after validation and defaults (seconds): every member of {@link SigningKeyOptions}, present.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @interface
 */
export type ResolvedSigningKeys = {
  readonly [K in keyof SigningKeyOptions]-?: Exclude<SigningKeyOptions[K], undefined>
}

/**
 * Absolute URLs of the endpoints, all under the issuer.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export interface Endpoints {
  readonly authorization: string
  readonly token: string
  readonly registration: string
  /** RFC 7009 revocation endpoint. */
  readonly revocation: string
  /** RFC 7662 introspection endpoint. */
  readonly introspection: string
  readonly jwks: string
  readonly login: string
  readonly consent: string
  /** Proxy mode: Keyway's redirect URI at the upstream authorization server. */
  readonly upstreamCallback: string
}
const fieldPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((out, key) => {
    if (typeof key === "number") return `${out}[${key}]`
    const name = String(key)
    // Scope names such as notes:read are not identifiers: bracket them.
    if (!/^[A-Za-z_$][\w$]*$/.test(name)) return `${out}[${JSON.stringify(name)}]`
    return out === "" ? name : `${out}.${name}`
  }, "")

const valueAt = (root: unknown, path: ReadonlyArray<PropertyKey>): unknown =>
  path.reduce<unknown>(
    (value, key) =>
      typeof value === "object" && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined,
    root,
  )

/**
 * One problem found by {@link configSchema} (or a schema built from it) in `root`, as `field: what is wrong`
 * (`lifetimes.accessToken: must be a whole number`, `clients[0]: unknown field "secret"`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export const describeIssue = (issue: z.core.$ZodIssue, root: unknown): string => {
  const where = fieldPath(issue.path)
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map((k) => `"${k}"`).join(", ")
    return `${where === "" ? "" : `${where}: `}unknown field${issue.keys.length > 1 ? "s" : ""} ${keys}`
  }
  if (issue.code === "invalid_type" && valueAt(root, issue.path) === undefined) return `${where}: is required`
  return where === "" ? issue.message : `${where}: ${issue.message}`
}

/**
 * Validates options (first their data with {@link configSchema}, then the rules between them) and applies defaults.
 *
 * The issuer must be https; `http` is accepted only on a loopback host with
 * `development.allowHttpLoopbackIssuer`, and then a warning is logged.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2 (issuer)}
 */
export const resolve = (options: ConfigOptions): ResolvedConfig => {
  const checked = configSchema.safeParse(options)
  if (!checked.success) {
    throw new ConfigError({ message: checked.error.issues.map((issue) => describeIssue(issue, options)).join("; ") })
  }
  const warn = options.warn ?? ((m: string) => console.warn(m))
  let issuerUrl: URL
  try {
    issuerUrl = new URL(options.issuer)
  } catch {
    throw new ConfigError({ message: `issuer must be an absolute URL, got ${JSON.stringify(options.issuer)}` })
  }
  if (
    issuerUrl.search !== "" ||
    issuerUrl.hash !== "" ||
    options.issuer.includes("#") ||
    options.issuer.includes("?")
  ) {
    throw new ConfigError({ message: "issuer must not have a query or fragment (RFC 8414 §2)" })
  }
  if (issuerUrl.username !== "" || issuerUrl.password !== "")
    throw new ConfigError({ message: "issuer must not have userinfo" })
  if (issuerUrl.protocol === "http:") {
    if (SecureUrl.transportOf(issuerUrl) !== "http-loopback") {
      throw new ConfigError({
        message: "issuer must use https (http is only possible on a loopback host in development mode)",
      })
    }
    if (options.development?.allowHttpLoopbackIssuer !== true) {
      throw new ConfigError({
        message: "issuer must use https; set development.allowHttpLoopbackIssuer to run on http loopback",
      })
    }
    warn(
      `[keyway] DEVELOPMENT MODE: the authorization server runs with the insecure http issuer ${issuerUrl.href}. ` +
        "Never use this outside local development.",
    )
  } else if (issuerUrl.protocol !== "https:") {
    throw new ConfigError({ message: `issuer must use https, got ${issuerUrl.protocol}` })
  }
  // RFC 8414 compares issuers as strings: keep the configured form, without a trailing slash at the root.
  const withoutRootSlash = (value: string) => (value.endsWith("/") ? value.slice(0, -1) : value)
  const issuer = withoutRootSlash(options.issuer)
  const base = issuer
  const previousIssuer = options.previousIssuer === undefined ? undefined : withoutRootSlash(options.previousIssuer)
  if (previousIssuer === issuer) {
    throw new ConfigError({
      message: `previousIssuer: is the issuer itself (${issuer}); set it to the issuer a database served before, or remove it`,
    })
  }

  const resources = new Map<string, Resource>()
  // Where each resource was given, by its canonical URI and by that URI without a trailing slash.
  const given = new Map<string, number>()
  const slashless = new Map<string, number>()
  for (const [i, r] of options.resources.entries()) {
    let uri: string
    try {
      uri = CanonicalUri.parse(r.uri)
    } catch (e) {
      throw new ConfigError({
        message: `resource ${JSON.stringify(r.uri)} is not a valid canonical URI: ${(e as Error).message}`,
      })
    }
    const first = given.get(uri)
    if (first !== undefined) {
      throw new ConfigError({
        message: `resources[${i}].uri: ${r.uri} is the same MCP server as resources[${first}].uri (${options.resources[first]?.uri}): both are ${uri} in canonical form; configure it once, with every scope it defines`,
      })
    }
    const key = withoutTrailingSlash(uri)
    const twin = slashless.get(key)
    if (twin !== undefined) {
      throw new ConfigError({
        message: `resources[${i}].uri: ${uri} differs from resources[${twin}].uri (${options.resources[twin]?.uri}) only by a trailing slash, which clients do not keep apart; configure the MCP server once, by its canonical URI (without the slash)`,
      })
    }
    given.set(uri, i)
    slashless.set(key, i)
    const scopes = new Map<string, string>()
    for (const [name, description] of Object.entries(r.scopes)) {
      if (!Scope.isScopeToken(name))
        throw new ConfigError({ message: `scope ${JSON.stringify(name)} of ${uri} is not a valid scope token` })
      scopes.set(name, description)
    }
    resources.set(uri, { uri, name: r.name ?? uri, scopes })
  }
  let defaultResource: string | undefined
  if (options.defaultResource !== undefined) {
    const canonical = CanonicalUri.isValid(options.defaultResource) ? CanonicalUri.parse(options.defaultResource) : ""
    if (!resources.has(canonical))
      throw new ConfigError({ message: "defaultResource must be one of the configured resources" })
    defaultResource = canonical
  }
  const extensions = options.extensions ?? []
  const extensionIds = new Set<string>()
  for (const e of extensions) {
    if (extensionIds.has(e.id)) throw new ConfigError({ message: `extensions: ${e.id} is given twice` })
    extensionIds.add(e.id)
  }
  const declarations = declarationProblem(extensions)
  if (declarations !== undefined) throw new ConfigError({ message: `extensions: ${declarations}` })
  const grantTypes = new Set(servedGrantTypes(extensions))
  // The scopes a client may be limited to: those of the resources, and `openid` when ID tokens are on.
  const definedScopes = new Set([...resources.values()].flatMap((r) => [...r.scopes.keys()]))
  if (options.openid === true) definedScopes.add("openid")
  const clientIds = new Set<string>()
  for (const [i, c] of (options.clients ?? []).entries()) {
    if (clientIds.has(c.clientId)) throw new ConfigError({ message: `client ${c.clientId} is configured twice` })
    clientIds.add(c.clientId)
    for (const g of c.grantTypes ?? []) {
      if (!grantTypes.has(g))
        throw new ConfigError({ message: `clients[${i}].grantTypes: ${grantProblem(g, grantTypes)}` })
    }
    if (c.scope !== undefined) {
      const scope = Scope.validate(c.scope)
      if (Result.isFailure(scope)) throw new ConfigError({ message: `clients[${i}].scope: ${scope.failure.message}` })
      const unknown = scope.success.filter((s) => !definedScopes.has(s))
      if (unknown.length > 0) {
        throw new ConfigError({
          message: `clients[${i}].scope: ${unknown.join(" ")} ${unknown.length === 1 ? "is not a scope" : "are not scopes"} of any resource (they define ${[...definedScopes].join(" ")}); add ${unknown.length === 1 ? "it" : "them"} to a resource's scopes, or remove ${unknown.length === 1 ? "it" : "them"} from client ${c.clientId}'s scope`,
        })
      }
    }
    // Only the authorization code grant sends a browser to a redirect URI: a client without it (a resource server
    // that only introspects, a machine client) needs none.
    if (c.redirectUris.length === 0 && (c.grantTypes ?? ["authorization_code"]).includes("authorization_code"))
      throw new ConfigError({ message: `client ${c.clientId} needs at least one redirect URI` })
    const method = clientAuthMethod(c)
    // The store hashes secrets with plain SHA-256, which is only safe for high-entropy values.
    if (
      (method === "client_secret_basic" || method === "client_secret_post") &&
      (c.clientSecret?.length ?? 0) < limits.secretMinLength
    ) {
      throw new ConfigError({
        message: `client ${c.clientId}: ${method} needs a clientSecret of at least ${limits.secretMinLength} random characters`,
      })
    }
    if (method === "private_key_jwt" && c.jwks === undefined) {
      throw new ConfigError({ message: `client ${c.clientId}: private_key_jwt needs jwks` })
    }
  }
  const cimdEnabled = options.clientIdMetadataDocuments?.enabled ?? true
  if (cimdEnabled && options.clientIdMetadataDocuments?.allowHttpLoopbackClientIds === true) {
    warn(
      "[keyway] DEVELOPMENT MODE: http loopback client IDs (http://localhost/...) are accepted and fetched. " +
        "Never use this outside local development.",
    )
  }
  let upstream: ResolvedUpstream | undefined
  if (options.upstream !== undefined) {
    const resolved = resolveUpstream(options.upstream, options.development?.allowHttpLoopbackUpstream === true)
    if ("error" in resolved) throw new ConfigError({ message: resolved.error })
    upstream = resolved.upstream
    if (upstream.issuerUrl.protocol === "http:") {
      warn(
        `[keyway] DEVELOPMENT MODE: the upstream authorization server ${upstream.issuer} is reached over http. ` +
          "Never use this outside local development.",
      )
    }
  }
  const introspectionClients = new Set(options.introspectionClients ?? [])
  for (const id of introspectionClients) {
    const c = options.clients?.find((client) => client.clientId === id)
    if (c === undefined) throw new ConfigError({ message: `introspectionClients: ${id} is not a configured client` })
    if (clientAuthMethod(c) === "none") {
      throw new ConfigError({ message: `introspectionClients: ${id} must authenticate (it has no credentials)` })
    }
  }

  return {
    issuer,
    issuerUrl,
    previousIssuer,
    resources,
    defaultResource,
    users: options.users ?? [],
    clients: options.clients ?? [],
    accessTokenTtl: options.lifetimes?.accessToken ?? defaults.lifetimes.accessToken,
    refreshTokenTtl: options.lifetimes?.refreshToken ?? defaults.lifetimes.refreshToken,
    codeTtl: options.lifetimes?.authorizationCode ?? defaults.lifetimes.authorizationCode,
    sessionTtl: options.lifetimes?.session ?? defaults.lifetimes.session,
    refreshTokenReuseInterval:
      options.lifetimes?.refreshTokenReuseInterval ?? defaults.lifetimes.refreshTokenReuseInterval,
    unusedRegistration: options.lifetimes?.unusedRegistration ?? defaults.lifetimes.unusedRegistration,
    registeredClientSecret: options.lifetimes?.registeredClientSecret ?? defaults.lifetimes.registeredClientSecret,
    rememberConsentFor: new Set(options.rememberConsentFor ?? []),
    rotateConfidentialRefreshTokens:
      options.rotateConfidentialRefreshTokens ?? defaults.rotateConfidentialRefreshTokens,
    openid: options.openid ?? false,
    registration: options.registration ?? defaults.registration,
    clientIdMetadataDocuments: cimdEnabled,
    introspectionClients,
    secureCookies: issuerUrl.protocol === "https:",
    maxBodyBytes: options.maxBodyBytes ?? defaults.maxBodyBytes,
    endpoints: {
      authorization: `${base}/authorize`,
      token: `${base}/token`,
      registration: `${base}/register`,
      revocation: `${base}/revoke`,
      introspection: `${base}/introspect`,
      jwks: `${base}/jwks`,
      login: `${base}/authorize/login`,
      consent: `${base}/authorize/consent`,
      upstreamCallback: `${base}/upstream/callback`,
    },
    upstream,
    signingKeys: {
      rotateEvery: options.signingKeys?.rotateEvery ?? defaults.signingKeys.rotateEvery,
      publishAhead: options.signingKeys?.publishAhead ?? defaults.signingKeys.publishAhead,
      checkEvery: options.signingKeys?.checkEvery ?? defaults.signingKeys.checkEvery,
      clockSkew: options.signingKeys?.clockSkew ?? defaults.signingKeys.clockSkew,
    },
    sessionSecret: options.sessionSecret,
    purgeEvery: options.maintenance?.purgeEvery ?? defaults.maintenance.purgeEvery,
    rateLimits: resolveRateLimits(options.rateLimits),
    extensions,
  }
}

/** A canonical URI without the slash ending its path, if any (the query, when there is one, kept). */
const withoutTrailingSlash = (uri: string): string => {
  const query = uri.indexOf("?")
  const path = query === -1 ? uri : uri.slice(0, query)
  return path.endsWith("/") ? `${path.slice(0, -1)}${uri.slice(path.length)}` : uri
}

// The grant types Keyway's extension packages serve, and what to add to `extensions` for each.
const grantExtensions: ReadonlyMap<string, string> = new Map([
  [Grant.CLIENT_CREDENTIALS, "clientCredentialsGrant() from @keyway/ext-client-credentials/authorization-server"],
  [
    Grant.JWT_BEARER,
    "workloadIdentityGrant() from @keyway/ext-workload-identity/authorization-server (workloads) or identityAssertionGrant() from @keyway/ext-enterprise-managed/authorization-server (enterprise-managed authorization)",
  ],
  [Grant.TOKEN_EXCHANGE, "identityAssertionIssuer() from @keyway/ext-enterprise-managed/authorization-server"],
])

/** Why a client may not list grant type `g`, given the grant types this configuration serves. */
const grantProblem = (g: string, served: ReadonlySet<string>): string => {
  const extension = grantExtensions.get(g)
  return extension === undefined
    ? `${g} is not a grant type this server serves (${[...served].join(", ")}); an extension that registers it must be added to extensions`
    : `${g} is served by an extension that is not configured: add ${extension} to extensions`
}

const windowRule = (option: false | WindowLimitOptions | undefined, fallback: WindowRule): WindowRule | false =>
  option === false ? false : { max: option?.max ?? fallback.max, window: option?.window ?? fallback.window }

const backoffRule = (option: false | BackoffOptions | undefined, fallback: BackoffRule): BackoffRule | false =>
  option === false
    ? false
    : {
        freeAttempts: option?.freeAttempts ?? fallback.freeAttempts,
        delay: option?.delay ?? fallback.delay,
        maxDelay: option?.maxDelay ?? fallback.maxDelay,
        forgetAfter: option?.forgetAfter ?? fallback.forgetAfter,
      }

/**
 * The abuse limits of `rateLimits` with defaults applied (the part of {@link resolve} that depends on nothing else).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4}
 */
export const resolveRateLimits = (options: RateLimitOptions | false | undefined): ResolvedRateLimits => {
  const d = defaults.rateLimits
  if (options === false) {
    return {
      login: { account: false, address: false },
      registration: false,
      token: false,
      refresh: false,
      workload: false,
      revocation: false,
      introspection: false,
      clientAuthentication: false,
      metadataFetches: false,
      clientAddress: undefined,
    }
  }
  const login = options?.login
  return {
    login: {
      account: login === false ? false : backoffRule(login?.account, d.login.account),
      address: login === false ? false : backoffRule(login?.address, d.login.address),
    },
    registration: windowRule(options?.registration, d.registration),
    token: windowRule(options?.token, d.token),
    refresh: windowRule(options?.refresh, d.refresh),
    workload: windowRule(options?.workload, d.workload),
    revocation: windowRule(options?.revocation, d.revocation),
    introspection: windowRule(options?.introspection, d.introspection),
    clientAuthentication: windowRule(options?.clientAuthentication, d.clientAuthentication),
    metadataFetches: windowRule(options?.metadataFetches, d.metadataFetches),
    clientAddress: options?.clientAddress,
  }
}

/**
 * {@link resolve} as an Effect: unusable options are the typed failure {@link ConfigError}, not a thrown exception.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2 (issuer)}
 */
export const resolveEffect = (options: ConfigOptions): Effect.Effect<ResolvedConfig, ConfigError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(resolve(options))
    } catch (error) {
      if (error instanceof ConfigError) return Effect.fail(error)
      throw error
    }
  })
