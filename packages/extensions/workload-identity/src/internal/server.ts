import { Config, type Extension, TrustedIssuers } from "@keyway/authorization-server"
import { Assertion, CanonicalUri, Grant, OAuthError, Scope, SecureUrl, TrustedIssuer as Trusted } from "@keyway/core"
import { Effect, Result } from "effect"
import { compactVerify, decodeJwt, decodeProtectedHeader, errors, type JWTVerifyGetKey } from "jose"
import { z } from "zod"

/**
 * A rule that admits workloads by their claims: every claim named in `claims` must have one of the allowed values
 * (a claim that is a list of strings matches when one of its members does). Matched workloads may obtain tokens for
 * `resources`, with at most `scopes`.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx#workload-trust-relationship | MCP WIF: workload trust}
 */
export interface ClaimRule {
  /** Claim name to the allowed value, or to a list of allowed values; at least one claim (usually `sub`). */
  readonly claims: Readonly<Record<string, string | ReadonlyArray<string>>>
  /** The MCP servers (canonical URIs of configured resources) matched workloads may obtain tokens for. */
  readonly resources: ReadonlyArray<string>
  /** The scopes matched workloads may be granted at those resources (each a scope of every one of them). */
  readonly scopes: ReadonlyArray<string>
}

/**
 * A trusted workload issuer: its keys (core's `TrustedIssuer`: `issuer`, and `jwksUri` over https, http only on a
 * loopback host with `development.allowHttpLoopbackJwks`, or `jwks`), what its assertions must look like, and the
 * rules that admit its workloads.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx#trust-configuration | MCP WIF: trust configuration}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export interface TrustedIssuer extends Trusted.TrustedIssuer {
  /**
   * The `aud` values accepted; by default this authorization server's issuer identifier and its token endpoint URL
   * (the extension names the token endpoint, RFC 7523 §3 allows the issuer).
   */
  readonly audiences?: ReadonlyArray<string>
  /** The signing algorithms accepted, among the asymmetric ones (`Grant.ASYMMETRIC_ALGORITHMS`, the default). */
  readonly algorithms?: ReadonlyArray<string>
  /** The longest lifetime (`exp - iat`) accepted, in seconds; 86400 by default. */
  readonly maxLifetime?: number
  /** How long after `iat` an assertion is still accepted, in seconds; bounded by `maxLifetime` alone by default. */
  readonly maxAge?: number
  /** Allowance for clocks that differ, applied to `exp`, `nbf` and `iat`, in seconds (at most 300); 60 by default. */
  readonly clockSkew?: number
  /**
   * The `client_id` claim of the tokens issued to this issuer's workloads (RFC 9068 §2.2); the issuer identifier by
   * default, so that `client_id` and `sub` together name the workload across issuers. A request that also
   * authenticates a client gets that client's ID.
   */
  readonly clientId?: string
  /** The rules that admit workloads; a workload no rule matches is refused. */
  readonly rules: ReadonlyArray<ClaimRule>
}

/**
 * What the server decided for one JWT bearer request, as given to {@link WorkloadIdentityOptions.log}. It never
 * carries the assertion or the token.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx#identity-translation-and-privilege-escalation | MCP WIF: log and audit token issuance}
 */
export interface IssuanceEvent {
  readonly outcome: "issued" | "refused"
  /** Seconds since the epoch. */
  readonly at: number
  /** The assertion's `iss`, once read. */
  readonly issuer?: string
  /** The assertion's `sub`, once verified. */
  readonly subject?: string
  /** The assertion's `jti`, once verified. */
  readonly jti?: string
  /** The resource the token is (or would have been) for. */
  readonly resource?: string
  /** The granted scope. */
  readonly scope?: string
  /** The `client_id` of the issued token. */
  readonly clientId?: string
  /** The OAuth error code of a refusal. */
  readonly error?: string
  /** Why it was refused. */
  readonly description?: string
}

/**
 * Options of {@link workloadIdentityGrant}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 */
