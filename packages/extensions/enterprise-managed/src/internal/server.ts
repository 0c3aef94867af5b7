import { type Extension, TrustedIssuers } from "@keyway/authorization-server"
import { Assertion, CanonicalUri, Grant, OAuthError, Options, Scope, SecureUrl, TrustedIssuer } from "@keyway/core"
import { Effect, Result } from "effect"
import { decodeJwt, decodeProtectedHeader, type JWTVerifyGetKey, jwtVerify } from "jose"
import { z } from "zod"
import { err } from "./common.js"

/**
 * The authorization grant profile an authorization server lists in `authorization_grant_profiles_supported`.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-7.2 | Identity Assertion Authorization Grant §7.2}
 */
export const ID_JAG_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"

/**
 * One enterprise identity provider whose identity assertions the authorization server accepts (core's
 * `TrustedIssuer`: its `issuer`, and its keys at `jwksUri`, https, or inline as `jwks`), and what they may grant.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.4.1 | Identity Assertion Authorization Grant §4.4.1}
 */
export interface TrustedIdentityProvider extends TrustedIssuer.TrustedIssuer {
  /** The client IDs (at this server) its assertions may name in `client_id`; every client when omitted. */
  readonly clients?: ReadonlyArray<string>
  /** The resources (canonical URIs of configured resources) its assertions may name; every resource when omitted. */
  readonly resources?: ReadonlyArray<string>
  /** The scopes its assertions may grant, space-separated; every scope of the resource when omitted. */
  readonly scope?: string
}

/**
 * Options of {@link identityAssertionGrant}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 */
export interface IdentityAssertionGrantOptions {
  readonly identityProviders: ReadonlyArray<TrustedIdentityProvider>
  /** The clock skew tolerated on `exp` and `iat`, in seconds; 60 by default. */
  readonly clockSkew?: number
  /** The longest lifetime of an assertion (`exp` - `iat`) accepted, in seconds; 600 by default. */
  readonly maxLifetime?: number
  /**
   * The `fetch` for identity providers' key sets, instead of the authorization server's SSRF guard
   * (`TrustedIssuers.keySet`: https only, every address of the host vetted, no redirects), the default.
   */
  readonly fetch?: typeof globalThis.fetch
  /** Development relaxations, off by default and loud when on. */
  readonly development?: {
    /** Fetch `jwksUri` over plain http, and from loopback addresses, when its host is loopback. */
    readonly allowHttpLoopbackJwks?: boolean
  }
  /** Where warnings go (development relaxations); `console.warn` by default. */
  readonly warn?: (message: string) => void
}

const url = z.url({ error: "must be an absolute URL" })
/**
 * The schema of {@link IdentityAssertionGrantOptions} (without `fetch`), for configuration files.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 */
export const optionsSchema = z.strictObject(
  {
    identityProviders: z.array(
      TrustedIssuer.schemaWith({ exactlyOneAt: "issuer" }).safeExtend({
        issuer: url,
        jwksUri: url.optional(),
        // An empty set is left to fail verification, as before the shared schema.
        jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).optional(),
        clients: z.array(z.string().min(1, "must not be empty")).optional(),
        resources: z.array(z.string().min(1, "must not be empty")).optional(),
        scope: z.string({ error: "must be a string" }).optional(),
      }),
      { error: "must be an array" },
    ),
    clockSkew: z.number().int().min(0).max(300).optional(),
    maxLifetime: z.number().int().min(1).max(86_400).optional(),
    fetch: z.custom<typeof globalThis.fetch>((f) => typeof f === "function").optional(),
    development: z
      .strictObject({ allowHttpLoopbackJwks: z.boolean().optional() }, { error: "must be an object" })
      .optional(),
    warn: z.custom<(message: string) => void>((f) => typeof f === "function").optional(),
  },
  { error: "must be an object" },
)

/** The `typ` and `iss` of a compact JWT, unverified; undefined for anything that is not one. */
const peek = (assertion: string): { typ: unknown; iss: unknown } | undefined => {
  try {
    return { typ: decodeProtectedHeader(assertion).typ, iss: decodeJwt(assertion).iss }
  } catch {
    return undefined
  }
}

const canonical = (uri: string): string | undefined => {
  const c = CanonicalUri.validate(uri)
  return Result.isSuccess(c) ? c.success : undefined
}

