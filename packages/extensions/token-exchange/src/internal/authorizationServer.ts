import { Config, type Extension } from "@keyway/authorization-server"
import { CanonicalUri, Grant, OAuthError, Options, Scope, TokenExchange } from "@keyway/core"
import { Effect, Result } from "effect"
import { z } from "zod"

/**
 * One exchange a client may make: a subject token for the resource `from` becomes a token for the resource `to`,
 * with the target scopes whose source scope the subject token holds.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export interface ExchangeRule {
  /** A source resource: the subject token's `aud` must be it (compared as canonical URIs). */
  readonly from: string
  /** A target resource: a configured resource of the server. */
  readonly to: string
  /** Each target scope, mapped to the source scope the subject token (and its grant) must hold for it to be granted. */
  readonly scopes: Readonly<Record<string, string>>
}

/**
 * What one exchanging client may do.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export interface ExchangePolicy {
  readonly exchanges: ReadonlyArray<ExchangeRule>
}

/**
 * Options of {@link tokenExchange}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html | RFC 8693}
 */
export interface TokenExchangeOptions {
  /** Per exchanging client (client ID → its policy); a client not named here is refused. */
  readonly clients: Readonly<Record<string, ExchangePolicy>>
  /** The longest `act` chain an issued token may carry (1: only direct exchanges); 2 by default. */
  readonly maxChain?: number
}

const resourceId = z
  .string({ error: "must be a string" })
  .refine(CanonicalUri.isValid, "must be an absolute URI without a fragment")
const scopeToken = z.string({ error: "must be a string" }).refine(Scope.isScopeToken, "must be one scope")

/**
 * The schema of {@link TokenExchangeOptions}, for configuration files.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html | RFC 8693}
 */
export const tokenExchangeOptionsSchema = z.strictObject(
  {
    clients: z.record(
      z.string().min(1, "a client ID must not be empty"),
      z.strictObject(
        {
          exchanges: z.array(
            z.strictObject(
              {
                from: resourceId,
                to: resourceId,
                scopes: z
                  .record(scopeToken, scopeToken, { error: "must map target scopes to source scopes" })
                  .refine((scopes) => Object.keys(scopes).length > 0, "must name at least one scope"),
              },
              { error: "must be an object" },
            ),
            { error: "must be an array" },
          ),
        },
        { error: "must be an object" },
      ),
      { error: "must be an object mapping client IDs to their exchanges" },
    ),
    maxChain: z
      .number({ error: "must be a number" })
      .int("must be a whole number")
      .min(1, "must be at least 1")
      .max(TokenExchange.MAX_CHAIN, `must be at most ${TokenExchange.MAX_CHAIN}`)
      .optional(),
  },
  { error: "must be an object" },
)

const err = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

/** The configured resource a URI names, compared as canonical URIs. */
const configured = (config: Config.ResolvedConfig, uri: string): Config.Resource | undefined => {
  const canonical = CanonicalUri.validate(uri)
  return Result.isSuccess(canonical) ? config.resources.get(canonical.success) : undefined
}

/** Problems of the policies against the server's configuration, or undefined. */
const validate = (options: TokenExchangeOptions, config: Config.ResolvedConfig): string | undefined => {
  for (const [clientId, policy] of Object.entries(options.clients)) {
    const client = config.clients.find((c) => c.clientId === clientId)
    if (client !== undefined) {
      if (!(client.grantTypes ?? []).includes(Grant.TOKEN_EXCHANGE)) {
        return `clients.${clientId}: the client's grantTypes do not include ${Grant.TOKEN_EXCHANGE}`
      }
      if (Config.clientAuthMethod(client) === "none") {
        return `clients.${clientId}: the client is public (no credentials): token exchange is for confidential clients`
      }
    }
    for (const [i, rule] of policy.exchanges.entries()) {
      const at = `clients.${clientId}.exchanges.${i}`
      const from = configured(config, rule.from)
      if (from === undefined) return `${at}.from: ${rule.from} is not a configured resource`
      const to = configured(config, rule.to)
      if (to === undefined) return `${at}.to: ${rule.to} is not a configured resource`
      for (const [target, source] of Object.entries(rule.scopes)) {
        if (!to.scopes.has(target)) return `${at}.scopes: ${target} is not a scope of ${to.uri}`
        if (!from.scopes.has(source)) return `${at}.scopes.${target}: ${source} is not a scope of ${from.uri}`
      }
    }
  }
  return undefined
}

const UNUSABLE_SUBJECT = "the subject_token is not an active access token of this authorization server"

/**
 * The token exchange grant (RFC 8693) for `@keyway/authorization-server`: a confidential client named in `clients`
 * (an MCP server) presents an access token this server issued for it (`subject_token`) and receives an access token
 * for another configured resource (`resource` or `audience`), for the same user (`sub`), with itself as the actor
 * (`act`, the subject token's own `act` nested), within the scopes its rules map from those the subject token and its
 * grant still hold, expiring no later than the subject token, and recorded under the subject token's grant so that
 * revoking the grant revokes every token exchanged from it. It takes the requests whose `requested_token_type` is
 * absent or `urn:ietf:params:oauth:token-type:access_token`; no refresh token is issued. Refusals: `invalid_client`
 * for a public client, `unauthorized_client` for a client not named in `clients`, `invalid_request` for a malformed
 * request or an unusable subject or actor token, `invalid_target` for a target the client's rules do not allow,
 * `invalid_scope` for a scope beyond them.
 *
 * @example
 * ```ts
 * createAuthorizationServer({
 *   issuer, resources, users,
 *   clients: [{ clientId: "notes-mcp", clientSecret, redirectUris: [], grantTypes: [Grant.TOKEN_EXCHANGE] }],
 *   extensions: [tokenExchange({
 *     clients: { "notes-mcp": { exchanges: [
 *       { from: "https://mcp.example.com/mcp", to: "https://api.example.com", scopes: { "files:read": "notes:read" } },
 *     ] } },
 *   })],
 * })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2 | RFC 8693 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.1 | RFC 8693 §4.1}
 */