export interface WorkloadIdentityOptions {
  readonly issuers: ReadonlyArray<TrustedIssuer>
  /** Caching of the issuers' remote JWK Sets, in seconds. */
  readonly jwksCache?: {
    /** How long a fetched set is used; 600 by default. */
    readonly maxAge?: number
    /** The least time between two fetches, also when an assertion names an unknown `kid`; 30 by default. */
    readonly cooldown?: number
    /** How long a fetch may take; 5 by default. */
    readonly timeout?: number
  }
  /** Development relaxations, off by default and loud when on. */
  readonly development?: {
    /** Fetch `jwksUri` over plain http when its host is loopback. */
    readonly allowHttpLoopbackJwks?: boolean
  }
  /**
   * The fetch used for `jwksUri`, instead of the authorization server's SSRF guard (`TrustedIssuers.keySet`: https
   * only, every address of the host vetted, no redirects), the default.
   */
  readonly fetch?: (input: string, init: RequestInit) => Promise<Response>
  /** Receives every decision (issued or refused); one JSON line on `console.info` by default. */
  readonly log?: (event: IssuanceEvent) => void
  /** Where warnings go (development relaxations); `console.warn` by default. */
  readonly warn?: (message: string) => void
}

/**
 * The defaults of {@link TrustedIssuer} and {@link WorkloadIdentityOptions.jwksCache}, in seconds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export const defaults = {
  maxLifetime: 86_400,
  clockSkew: 60,
  jwksCache: TrustedIssuers.cacheDefaults,
} as const

/**
 * The largest `clockSkew` accepted, in seconds: RFC 7523 §3 allows "a reasonably small" leeway.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3 item 4}
 */
export const MAX_CLOCK_SKEW = 300

const aString = z.string({ error: "must be a string" })
const nonEmpty = aString.min(1, "must not be empty")
const anObject = { error: "must be an object" }
const anArray = { error: "must be an array" }
const aNumber = z.number({ error: "must be a number" })
const positiveWhole = aNumber.int("must be a whole number").positive("must be positive")
const wholeFromZero = aNumber.int("must be a whole number").min(0, "must not be negative")
const aFunction = <F>() =>
  z.custom<F>((value) => typeof value === "function", { error: "must be a function" }).optional()

/**
 * The schema of {@link ClaimRule}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx#workload-trust-relationship | MCP WIF: workload trust}
 */
export const claimRuleSchema = z.strictObject(
  {
    claims: z
      .record(
        z.string(),
        z.union([nonEmpty, z.array(nonEmpty, anArray).min(1, "must list at least one value")], {
          error: "must be a string or an array of strings",
        }),
        { error: "must be an object mapping claim names to allowed values" },
      )
      .refine((claims) => Object.keys(claims).length > 0, "must name at least one claim (for example sub)"),
    resources: z.array(nonEmpty, anArray).min(1, "must name at least one resource"),
    scopes: z.array(nonEmpty, anArray),
  },
  anObject,
)

/**
 * The schema of {@link TrustedIssuer}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export const trustedIssuerSchema = Trusted.schema.safeExtend({
  audiences: z.array(nonEmpty, anArray).min(1, "must name at least one audience").optional(),
  algorithms: z
    .array(
      z.enum(Grant.ASYMMETRIC_ALGORITHMS as [string, ...Array<string>], {
        error: `must be one of ${Grant.ASYMMETRIC_ALGORITHMS.join(", ")}`,
      }),
      anArray,
    )
    .min(1, "must name at least one algorithm")
    .optional(),
  maxLifetime: positiveWhole.optional(),
  maxAge: positiveWhole.optional(),
  clockSkew: wholeFromZero.max(MAX_CLOCK_SKEW, `must be at most ${MAX_CLOCK_SKEW}`).optional(),
  clientId: nonEmpty.optional(),
  rules: z.array(claimRuleSchema, anArray).min(1, "must have at least one rule"),
})

/**
 * The schema of the plain-data members of {@link WorkloadIdentityOptions} (what a configuration file can hold), for
 * front ends such as the runnable authorization server to embed.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx#trust-configuration | MCP WIF: trust configuration}
 */
export const optionsDataSchema = z.strictObject(
  {
    issuers: z.array(trustedIssuerSchema, anArray).min(1, "must name at least one trusted issuer"),
    jwksCache: z
      .strictObject(
        { maxAge: positiveWhole.optional(), cooldown: wholeFromZero.optional(), timeout: positiveWhole.optional() },
        anObject,
      )
      .optional(),
    development: z.strictObject({ allowHttpLoopbackJwks: z.boolean().optional() }, anObject).optional(),
  },
  anObject,
)

/**
 * The schema of {@link WorkloadIdentityOptions}: {@link optionsDataSchema} and the functions.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 */
