import { CanonicalUri, ClientAuth, Grant, type OAuthError, TokenExchange } from "@keyway/core"
import { Effect, Result } from "effect"
import type { ResolvedConfig, Resource } from "../Config.js"
import type { GrantContext, Issue, TokenBinding } from "../Extension.js"
import { redeemAuthorization } from "../grants/authorizationCode.js"
import { type GrantServices, grantRegistry } from "../grants/registry.js"
import { err, signAccessToken, signJwt, tokenResponse } from "../grants/tokens.js"
import type { RateLimited } from "../RateLimiter.js"
import { TokenSigner } from "../Signing.js"
import type { StorageError } from "../storage/Errors.js"
import type { ClientStore, GrantStore } from "../storage/Storage.js"
import { verifyOwnAccessToken, verifyOwnJwt } from "./accessToken.js"
import { type ClientAuthFailure, identifiesClient } from "./clientAuth.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { randomToken } from "./crypto.js"
import { emit } from "./events.js"
import { answerFailures, type BodyTooLargeFailure, readForm } from "./formEndpoint.js"
import { addressOf, authenticateWithinLimits, limitIdentity, limitPublicToken } from "./limits.js"

/** The configured resource a `resource` parameter names (RFC 8707 §2), or the default resource when it is absent. */
const resourceOf = (
  config: ResolvedConfig,
  value: string | undefined,
): Effect.Effect<Resource, OAuthError.OAuthError> => {
  if (value === undefined) {
    const fallback = config.defaultResource === undefined ? undefined : config.resources.get(config.defaultResource)
    return fallback === undefined
      ? err("invalid_request", "resource is missing: name the MCP server the token is for (RFC 8707)")
      : Effect.succeed(fallback)
  }
  const canonical = CanonicalUri.validate(value)
  if (Result.isFailure(canonical)) return err("invalid_target", "resource is not a valid absolute URI")
  const found = config.resources.get(canonical.success)
  return found === undefined
    ? err("invalid_target", `resource ${canonical.success} is not served by this authorization server`)
    : Effect.succeed(found)
}

/**
 * Reports a refused token request with the grant type and the client it named (HTTP Basic's user name, else the
 * form's `client_id`), as read before anything was checked; a storage failure is the server's, not a refusal.
 */
const reportRefusal =
  (config: ResolvedConfig, request: Request, form: ReadonlyMap<string, string> | undefined) =>
  (
    failure: OAuthError.OAuthError | ClientAuthFailure | BodyTooLargeFailure | RateLimited | StorageError,
  ): Effect.Effect<void> => {
    if (failure._tag === "StorageError" || failure._tag === "RateLimited") return Effect.void
    const authorization = request.headers.get("authorization")
    const clientId =
      (authorization === null ? undefined : ClientAuth.decodeClientSecretBasic(authorization)?.clientId) ??
      form?.get("client_id")
    const grantType = form?.get("grant_type")
    return emit({
      event: "token_refused",
      ...(failure._tag === "OAuthError"
        ? { error: failure.error, description: failure.error_description ?? "" }
        : failure._tag === "ClientAuthFailure"
          ? { error: failure.code, description: failure.description }
          : { error: "invalid_request", description: `the body exceeds ${config.maxBodyBytes} bytes` }),
      ...(grantType === undefined || grantType === "" ? {} : { grant_type: grantType }),
      ...(clientId === undefined || clientId === "" ? {} : { client_id: clientId }),
    })
  }

/**
 * The token endpoint (OAuth 2.1 §3.2) over one grant registry (the built-in grants, then the extensions'): form body
 * only, size-capped; the handler registered for `grant_type` (the first whose `accepts` takes the form); client
 * authentication as that handler asks (one method); the grant types the client may use; the extensions'
 * token-request hooks; then the handler. Within the abuse limits (see {@link authenticateWithinLimits}): a client that
 * authenticates spends its own allowance; a public client or a grant without a client is counted per client address,
 * before the hooks and the grant (a refresh by its grant, also per family once the family is known, in the same
 * check). What it issues or refuses is reported as a security event (not a request refused by a limit: the metrics
 * count those).
 */
