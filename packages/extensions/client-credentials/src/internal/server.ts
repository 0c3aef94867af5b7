import { Config, type Extension } from "@keyway/authorization-server"
import { CanonicalUri, Grant, OAuthError, Options, Scope } from "@keyway/core"
import { Effect, Result } from "effect"
import { z } from "zod"

/**
 * What one client may obtain with the client credentials grant.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3 | RFC 6749 §3.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 */
export interface ClientPolicy {
  /** The resources (canonical URIs of configured resources) it may obtain tokens for; every resource when omitted. */
  readonly resources?: ReadonlyArray<string>
  /**
   * The scopes it may obtain, space-separated; when omitted, the client's configured `scope`, else every scope of the
   * resource. A request without `scope` gets all of these that the resource defines (RFC 6749 §3.3's pre-defined
   * default).
   */
  readonly scope?: string
}

/**
 * Options of {@link clientCredentialsGrant}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 */
export interface ClientCredentialsGrantOptions {
  /**
   * Per-client limits, by client ID. Any confidential client whose `grantTypes` include `client_credentials` may use
   * the grant; one listed here is held to its policy.
   */
  readonly clients?: Readonly<Record<string, ClientPolicy>>
}

/**
 * The schema of {@link ClientCredentialsGrantOptions}, for configuration files.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 */
export const optionsSchema = z.strictObject(
  {
    clients: z
      .record(
        z.string(),
        z.strictObject(
          {
            resources: z.array(z.string().min(1, "must not be empty"), { error: "must be an array" }).optional(),
            scope: z.string({ error: "must be a string" }).optional(),
          },
          { error: "must be an object" },
        ),
        { error: "must be an object mapping client IDs to their limits" },
      )
      .optional(),
  },
  { error: "must be an object" },
)

const err = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

/** Problems of the policies against the server's configuration, or undefined. */
const validate = (options: ClientCredentialsGrantOptions, config: Config.ResolvedConfig): string | undefined => {
  for (const c of config.clients) {
    if (!(c.grantTypes ?? []).includes(Grant.CLIENT_CREDENTIALS)) continue
    if (Config.clientAuthMethod(c) === "none") {
      return `client ${c.clientId} is public (no credentials): the client credentials grant is for confidential clients only (RFC 6749 §4.4)`
    }
  }
  for (const [clientId, policy] of Object.entries(options.clients ?? {})) {
    const configured = config.clients.find((c) => c.clientId === clientId)
    if (configured === undefined) return `clients.${clientId}: no such client is configured`
    if (!(configured.grantTypes ?? []).includes(Grant.CLIENT_CREDENTIALS)) {
      return `clients.${clientId}: the client's grantTypes do not include client_credentials`
    }
    for (const uri of policy.resources ?? []) {
      const canonical = CanonicalUri.validate(uri)
      if (Result.isFailure(canonical) || !config.resources.has(canonical.success)) {
        return `clients.${clientId}.resources: ${uri} is not a configured resource`
      }
    }
    if (policy.scope !== undefined && Result.isFailure(Scope.validate(policy.scope))) {
      return `clients.${clientId}.scope: not a valid scope string`
    }
  }
  return undefined
}

/**
 * The client credentials grant for `@keyway/authorization-server`. A pre-registered confidential client whose
 * `grantTypes` include `client_credentials` authenticates (any of its registered method) and receives an access token for one resource
 * (`resource`, RFC 8707), with the requested scope within its policy, and no refresh token. Refusals:
 * `unauthorized_client` for a client without the grant or not pre-registered, `invalid_target` for a resource it may not
 * have, `invalid_scope` for a scope beyond its policy or the resource's scopes.
 *
 * @example
 * ```ts
 * createAuthorizationServer({
 *   issuer, resources,
 *   clients: [{ clientId: "reporter", clientSecret, redirectUris: [], grantTypes: ["client_credentials"] }],
 *   extensions: [clientCredentialsGrant({ clients: { reporter: { scope: "notes:read" } } })],
 * })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4 | RFC 6749 §4.4}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.2 | OAuth 2.1 §4.2}
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 */
export const clientCredentialsGrant = (
  options: ClientCredentialsGrantOptions = {},
): Extension.AuthorizationServerExtension => {
  Options.check("clientCredentialsGrant", optionsSchema, options)
  return {
    id: Grant.extensions.clientCredentials,
    validate: (config) => validate(options, config),
    grants: [
      {
        grantType: Grant.CLIENT_CREDENTIALS,
        clientAuthentication: "required",
        handle: (context) =>
          Effect.gen(function* () {
            const client = context.client
            if (client === undefined) return yield* err("invalid_client", "client authentication is required")
            // The extension's credentials are established out of band: a client that described itself (a client ID
            // metadata document) gets no machine tokens, whatever grant types its document lists. Configured clients
            // with the grant are confidential (checked at start-up).
            if (client.origin !== "static") {
              return yield* err(
                "unauthorized_client",
                "only pre-registered clients may use the client_credentials grant",
              )
            }
            const resource = yield* context.resource(context.form.get("resource"))
            const policy = options.clients?.[client.client_id]
            if (
              policy?.resources !== undefined &&
              !policy.resources.some((uri) => CanonicalUri.isValid(uri) && CanonicalUri.parse(uri) === resource.uri)
            ) {
              return yield* err("invalid_target", `this client may not obtain tokens for ${resource.uri}`)
            }
            const defined = [...resource.scopes.keys()]
            const limit = policy?.scope ?? client.scope
            const allowed = limit === undefined ? defined : Scope.parse(limit).filter((s) => defined.includes(s))
            const param = context.form.get("scope")
            let granted: ReadonlyArray<string>
            if (param === undefined) {
              granted = allowed
            } else {
              const requested = Scope.validate(param)
              if (Result.isFailure(requested)) return yield* err("invalid_scope", "scope is malformed")
              const unknown = requested.success.filter((s) => !defined.includes(s))
              if (unknown.length > 0) {
                return yield* err("invalid_scope", `${resource.uri} has no scope ${unknown.join(" ")}`)
              }
              const denied = requested.success.filter((s) => !allowed.includes(s))
              if (denied.length > 0) {
                return yield* err("invalid_scope", `this client may not obtain the scope ${denied.join(" ")}`)
              }
              granted = requested.success
            }
            return yield* context.issue({
              subject: client.client_id,
              clientId: client.client_id,
              resource: resource.uri,
              scope: Scope.format(granted),
            })
          }),
      },
    ],
  }
}