/**
 * The identity assertion authorization grant for `@keyway/authorization-server`, the MCP authorization server's side
 * of enterprise-managed authorization: the JWT bearer grant (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`)
 * with an ID-JAG from a trusted identity provider as the `assertion`, presented by the client the assertion names,
 * authenticated as for any grant. The assertion is checked (`typ` `oauth-id-jag+jwt`, signature by the identity
 * provider's keys, `iss`, `aud` = this server's issuer, `exp` and `iat` within the skew, a bounded lifetime,
 * `client_id` = the authenticated client, `resource` a configured resource the provider may grant, `jti` unused), and
 * an access token for that resource is issued for the scopes asked, asserted and allowed alike. Refusals:
 * `invalid_grant` naming the failed check, `invalid_target` for a resource, `invalid_scope` for a scope.
 *
 * @example
 * ```ts
 * createAuthorizationServer({
 *   issuer, resources,
 *   clients: [{ clientId: "chat", clientSecret, redirectUris: [], grantTypes: [Grant.JWT_BEARER] }],
 *   extensions: [identityAssertionGrant({ identityProviders: [{ issuer: "https://idp.example.com", jwksUri }] })],
 * })
 * ```
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization §5}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.4 | Identity Assertion Authorization Grant §4.4}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export const identityAssertionGrant = (
  options: IdentityAssertionGrantOptions,
): Extension.AuthorizationServerExtension => {
  Options.check("identityAssertionGrant", optionsSchema, options)
  const allowHttpLoopback = options.development?.allowHttpLoopbackJwks === true
  const warn = options.warn ?? ((message: string) => console.warn(message))
  let warned = false
  options.identityProviders.forEach((p, i) => {
    if (p.jwksUri === undefined) return
    const problem = TrustedIssuer.transportProblem(p.jwksUri, { allowHttpLoopback })
    if (problem !== undefined) {
      throw Options.invalid("identityAssertionGrant", `identityProviders.${i}.jwksUri`, problem)
    }
    if (SecureUrl.transportOf(p.jwksUri) === "http-loopback" && !warned) {
      warned = true
      warn(
        `[keyway] DEVELOPMENT MODE: identity provider keys are fetched over plain http from ${p.jwksUri}. ` +
          "Never use this outside local development.",
      )
    }
  })
  const clockSkew = options.clockSkew ?? 60
  const maxLifetime = options.maxLifetime ?? 600
  const providers = new Map(options.identityProviders.map((p) => [p.issuer, p]))
  // One key set per provider for the server's life: remote sets cache what they fetch and refetch on an unknown kid.
  const keySets = new Map<string, JWTVerifyGetKey>()
  const keysOf = (provider: TrustedIdentityProvider): JWTVerifyGetKey => {
    let keys = keySets.get(provider.issuer)
    if (keys === undefined) {
      keys = TrustedIssuers.keySet(provider, {
        allowHttpLoopback,
        ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      })
      keySets.set(provider.issuer, keys)
    }
    return keys
  }
  return {
    id: Grant.extensions.enterpriseManaged,
    metadata: () => ({ authorization_grant_profiles_supported: [ID_JAG_PROFILE] }),
    validate: (config) => {
      for (const p of options.identityProviders) {
        for (const uri of p.resources ?? []) {
          const c = canonical(uri)
          if (c === undefined || !config.resources.has(c)) {
            return `identityProviders (${p.issuer}).resources: ${uri} is not a configured resource`
          }
        }
        if (p.scope !== undefined && Result.isFailure(Scope.validate(p.scope))) {
          return `identityProviders (${p.issuer}).scope: not a valid scope string`
        }
      }
      return undefined
    },
    grants: [
      {
        grantType: Grant.JWT_BEARER,
        clientAuthentication: "required",
        // Identity assertions, and untyped ones from a trusted provider (to be refused for their typ, not taken by
        // another profile of the JWT bearer grant).
        accepts: (form) => {
          const seen = peek(form.get("assertion") ?? "")
          return (
            seen !== undefined &&
            (seen.typ === Grant.ID_JAG_TYP || (typeof seen.iss === "string" && providers.has(seen.iss)))
          )
        },
        handle: (context) =>
          Effect.gen(function* () {
            const { client, config, now, form } = context
            if (client === undefined) return yield* err("invalid_client", "client authentication is required")
            const assertion = form.get("assertion")
            if (assertion === undefined || assertion === "")
              return yield* err("invalid_request", "assertion is missing")
            const seen = peek(assertion)
            if (seen === undefined) return yield* err("invalid_grant", "the assertion is not a JWT")
            if (seen.typ !== Grant.ID_JAG_TYP) {
              return yield* err("invalid_grant", `the assertion's typ must be ${Grant.ID_JAG_TYP}`)
            }
            const provider = typeof seen.iss === "string" ? providers.get(seen.iss) : undefined
            if (provider === undefined) {
              return yield* err(
                "invalid_grant",
                `the assertion's issuer ${String(seen.iss)} is not a trusted identity provider`,
              )
            }
            const verified = yield* Effect.tryPromise({
              try: () =>
                jwtVerify(assertion, keysOf(provider), {
                  typ: Grant.ID_JAG_TYP,
                  algorithms: [...Grant.ASYMMETRIC_ALGORITHMS],
                  // The claims are checked below, against the Effect clock.
                  currentDate: new Date(now * 1000),
                  clockTolerance: Number.MAX_SAFE_INTEGER,
                }),
              catch: () =>
                OAuthError.make(
                  "invalid_grant",
                  `the assertion's signature does not verify with the keys of ${provider.issuer}`,
                ),
            })
            const claims = verified.payload as Record<string, unknown>
            const registered = Assertion.check(claims, {
              issuer: provider.issuer,
              audiences: [config.issuer],
              now,
              clockSkew,
              maxLifetime,
              requireIat: true,
              requireJti: true,
            })
            if (Result.isFailure(registered)) return yield* err("invalid_grant", registered.failure)
            if (claims.client_id !== client.client_id) {
              return yield* err("invalid_grant", "the assertion's client_id is not the authenticated client")
            }
            if (provider.clients !== undefined && !provider.clients.includes(client.client_id)) {
              return yield* err(
                "invalid_grant",
                `${provider.issuer} may not grant access to the client ${client.client_id}`,
              )
            }
            if (typeof claims.resource !== "string") return yield* err("invalid_grant", "the assertion has no resource")
            const asserted = canonical(claims.resource)
            const resource = config.resources.get(asserted ?? "")
            if (asserted === undefined || resource === undefined) {
              return yield* err(
                "invalid_target",
                `the assertion's resource ${claims.resource} is not served by this authorization server`,
              )
            }
            const param = form.get("resource")
            if (param !== undefined && canonical(param) !== asserted) {
              return yield* err("invalid_target", "resource differs from the assertion's resource")
            }
            if (provider.resources !== undefined && !provider.resources.some((uri) => canonical(uri) === asserted)) {
              return yield* err("invalid_target", `${provider.issuer} may not grant access to ${asserted}`)
            }
            // Scopes: asked ∩ asserted ∩ allowed (the extension's §7.2.1); an assertion without scope leaves the
            // choice to the request and this server's policy.
            const defined = [...resource.scopes.keys()]
            const allowed =
              provider.scope === undefined ? defined : Scope.parse(provider.scope).filter((s) => defined.includes(s))
            let assertedScopes: ReadonlyArray<string> = allowed
            if (claims.scope !== undefined) {
              if (typeof claims.scope !== "string" || Result.isFailure(Scope.validate(claims.scope))) {
                return yield* err("invalid_grant", "the assertion's scope is malformed")
              }
              assertedScopes = Scope.parse(claims.scope)
            }
            const scopeParam = form.get("scope")
            let granted = allowed.filter((s) => assertedScopes.includes(s))
            if (scopeParam !== undefined) {
              const asked = Scope.validate(scopeParam)
              if (Result.isFailure(asked)) return yield* err("invalid_scope", "scope is malformed")
              const unknown = asked.success.filter((s) => !defined.includes(s))
              if (unknown.length > 0)
                return yield* err("invalid_scope", `${resource.uri} has no scope ${unknown.join(" ")}`)
              granted = asked.success.filter((s) => granted.includes(s))
              if (asked.success.length > 0 && granted.length === 0) {
                return yield* err("invalid_scope", `the assertion grants none of the scope ${asked.success.join(" ")}`)
              }
            }
            const { jti, exp, sub } = registered.success
            // Single use, per identity provider (RFC 7523 §3 item 7); checked last so a refused request spends nothing.
            const fresh = yield* context.rememberJti(`id-jag:${provider.issuer}`, jti as string, exp + clockSkew)
            if (!fresh) return yield* err("invalid_grant", "the assertion's jti was already used")
            return yield* context.issue({
              subject: sub,
              clientId: client.client_id,
              resource: resource.uri,
              scope: Scope.format(granted),
            })
          }),
      },
    ],
  }
}