export const tokenEndpoint = (
  config: ResolvedConfig,
  services: GrantServices,
): ((request: Request) => Effect.Effect<Response, StorageError, ClientStore | GrantStore | MetadataDocuments>) => {
  const registry = grantRegistry(services, config.extensions)
  const { grants, signer, limiter, records } = services
  const grant = (request: Request, form: ReadonlyMap<string, string>) =>
    Effect.gen(function* () {
      const grantType = form.get("grant_type")
      const handler = grantType === undefined ? undefined : registry.find(grantType, form)
      // A grant that works without a client (workload identity federation) gets none when the request names none.
      const anonymous = handler?.clientAuthentication === "optional" && !identifiesClient(config, request, form)
      const authenticated = anonymous
        ? undefined
        : yield* authenticateWithinLimits(config, limiter, "token", request, form, [
            config.issuer,
            config.endpoints.token,
          ])
      const client = authenticated?.client
      // A public client (its ID proves nothing) and a grant without a client are counted per client address; a
      // refresh by its grant, with its family, in the same check. A client that authenticated has spent its own
      // allowance.
      if (authenticated === undefined || authenticated.method === "none") {
        if (handler?.grantType !== Grant.REFRESH_TOKEN || client === undefined) {
          yield* limitPublicToken(config, limiter, authenticated?.address ?? addressOf(config, request))
        }
      }
      if (grantType === undefined || grantType === "") return yield* err("invalid_request", "grant_type is missing")
      if (handler === undefined) {
        return yield* err("unsupported_grant_type", `grant_type ${grantType} is not supported`)
      }
      if (client !== undefined && !client.grant_types.includes(grantType)) {
        return yield* err("unauthorized_client", `this client may not use the ${grantType} grant`)
      }
      const now = yield* nowSeconds
      const rememberJti = (namespace: string, jti: string, expiresAt: number) =>
        grants.rememberJti(namespace, jti, expiresAt)
      const bindings: Array<TokenBinding> = []
      for (const e of config.extensions) {
        if (e.tokenRequest === undefined) continue
        const bound = yield* e.tokenRequest({ config, request, form, client, now, rememberJti })
        if (bound !== undefined) bindings.push(bound)
      }
      const binding = bindings.reduce<TokenBinding>(
        (all, b) => ({
          claims: { ...all.claims, ...b.claims },
          headers: { ...all.headers, ...b.headers },
          ...((b.tokenType ?? all.tokenType) === undefined
            ? {}
            : { tokenType: (b.tokenType ?? all.tokenType) as string }),
          ...((b.confirmation ?? all.confirmation) === undefined
            ? {}
            : { confirmation: (b.confirmation ?? all.confirmation) as string }),
          ...(b.bindRefreshTokens === true || all.bindRefreshTokens === true ? { bindRefreshTokens: true } : {}),
        }),
        {},
      )
      // A grant that answers with a token it signed itself (the identity assertion of a token exchange) is reported
      // from the claims it signed, as `issue` reports the access tokens it signs.
      let reported = false
      let signed: Readonly<Record<string, unknown>> | undefined
      const context: GrantContext = {
        config,
        request,
        form,
        client,
        now,
        binding,
        resource: (value) => resourceOf(config, value),
        issue: (issue: Issue) =>
          Effect.gen(function* () {
            const access = yield* signAccessToken(signer, config, binding, issue)
            if (issue.grantId !== undefined) {
              // Recorded under its grant before it is answered: revoking the grant revokes this token too.
              yield* grants.recordAccessToken({ grant_id: issue.grantId, ...access.record }).pipe(
                Effect.catchTags({
                  GrantNotFound: () => err("invalid_grant", "the subject token's grant was revoked"),
                  GrantRevoked: () => err("invalid_grant", "the subject token's grant was revoked"),
                }),
              )
            }
            reported = true
            const chain = TokenExchange.actors(issue.claims ?? {})
            const actors = Result.isSuccess(chain) ? chain.success.map((a) => a.sub) : []
            yield* emit({
              event: "token_issued",
              grant_type: grantType,
              client_id: issue.clientId,
              subject: issue.subject,
              resource: issue.resource,
              scope: issue.scope,
              expires_in: access.expiresIn,
              refresh_token_issued: false,
              ...(issue.source === undefined ? {} : { source_resource: issue.source }),
              ...(actors.length === 0 ? {} : { actors }),
            })
            return tokenResponse(
              binding,
              access.token,
              access.expiresIn,
              issue.scope,
              undefined,
              undefined,
              issue.issuedTokenType,
            )
          }),
        rememberJti,
        sign: (claims, typ) =>
          Effect.suspend(() => {
            signed = claims
            return signJwt(signer, claims, typ)
          }),
        verifyOwn: (token, options = {}) =>
          verifyOwnJwt(config, token, now, options.typ).pipe(Effect.provideService(TokenSigner, signer)),
        verifyAccessToken: (token) =>
          verifyOwnAccessToken(config, grants, token, now).pipe(Effect.provideService(TokenSigner, signer)),
        limitIdentity: (issuer, subject) => limitIdentity(config, limiter, issuer, subject),
        records,
        issueAuthorized: (authorization) =>
          Effect.gen(function* () {
            // A `required` grant is reached only by an authenticated client.
            if (client === undefined) return yield* err("invalid_client", "client authentication failed")
            reported = true
            // Recorded as the code flow records an authorization (the consent remembered, the grant opened or
            // widened), through a code redeemed at once, so both flows share every rule of issuance and revocation.
            const code = randomToken(32)
            const record = yield* grants.createCode({
              code,
              client_id: client.client_id,
              redirect_uri: "",
              code_challenge: "",
              code_challenge_method: "S256",
              resource: authorization.resource,
              scope: authorization.scope,
              subject: authorization.subject,
              auth_time: authorization.authTime,
              issued_at: now,
              expires_at: now + config.codeTtl,
            })
            return yield* redeemAuthorization({ grants, signer }, config, client, binding, code, record, grantType)
          }),
      }
      const response = yield* handler.handle(context)
      if (!reported && response.status === 200 && signed !== undefined) {
        const text = (name: string) => (typeof signed?.[name] === "string" ? (signed[name] as string) : "")
        const lifetime = typeof signed.exp === "number" && typeof signed.iat === "number" ? signed.exp - signed.iat : 0
        yield* emit({
          event: "token_issued",
          grant_type: grantType,
          client_id: client?.client_id ?? "",
          subject: text("sub"),
          resource: text("resource"),
          scope: text("scope"),
          expires_in: lifetime,
          refresh_token_issued: false,
        })
      }
      return response
    })
  return (request) =>
    Effect.gen(function* () {
      const form = yield* readForm(config, request).pipe(Effect.tapError(reportRefusal(config, request, undefined)))
      return yield* grant(request, form).pipe(Effect.tapError(reportRefusal(config, request, form)))
    }).pipe(answerFailures(config, "token"))
}
