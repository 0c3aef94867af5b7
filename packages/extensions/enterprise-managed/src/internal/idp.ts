import type { Extension } from "@keyway/authorization-server"
import { CanonicalUri, Grant, Options, Scope, TokenExchange } from "@keyway/core"
import { Effect, Result } from "effect"
import { z } from "zod"
import { err } from "./common.js"

/**
 * An MCP authorization server the identity provider issues identity assertions for, and the resources behind it.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.3.3 | Identity Assertion Authorization Grant §4.3.3}
 */
export interface DownstreamAuthorizationServer {
  /** Its issuer identifier: the `audience` of the token exchange and the `aud` of the assertion. */
  readonly issuer: string
  /** The resource identifiers (MCP servers) it serves that assertions may name. */
  readonly resources: ReadonlyArray<string>
  /**
   * The clients of this identity provider that may obtain assertions for it, mapped to their client ID there (the
   * assertion's `client_id`).
   */
  readonly clients: Readonly<Record<string, string>>
}

/**
 * Who may reach what: a user (by subject) or every user, a resource, and the scopes they may be given there.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization §7.2}
 */
export interface AccessRule {
  /** The subjects (`sub` of this server's ID tokens) the rule is for; every user when omitted. */
  readonly users?: ReadonlyArray<string>
  /** The resource identifier the rule opens. */
  readonly resource: string
  /** The scopes it allows there, space-separated. */
  readonly scope: string
}

/**
 * Options of {@link identityAssertionIssuer}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.3 | Identity Assertion Authorization Grant §4.3}
 */
export interface IdentityAssertionIssuerOptions {
  readonly authorizationServers: ReadonlyArray<DownstreamAuthorizationServer>
  /** The access policy: a request is allowed the scopes of every rule that matches its user and resource. */
  readonly rules: ReadonlyArray<AccessRule>
  /** The lifetime of an assertion, in seconds; 300 by default. */
  readonly lifetime?: number
}

const resourceId = z.string().refine(CanonicalUri.isValid, "must be an absolute URI without a fragment")
/**
 * The schema of {@link IdentityAssertionIssuerOptions}, for configuration files.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.3 | Identity Assertion Authorization Grant §4.3}
 */
export const issuerOptionsSchema = z.strictObject({
  authorizationServers: z.array(
    z.strictObject({
      issuer: z.url({ error: "must be an absolute URL" }),
      resources: z.array(resourceId).min(1, "must name at least one resource"),
      clients: z.record(z.string().min(1), z.string().min(1)),
    }),
  ),
  rules: z.array(
    z.strictObject({
      users: z.array(z.string().min(1)).optional(),
      resource: resourceId,
      scope: z.string().refine((s) => Result.isSuccess(Scope.validate(s)), "not a valid scope string"),
    }),
  ),
  lifetime: z.number().int().min(10).max(3600).optional(),
})

const same = (a: string, b: string): boolean =>
  a === b || (CanonicalUri.isValid(a) && CanonicalUri.isValid(b) && CanonicalUri.parse(a) === CanonicalUri.parse(b))

/**
 * The identity provider's side of enterprise-managed authorization for `@keyway/authorization-server`: its token
 * endpoint accepts the token exchange (RFC 8693) of an ID token it issued to the requesting client
 * (`subject_token_type=urn:ietf:params:oauth:token-type:id_token`,
 * `requested_token_type=urn:ietf:params:oauth:token-type:id-jag`) and answers an identity assertion (ID-JAG, header
 * `typ: oauth-id-jag+jwt`) for a configured MCP authorization server (`audience`) and one of its resources
 * (`resource`), naming the client's ID there, with the scopes the rules allow the user. Enable the server's `openid`
 * option so that clients obtain ID tokens by signing users in. Refusals: `invalid_request` for a missing or wrong
 * parameter, `invalid_grant` for a subject token that is not a current ID token of this server for this client or a
 * user the rules do not let through, `invalid_target` for an unknown audience or resource or a client not known there,
 * `invalid_scope` for scopes beyond the rules.
 *
 * @example
 * ```ts
 * createAuthorizationServer({
 *   issuer: "https://idp.example.com", openid: true, resources, users,
 *   clients: [{ clientId: "chat", clientSecret, redirectUris, grantTypes: ["authorization_code", Grant.TOKEN_EXCHANGE] }],
 *   extensions: [identityAssertionIssuer({
 *     authorizationServers: [{ issuer: "https://auth.example.com", resources: ["https://mcp.example.com/mcp"], clients: { chat: "chat" } }],
 *     rules: [{ users: ["alice"], resource: "https://mcp.example.com/mcp", scope: "notes:read" }],
 *   })],
 * })
 * ```
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.3 | Identity Assertion Authorization Grant §4.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2 | RFC 8693 §2}
 */