export const optionsSchema = optionsDataSchema.extend({
  fetch: aFunction<WorkloadIdentityOptions["fetch"]>(),
  log: aFunction<(event: IssuanceEvent) => void>(),
  warn: aFunction<(message: string) => void>(),
})

/** An issuer with its defaults applied and its key set ready. */
interface Issuer {
  readonly options: TrustedIssuer
  readonly algorithms: ReadonlyArray<string>
  readonly keys: JWTVerifyGetKey
  readonly describeKeys: string
}

const isIdentityAssertion = (form: ReadonlyMap<string, string>): boolean => {
  const assertion = form.get("assertion")
  if (assertion === undefined) return false
  try {
    const typ = decodeProtectedHeader(assertion).typ?.toLowerCase()
    // RFC 7515 §4.1.9: the "application/" prefix may be omitted.
    return typ === "oauth-id-jag+jwt" || typ === "application/oauth-id-jag+jwt"
  } catch {
    return false
  }
}

const claimMatches = (actual: unknown, allowed: string | ReadonlyArray<string>): boolean => {
  const values = typeof allowed === "string" ? [allowed] : allowed
  if (typeof actual === "string") return values.includes(actual)
  return Array.isArray(actual) && actual.some((member) => typeof member === "string" && values.includes(member))
}

const ruleMatches = (rule: ClaimRule, claims: Readonly<Record<string, unknown>>): boolean =>
  Object.entries(rule.claims).every(([name, allowed]) => claimMatches(claims[name], allowed))

/** Why the keys could not verify the assertion, as the `invalid_grant` description. */
const keyFailure = (issuer: Issuer, kid: string | undefined, cause: unknown): string => {
  const name = issuer.options.issuer
  if (cause instanceof errors.JWKSNoMatchingKey) {
    return `no key of issuer ${name} matches the assertion (kid ${kid ?? "absent"}, keys from ${issuer.describeKeys})`
  }
  if (cause instanceof errors.JWSSignatureVerificationFailed) {
    return `the assertion's signature does not verify with the keys of issuer ${name}`
  }
  const reason = cause instanceof Error ? cause.message : String(cause)
  return `the keys of issuer ${name} could not be obtained from ${issuer.describeKeys}: ${reason}`
}