export const tokenExchange = (options: TokenExchangeOptions): Extension.AuthorizationServerExtension => {
  Options.check("tokenExchange", tokenExchangeOptionsSchema, options)
  const maxChain = options.maxChain ?? 2
  return {
    id: Grant.TOKEN_EXCHANGE,
    validate: (config) => validate(options, config),
    grants: [
      {
        grantType: Grant.TOKEN_EXCHANGE,
        clientAuthentication: "required",
        accepts: (form) => {
          const requested = form.get("requested_token_type")
          return requested === undefined || requested === Grant.ACCESS_TOKEN_TYPE
        },
        handle: (context) =>
          Effect.gen(function* () {
            const { client, form, config } = context
            if (client === undefined || client.token_endpoint_auth_method === "none") {
              return yield* err("invalid_client", "token exchange needs client credentials")
            }
            const policy = Object.hasOwn(options.clients, client.client_id)
              ? options.clients[client.client_id]
              : undefined
            if (policy === undefined) {
              return yield* err("unauthorized_client", `the client ${client.client_id} may not exchange tokens`)
            }
            const parsed = TokenExchange.parseRequest(form, {
              subjectTokenTypes: [Grant.ACCESS_TOKEN_TYPE, Grant.JWT_TOKEN_TYPE],
              requestedTokenTypes: [Grant.ACCESS_TOKEN_TYPE],
              actorTokenTypes: [Grant.ACCESS_TOKEN_TYPE],
            })
            if (Result.isFailure(parsed)) return yield* err(parsed.failure.code, parsed.failure.description)
            const request = parsed.success

            // The target: `resource` and `audience` both name a resource here; when both are sent, the same one.
            if (request.resource === undefined && request.audience === undefined) {
              return yield* err("invalid_request", "resource or audience is missing")
            }
            if (
              request.resource !== undefined &&
              request.audience !== undefined &&
              !CanonicalUri.equals(request.resource, request.audience)
            ) {
              return yield* err("invalid_target", "resource and audience name different resources")
            }
            const target = yield* context.resource(request.resource ?? request.audience)

            // The subject token: one of ours, live, issued under a grant (a user's authorization).
            const subject = yield* context.verifyAccessToken(request.subjectToken)
            if (subject === undefined || subject.grant === undefined) {
              return yield* err("invalid_request", UNUSABLE_SUBJECT)
            }
            const fromSource = policy.exchanges.filter((r) => CanonicalUri.equals(r.from, subject.resource))
            if (fromSource.length === 0) {
              return yield* err(
                "invalid_request",
                `the client ${client.client_id} may not exchange tokens for ${subject.resource}`,
              )
            }
            const rules = fromSource.filter((r) => CanonicalUri.equals(r.to, target.uri))
            if (rules.length === 0) {
              return yield* err(
                "invalid_target",
                `the client ${client.client_id} may not exchange tokens for ${subject.resource} for ${target.uri}`,
              )
            }

            // The actor: the client itself, or the subject of the client's own token it presents as actor_token.
            let actor: TokenExchange.Actor = { sub: client.client_id }
            if (request.actorToken !== undefined) {
              const actorToken = yield* context.verifyAccessToken(request.actorToken)
              if (actorToken === undefined || actorToken.clientId !== client.client_id) {
                return yield* err(
                  "invalid_request",
                  "the actor_token is not an active access token of the authenticated client",
                )
              }
              actor = { sub: actorToken.subject }
            }
            if (!TokenExchange.mayAct(subject.claims, { ...actor, iss: config.issuer })) {
              return yield* err("invalid_request", `the subject_token does not let ${actor.sub} act for its subject`)
            }
            const chain = TokenExchange.actors(subject.claims)
            if (Result.isFailure(chain)) {
              return yield* err("invalid_request", `the subject_token's act claim is malformed: ${chain.failure}`)
            }
            if (chain.success.length + 1 > maxChain) {
              return yield* err("invalid_request", `the delegation chain would be longer than ${maxChain}`)
            }

            // Scope: never wider than what the subject token and its grant both still hold, mapped by the rules.
            const held = Scope.intersection(Scope.parse(subject.scope), Scope.parse(subject.grant.scope))
            const allowed = Scope.dedupe(
              rules.flatMap((r) =>
                Object.entries(r.scopes)
                  .filter(([, source]) => held.includes(source))
                  .map(([targetScope]) => targetScope),
              ),
            )
            let granted = allowed
            if (request.scope !== undefined) {
              const asked = Scope.parse(request.scope)
              const refused = asked.filter((s) => !allowed.includes(s))
              if (refused.length > 0) {
                return yield* err(
                  "invalid_scope",
                  `the scope ${refused.join(" ")} may not be obtained for ${target.uri} from this subject_token`,
                )
              }
              granted = Scope.dedupe(asked)
            }
            if (granted.length === 0) {
              return yield* err("invalid_scope", `no scope for ${target.uri} may be obtained from this subject_token`)
            }

            return yield* context.issue({
              subject: subject.subject,
              clientId: client.client_id,
              resource: target.uri,
              scope: Scope.format(granted),
              claims: { act: TokenExchange.withActor(actor, subject.claims) },
              expiresAt: subject.expiresAt,
              grantId: subject.grant.id,
              issuedTokenType: Grant.ACCESS_TOKEN_TYPE,
              source: subject.resource,
            })
          }),
      },
    ],
  }
}