export const identityAssertionIssuer = (
  options: IdentityAssertionIssuerOptions,
): Extension.AuthorizationServerExtension => {
  Options.check("identityAssertionIssuer", issuerOptionsSchema, options)
  const lifetime = options.lifetime ?? 300
  return {
    id: `${Grant.extensions.enterpriseManaged}#identity-provider`,
    metadata: () => ({ identity_chaining_requested_token_types_supported: [Grant.ID_JAG_TOKEN_TYPE] }),
    validate: (config) => (config.openid ? undefined : "identityAssertionIssuer needs the server's openid option"),
    grants: [
      {
        grantType: Grant.TOKEN_EXCHANGE,
        clientAuthentication: "required",
        accepts: (form) => form.get("requested_token_type") === Grant.ID_JAG_TOKEN_TYPE,
        handle: (context) =>
          Effect.gen(function* () {
            const { client, form, now, config } = context
            if (client === undefined) return yield* err("invalid_client", "client authentication is required")
            const parsed = TokenExchange.parseRequest(form, {
              subjectTokenTypes: [Grant.ID_TOKEN_TYPE],
              requestedTokenTypes: [Grant.ID_JAG_TOKEN_TYPE],
              requireAudience: true,
              requireResource: true,
            })
            if (Result.isFailure(parsed)) return yield* err(parsed.failure.code, parsed.failure.description)
            // Both are present: the policy requires them.
            const { subjectToken, audience = "", resource = "" } = parsed.success
            // The server's ID tokens are typed JWT (its access tokens at+jwt, which are no subject tokens here).
            const idToken = yield* context.verifyOwn(subjectToken, { typ: "JWT" })
            if (idToken === undefined || typeof idToken.sub !== "string") {
              return yield* err(
                "invalid_grant",
                "the subject_token is not a current ID token of this identity provider",
              )
            }
            const aud = typeof idToken.aud === "string" ? [idToken.aud] : Array.isArray(idToken.aud) ? idToken.aud : []
            if (!aud.includes(client.client_id)) {
              return yield* err("invalid_grant", "the subject_token was issued to another client")
            }
            const downstream = options.authorizationServers.find((a) => a.issuer === audience)
            if (downstream === undefined) {
              return yield* err(
                "invalid_target",
                `audience ${audience} is not an authorization server this identity provider issues assertions for`,
              )
            }
            const target = downstream.resources.find((r) => same(r, resource))
            if (target === undefined) return yield* err("invalid_target", `${audience} does not serve ${resource}`)
            const downstreamClient = downstream.clients[client.client_id]
            if (downstreamClient === undefined) {
              return yield* err(
                "invalid_target",
                `the client ${client.client_id} may not obtain assertions for ${audience}`,
              )
            }
            const subject = idToken.sub
            const matching = options.rules.filter(
              (r) => (r.users === undefined || r.users.includes(subject)) && same(r.resource, target),
            )
            if (matching.length === 0) return yield* err("invalid_grant", `the user ${subject} may not reach ${target}`)
            const allowed = Scope.dedupe(matching.flatMap((r) => Scope.parse(r.scope)))
            let granted = allowed
            if (parsed.success.scope !== undefined) {
              const asked = Scope.parse(parsed.success.scope)
              const denied = asked.filter((s) => !allowed.includes(s))
              if (denied.length > 0) {
                return yield* err(
                  "invalid_scope",
                  `the user ${subject} may not obtain the scope ${denied.join(" ")} at ${target}`,
                )
              }
              granted = asked
            }
            const scope = Scope.format(granted)
            const assertion = yield* context.sign(
              {
                iss: config.issuer,
                sub: subject,
                aud: audience,
                resource: target,
                client_id: downstreamClient,
                jti: crypto.randomUUID(),
                iat: now,
                exp: now + lifetime,
                ...(scope === "" ? {} : { scope }),
                ...(typeof idToken.auth_time === "number" ? { auth_time: idToken.auth_time } : {}),
              },
              Grant.ID_JAG_TYP,
            )
            return Response.json(
              {
                access_token: assertion,
                issued_token_type: Grant.ID_JAG_TOKEN_TYPE,
                token_type: "N_A",
                expires_in: lifetime,
                ...(scope === "" ? {} : { scope }),
              },
              { headers: { "cache-control": "no-store", pragma: "no-cache" } },
            )
          }),
      },
    ],
  }
}