/**
 * The workload identity federation extension of the authorization server: a grant handler for
 * `urn:ietf:params:oauth:grant-type:jwt-bearer` that needs no client (a request that authenticates a client is
 * checked as usual and the token names that client) and leaves identity assertions (`typ` `oauth-id-jag+jwt`) to the
 * enterprise-managed authorization extension. Add it with `createAuthorizationServer({ extensions: [...] })` or,
 * on the Effect face, `Extension.Extensions.layer([...])`; its options are checked when the server starts (a
 * `ConfigError` naming the field).
 *
 * A request is answered `invalid_request` without an assertion, `invalid_target` for a resource this server does not
 * serve or the workload may not use, `invalid_scope` for a scope the workload may not have, and `invalid_grant`
 * (saying which check failed) for an assertion that is not a JWT, has a symmetric or no signature, comes from an
 * untrusted issuer, does not verify, fails a claim check of RFC 7523 §3 (`sub`, `aud`, `exp`, `nbf`, `iat`, `jti`),
 * was already used (its `jti`, remembered in the server's store until it expires), or that no rule admits. The
 * server's abuse limits apply: a request without a client counts per client address (`rateLimits.token`), and once
 * its assertion is verified and unused, per workload (its `iss` and `sub`, `rateLimits.workload`), answered 429 with
 * `Retry-After` past either.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.1 | RFC 7523 §2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export const workloadIdentityGrant = (options: WorkloadIdentityOptions): Extension.AuthorizationServerExtension => {
  const warn = options.warn ?? ((message: string) => console.warn(message))
  const log = options.log ?? ((event: IssuanceEvent) => console.info(JSON.stringify({ workloadIdentity: event })))
  const cache = { ...defaults.jwksCache, ...options.jwksCache }
  const allowHttpLoopback = options.development?.allowHttpLoopbackJwks === true
  let warned = false

  /** The options' problems that do not depend on the server's configuration, as `field: problem`. */
  const problemsOf = (): ReadonlyArray<string> => {
    const parsed = optionsSchema.safeParse(options)
    if (!parsed.success) {
      // The server's own wording, so that a field reads the same in every part of the configuration.
      return parsed.error.issues.map((issue) => Config.describeIssue(issue, options))
    }
    const problems: Array<string> = []
    const seen = new Set<string>()
    options.issuers.forEach((issuer, i) => {
      if (seen.has(issuer.issuer)) problems.push(`issuers[${i}].issuer: ${issuer.issuer} is configured twice`)
      seen.add(issuer.issuer)
      if (issuer.jwksUri === undefined) return
      const problem = Trusted.transportProblem(issuer.jwksUri, { allowHttpLoopback })
      if (problem !== undefined) {
        problems.push(`issuers[${i}].jwksUri: ${problem}`)
      } else if (SecureUrl.transportOf(issuer.jwksUri) === "http-loopback" && !warned) {
        warned = true
        warn(
          `[keyway] DEVELOPMENT MODE: workload identity keys are fetched over plain http from ${issuer.jwksUri}. ` +
            "Never use this outside local development.",
        )
      }
    })
    return problems
  }

  /** The problems of the rules against the server's resources and their scopes. */
  const ruleProblems = (config: Config.ResolvedConfig): ReadonlyArray<string> =>
    options.issuers.flatMap((issuer, i) =>
      issuer.rules.flatMap((rule, j) =>
        rule.resources.flatMap((uri, k) => {
          const field = `issuers[${i}].rules[${j}]`
          const canonical = CanonicalUri.validate(uri)
          const resource = Result.isSuccess(canonical) ? config.resources.get(canonical.success) : undefined
          if (resource === undefined) {
            return [`${field}.resources[${k}]: ${uri} is not a resource of this authorization server`]
          }
          return rule.scopes
            .map((scope, s) => [scope, s] as const)
            .filter(([scope]) => !resource.scopes.has(scope))
            .map(([scope, s]) => `${field}.scopes[${s}]: ${scope} is not a scope of ${resource.uri}`)
        }),
      ),
    )

  let issuers: ReadonlyMap<string, Issuer> | undefined
  /** The issuers with their key sets, made once (the remote sets cache what they fetch). */
  const trusted = (): ReadonlyMap<string, Issuer> => {
    if (issuers !== undefined) return issuers
    issuers = new Map(
      options.issuers.map((issuer) => {
        const keys = TrustedIssuers.keySet(issuer, {
          allowHttpLoopback,
          cache,
          ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
        })
        return [
          issuer.issuer,
          {
            options: issuer,
            algorithms: issuer.algorithms ?? Grant.ASYMMETRIC_ALGORITHMS,
            keys,
            describeKeys: issuer.jwksUri ?? "the configured jwks",
          },
        ]
      }),
    )
    return issuers
  }

  const handle = (context: Extension.GrantContext) => {
    const { config, form, now } = context
    // What is known so far, for the log line of a refusal.
    const seen: { -readonly [K in keyof IssuanceEvent]?: IssuanceEvent[K] } = {}
    const refuse = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))
    const invalidGrant = (description: string) => refuse("invalid_grant", description)
    return Effect.gen(function* () {
      const assertion = form.get("assertion")
      if (assertion === undefined || assertion === "") return yield* refuse("invalid_request", "assertion is missing")
      const resource = yield* context.resource(form.get("resource"))
      seen.resource = resource.uri
      const scopeParam = form.get("scope")
      const requested = scopeParam === undefined ? undefined : Scope.validate(scopeParam)
      if (requested !== undefined && Result.isFailure(requested))
        return yield* refuse("invalid_scope", "scope is malformed")

      if (assertion.split(".").length !== 3) {
        return yield* invalidGrant("the assertion is not a signed JWT (JWS compact serialization, RFC 7523 section 3)")
      }
      let header: ReturnType<typeof decodeProtectedHeader>
      let unverified: Readonly<Record<string, unknown>>
      try {
        header = decodeProtectedHeader(assertion)
        unverified = decodeJwt(assertion)
      } catch {
        return yield* invalidGrant("the assertion is not a JWT")
      }
      const alg = typeof header.alg === "string" ? header.alg : "absent"
      if (!Grant.ASYMMETRIC_ALGORITHMS.includes(alg)) {
        return yield* invalidGrant(
          `the assertion's alg is ${alg}: only asymmetric signatures are accepted (${Grant.ASYMMETRIC_ALGORITHMS.join(", ")})`,
        )
      }
      const iss = unverified.iss
      if (typeof iss !== "string" || iss === "") {
        return yield* invalidGrant("the assertion has no iss claim (RFC 7523 section 3 item 1)")
      }
      seen.issuer = iss
      const issuer = trusted().get(iss)
      if (issuer === undefined) return yield* invalidGrant(`the assertion's issuer ${iss} is not trusted`)
      if (!issuer.algorithms.includes(alg)) {
        return yield* invalidGrant(
          `the assertion's alg ${alg} is not accepted for issuer ${iss} (accepted: ${issuer.algorithms.join(", ")})`,
        )
      }
      const verified = yield* Effect.tryPromise({
        try: () => compactVerify(assertion, issuer.keys, { algorithms: [...issuer.algorithms] }),
        catch: (cause) => OAuthError.make("invalid_grant", keyFailure(issuer, header.kid, cause)),
      })
      let claims: Readonly<Record<string, unknown>>
      try {
        claims = JSON.parse(new TextDecoder().decode(verified.payload)) as Readonly<Record<string, unknown>>
      } catch {
        return yield* invalidGrant("the assertion's payload is not JSON")
      }
      const skew = issuer.options.clockSkew ?? defaults.clockSkew
      const result = Assertion.check(claims, {
        issuer: iss,
        now,
        audiences: issuer.options.audiences ?? [config.issuer, config.endpoints.token],
        clockSkew: skew,
        maxLifetime: issuer.options.maxLifetime ?? defaults.maxLifetime,
        maxAge: issuer.options.maxAge,
        requireIat: true,
        requireJti: true,
      })
      if (Result.isFailure(result)) return yield* invalidGrant(result.failure)
      // Required above: present.
      const checked = { ...result.success, jti: result.success.jti as string }
      seen.subject = checked.sub
      seen.jti = checked.jti
      // RFC 7523 §3 item 7: single use, per issuer (a jti is unique only within its issuer), remembered until the
      // assertion could no longer be accepted anyway.
      const fresh = yield* context.rememberJti(`wif ${iss}`, checked.jti, checked.exp + skew)
      if (!fresh) return yield* invalidGrant("the assertion's jti was already used: an assertion is accepted once")
      // The server's limit per workload (rateLimits.workload), counted only now: nobody can spend a workload's
      // allowance without a fresh assertion its issuer signed for it.
      yield* context.limitIdentity(iss, checked.sub)

      const matched = issuer.options.rules.filter((rule) => ruleMatches(rule, claims))
      if (matched.length === 0) {
        return yield* invalidGrant(`no rule of issuer ${iss} admits the workload ${checked.sub}`)
      }
      const forResource = matched.filter((rule) => rule.resources.some((uri) => CanonicalUri.equals(uri, resource.uri)))
      if (forResource.length === 0) {
        return yield* refuse("invalid_target", `the workload ${checked.sub} may not obtain tokens for ${resource.uri}`)
      }
      const allowed = forResource.reduce<ReadonlyArray<string>>((all, rule) => Scope.union(all, rule.scopes), [])
      const wanted = requested === undefined ? allowed : requested.success
      const refused = Scope.difference(wanted, allowed)
      if (refused.length > 0) {
        return yield* refuse(
          "invalid_scope",
          `the workload ${checked.sub} may not be granted ${Scope.format(refused)} at ${resource.uri}`,
        )
      }
      const scope = Scope.format(wanted)
      const clientId = context.client?.client_id ?? issuer.options.clientId ?? iss
      const response = yield* context.issue({ subject: checked.sub, clientId, resource: resource.uri, scope })
      log({ outcome: "issued", at: now, ...seen, scope, clientId })
      return response
    }).pipe(
      Effect.tapError((error) =>
        Effect.sync(() =>
          log({
            outcome: "refused",
            at: now,
            ...seen,
            ...(error._tag === "OAuthError"
              ? {
                  error: error.error,
                  ...(error.error_description === undefined ? {} : { description: error.error_description }),
                }
              : error._tag === "RateLimited"
                ? { error: "invalid_request", description: error.description }
                : { error: "server_error", description: error.message }),
          }),
        ),
      ),
    )
  }

  return {
    id: Grant.extensions.workloadIdentity,
    grants: [
      {
        grantType: Grant.JWT_BEARER,
        clientAuthentication: "optional",
        accepts: (form) => !isIdentityAssertion(form),
        handle,
      },
    ],
    validate: (config) => {
      const problems = problemsOf()
      const all = problems.length > 0 ? problems : ruleProblems(config)
      return all.length === 0 ? undefined : all.join("; ")
    },
  }
}
