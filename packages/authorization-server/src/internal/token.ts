import { CanonicalUri, ClientAuth, Grant, OAuthError, Pkce, Scope } from "@keyway/core"
import { Effect, Option, Result } from "effect"
import type { ResolvedConfig, Resource } from "../Config.js"
import type { GrantContext, GrantHandler, Issue, TokenBinding } from "../Extension.js"
import type { RateLimited, RateLimiterService } from "../RateLimiter.js"
import { TokenSigner } from "../Signing.js"
import type { StorageError } from "../storage/Errors.js"
import { type Client, type ClientStore, GrantStore } from "../storage/Storage.js"
import { verifyOwnJwt } from "./accessToken.js"
import { type ClientAuthFailure, identifiesClient } from "./clientAuth.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { randomToken } from "./crypto.js"
import { emit } from "./events.js"
import { answerFailures, type BodyTooLargeFailure, readForm } from "./formEndpoint.js"
import { CORS_HEADERS, json } from "./http.js"
import { addressOf, authenticateWithinLimits, limitIdentity, limitPublicToken } from "./limits.js"

const err = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

/**
 * Signs an access token (RFC 9068) before anything is committed: the caller records its `jti` in the same transaction
 * as the redemption or refresh that issues it, and hands it out only after that commit.
 */
const signAccessToken = (
  config: ResolvedConfig,
  binding: TokenBinding,
  args: {
    subject: string
    clientId: string
    resource: string
    scope: string
    authTime?: number
    claims?: Readonly<Record<string, unknown>> | undefined
  },
) =>
  Effect.gen(function* () {
    const signer = yield* TokenSigner
    const iat = yield* nowSeconds
    const exp = iat + config.accessTokenTtl
    const jti = randomToken(16)
    const token = yield* signer
      .sign(
        {
          ...args.claims,
          ...binding.claims,
          iss: config.issuer,
          sub: args.subject,
          aud: args.resource,
          client_id: args.clientId,
          scope: args.scope,
          jti,
          iat,
          exp,
          ...(args.authTime === undefined ? {} : { auth_time: args.authTime }),
        },
        "at+jwt",
      )
      .pipe(Effect.catchTag("NoSigningKey", () => err("server_error", "no signing key is active")))
    return { token, record: { jti, expires_at: exp } }
  })

const codeErrors = {
  CodeNotFound: () => err("invalid_grant", "the authorization code is invalid"),
  CodeAlreadyUsed: () =>
    err("invalid_grant", "the authorization code was already used; tokens issued from it are revoked"),
  CodeExpired: () => err("invalid_grant", "the authorization code has expired"),
  GrantRevoked: () => err("invalid_grant", "the authorization code has been revoked"),
}

const authorizationCodeGrant = (
  config: ResolvedConfig,
  client: Client,
  form: ReadonlyMap<string, string>,
  binding: TokenBinding,
) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const code = form.get("code")
    if (code === undefined || code === "") return yield* err("invalid_request", "code is missing")
    const verifier = form.get("code_verifier")
    if (verifier === undefined || verifier === "") return yield* err("invalid_request", "code_verifier is missing")
    if (!Pkce.isVerifier(verifier)) {
      return yield* err("invalid_request", "code_verifier must be 43 to 128 unreserved characters (RFC 7636 §4.1)")
    }
    const resourceParam = form.get("resource")
    let resource: string | undefined
    if (resourceParam !== undefined) {
      const canonical = CanonicalUri.validate(resourceParam)
      if (Result.isFailure(canonical)) return yield* err("invalid_target", "resource is not a valid absolute URI")
      resource = canonical.success
    }

    const now = yield* nowSeconds
    const found = yield* grants.findCode(code)
    if (Option.isNone(found)) return yield* err("invalid_grant", "the authorization code is invalid")
    const record = found.value
    // A request that fails a check below spends the code (a stolen code gets no second try); a code already used,
    // expired or revoked answers that first, as the redemption itself would.
    const refuse = (failure: Effect.Effect<never, OAuthError.OAuthError>, revokeGrant = false) =>
      Effect.gen(function* () {
        yield* grants.consumeCode(code, now).pipe(Effect.catchTags(codeErrors))
        if (revokeGrant) {
          yield* grants.revokeGrant(record.grant_id, now).pipe(Effect.catchTag("GrantNotFound", () => Effect.void))
        }
        return yield* failure
      })
    if (record.client_id !== client.client_id) {
      return yield* refuse(err("invalid_grant", "the authorization code was issued to another client"), true)
    }
    // OAuth 2.1 §4.1.3: redirect_uri is required exactly when the authorization request carried it, and then must be
    // identical; without it there, the client's one registered redirect URI was used.
    const redirectUri = form.get("redirect_uri")
    if (redirectUri === undefined && record.redirect_uri_sent === true) {
      return yield* refuse(err("invalid_grant", "redirect_uri is required: the authorization request carried one"))
    }
    if (redirectUri !== undefined && redirectUri !== record.redirect_uri) {
      return yield* refuse(err("invalid_grant", "redirect_uri does not match the authorization request"))
    }
    const ok = yield* Effect.promise(() => Pkce.verifyS256(verifier, record.code_challenge))
    if (!ok) return yield* refuse(err("invalid_grant", "code_verifier does not match the code_challenge"))
    if (resource !== undefined && resource !== record.resource) {
      return yield* refuse(err("invalid_target", "resource differs from the one authorized"))
    }
    // RFC 9449 §10: a code requested for a key (dpop_jkt) is redeemed only with a proof by that key.
    if (record.confirmation !== undefined && record.confirmation !== binding.confirmation) {
      return yield* refuse(
        err(
          "invalid_grant",
          binding.confirmation === undefined
            ? "the authorization code is bound to a proof-of-possession key (dpop_jkt) and this request proves none"
            : "the authorization code is bound to another proof-of-possession key (dpop_jkt) than this request proves",
        ),
      )
    }

    const access = yield* signAccessToken(config, binding, {
      subject: record.subject,
      clientId: client.client_id,
      resource: record.resource,
      scope: record.scope,
      authTime: record.auth_time,
    })
    const refreshToken = client.grant_types.includes("refresh_token") ? randomToken(32) : undefined
    // OpenID Connect Core 1.0 §3.1.3.3: an ID token for the client when `openid` was granted.
    const idToken =
      config.openid && Scope.parse(record.scope).includes("openid")
        ? yield* signIdToken(config, client.client_id, record)
        : undefined
    // One transaction: the code consumed, the access token recorded, the refresh family opened.
    yield* grants
      .redeemCode({
        code,
        now,
        access_token: access.record,
        ...(refreshToken === undefined
          ? {}
          : {
              refresh: {
                token: refreshToken,
                expires_at: now + config.refreshTokenTtl,
                ...(binding.bindRefreshTokens === true && binding.confirmation !== undefined
                  ? { confirmation: binding.confirmation }
                  : {}),
              },
            }),
      })
      .pipe(Effect.catchTags(codeErrors))
    yield* emit({
      event: "token_issued",
      grant_type: Grant.AUTHORIZATION_CODE,
      client_id: client.client_id,
      subject: record.subject,
      resource: record.resource,
      scope: record.scope,
      expires_in: config.accessTokenTtl,
      refresh_token_issued: refreshToken !== undefined,
    })
    return tokenResponse(binding, access.token, config.accessTokenTtl, record.scope, refreshToken, idToken)
  })

/** The answers to a refresh token that cannot be used; reuse is reported as a security event too. */
const refreshErrors = (token: { readonly client_id: string; readonly subject: string }) => ({
  RefreshTokenNotFound: () => err("invalid_grant", "the refresh token is invalid"),
  RefreshTokenExpired: () => err("invalid_grant", "the refresh token has expired"),
  RefreshTokenRevoked: () => err("invalid_grant", "the refresh token has been revoked"),
  RefreshTokenReused: () =>
    emit({ event: "refresh_token_reuse_detected", client_id: token.client_id, subject: token.subject }).pipe(
      Effect.andThen(err("invalid_grant", "the refresh token was already used; its whole family is now revoked")),
    ),
})

const refreshGrant = (
  config: ResolvedConfig,
  client: Client,
  form: ReadonlyMap<string, string>,
  binding: TokenBinding,
  limit: PublicLimit,
) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const presented = form.get("refresh_token")
    const now = yield* nowSeconds
    // Looked up without side effects: what the token is for decides the access token signed below; whether it may
    // still be used (reuse, revocation, expiry) is decided in the one transaction that records that access token.
    const found =
      presented === undefined || presented === "" ? Option.none() : yield* grants.findRefresh(presented, now)
    // A public client's limits (its address, the token's family) in one check, as soon as the family is known.
    yield* limit(Option.isSome(found) ? found.value.family_id : undefined)
    if (presented === undefined || presented === "") return yield* err("invalid_request", "refresh_token is missing")
    const scopeParam = form.get("scope")
    let requested: ReadonlyArray<string> | undefined
    if (scopeParam !== undefined) {
      const parsed = Scope.validate(scopeParam)
      if (Result.isFailure(parsed)) return yield* err("invalid_scope", "scope is malformed")
      requested = parsed.success
    }
    const resourceParam = form.get("resource")
    if (Option.isNone(found)) return yield* err("invalid_grant", "the refresh token is invalid")
    const current = found.value
    const unusable = refreshErrors(current)
    // A request that fails a check answers first what presenting the token means (a rotated-out token is reuse and
    // revokes the family; a revoked or expired one says so), as a refresh would.
    const refuse = (failure: Effect.Effect<never, OAuthError.OAuthError>) =>
      grants.getRefresh(presented, now).pipe(Effect.catchTags(unusable), Effect.andThen(failure))
    if (current.client_id !== client.client_id) {
      return yield* refuse(err("invalid_grant", "the refresh token was issued to another client"))
    }
    // RFC 9449 §5: a refresh token bound to a key is used only with a proof by that key.
    if (current.confirmation !== undefined && current.confirmation !== binding.confirmation) {
      return yield* refuse(
        err(
          "invalid_grant",
          binding.confirmation === undefined
            ? "the refresh token is bound to a proof-of-possession key and this request proves none"
            : "the refresh token is bound to another proof-of-possession key than this request proves",
        ),
      )
    }
    const granted = Scope.parse(current.scope)
    const scopes = requested ?? granted
    if (!Scope.containsAll(granted, scopes)) {
      return yield* refuse(err("invalid_scope", "scope may narrow but never widen the original grant"))
    }
    if (resourceParam !== undefined) {
      const canonical = CanonicalUri.validate(resourceParam)
      if (Result.isFailure(canonical) || canonical.success !== current.resource) {
        return yield* refuse(err("invalid_target", "resource differs from the one the refresh token was issued for"))
      }
    }

    const scope = Scope.format(scopes)
    const access = yield* signAccessToken(config, binding, {
      subject: current.subject,
      clientId: client.client_id,
      resource: current.resource,
      scope,
      authTime: current.auth_time,
    })
    const rotate = client.token_endpoint_auth_method === "none" || config.rotateConfidentialRefreshTokens
    // OAuth 2.1 §4.3.1 / RFC 6749 §6: a successor keeps the original scope; only the access token narrows.
    const refreshed = yield* grants
      .refresh({
        token: presented,
        client_id: client.client_id,
        now,
        access_token: access.record,
        ...(rotate
          ? {
              rotation: {
                expires_at: now + config.refreshTokenTtl,
                reuse_interval: config.refreshTokenReuseInterval,
              },
            }
          : {}),
      })
      .pipe(
        Effect.catchTags({
          ...unusable,
          RefreshTokenClientMismatch: () => err("invalid_grant", "the refresh token was issued to another client"),
          GrantRevoked: () => err("invalid_grant", "the grant has been revoked"),
        }),
      )
    yield* emit({
      event: "token_issued",
      grant_type: Grant.REFRESH_TOKEN,
      client_id: client.client_id,
      subject: current.subject,
      resource: current.resource,
      scope,
      expires_in: config.accessTokenTtl,
      refresh_token_issued: refreshed.refresh_token !== undefined,
    })
    return tokenResponse(binding, access.token, config.accessTokenTtl, scope, refreshed.refresh_token)
  })

/**
 * An OpenID Connect ID token for the client the code was issued to.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#IDToken | OpenID Connect Core 1.0 §2}
 */
const signIdToken = (
  config: ResolvedConfig,
  clientId: string,
  record: { readonly subject: string; readonly auth_time: number; readonly nonce?: string | undefined },
) =>
  Effect.gen(function* () {
    const signer = yield* TokenSigner
    const iat = yield* nowSeconds
    return yield* signer
      .sign(
        {
          iss: config.issuer,
          sub: record.subject,
          aud: clientId,
          exp: iat + config.accessTokenTtl,
          iat,
          auth_time: record.auth_time,
          ...(record.nonce === undefined ? {} : { nonce: record.nonce }),
        },
        "JWT",
      )
      .pipe(Effect.catchTag("NoSigningKey", () => err("server_error", "no signing key is active")))
  })

const tokenResponse = (
  binding: TokenBinding,
  accessToken: string,
  expiresIn: number,
  scope: string,
  refreshToken: string | undefined,
  idToken?: string,
) =>
  json(
    {
      access_token: accessToken,
      token_type: binding.tokenType ?? "Bearer",
      expires_in: expiresIn,
      scope,
      ...(refreshToken === undefined ? {} : { refresh_token: refreshToken }),
      ...(idToken === undefined ? {} : { id_token: idToken }),
    },
    { headers: { ...CORS_HEADERS, ...binding.headers } },
  )

/**
 * The limits of a public client's token request, applied once in the request with what the grant knows (the refresh
 * token's family, when there is one); nothing for a client that authenticated with credentials.
 */
type PublicLimit = (family?: string) => Effect.Effect<void, RateLimited | StorageError>

/** The server's own grants, registered like any extension's. */
type BuiltinGrant = Omit<GrantHandler, "handle"> & {
  readonly run: (
    config: ResolvedConfig,
    client: Client,
    form: ReadonlyMap<string, string>,
    binding: TokenBinding,
    limit: PublicLimit,
  ) => Effect.Effect<Response, OAuthError.OAuthError | RateLimited | StorageError, GrantStore | TokenSigner>
}

const builtinGrants: ReadonlyArray<BuiltinGrant> = [
  { grantType: Grant.AUTHORIZATION_CODE, clientAuthentication: "required", run: authorizationCodeGrant },
  { grantType: Grant.REFRESH_TOKEN, clientAuthentication: "required", run: refreshGrant },
]

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
 * The token endpoint (OAuth 2.1 §3.2): form body only, size-capped, one authentication method, the extensions'
 * token-request hooks, then the grant handler registered for `grant_type`. Within the abuse limits (see
 * {@link authenticateWithinLimits}): a client that authenticates spends its own allowance; a public client or a grant
 * without a client is counted per client address, a refresh also per family, before the hooks and the grant (a
 * refresh once its family is known, in the same check). What it issues or refuses is reported as a security event
 * (not a request refused by a limit: the metrics count those).
 */
export const tokenEndpoint = (
  config: ResolvedConfig,
  request: Request,
  limiter: RateLimiterService,
): Effect.Effect<Response, StorageError, ClientStore | GrantStore | TokenSigner | MetadataDocuments> =>
  Effect.gen(function* () {
    const form = yield* readForm(config, request).pipe(Effect.tapError(reportRefusal(config, request, undefined)))
    return yield* grant(config, request, form, limiter).pipe(Effect.tapError(reportRefusal(config, request, form)))
  }).pipe(answerFailures(config, "token"))

const grant = (
  config: ResolvedConfig,
  request: Request,
  form: ReadonlyMap<string, string>,
  limiter: RateLimiterService,
) =>
  Effect.gen(function* () {
    const grantType = form.get("grant_type")
    const extension =
      grantType === undefined
        ? undefined
        : config.extensions
            .flatMap((e) => e.grants ?? [])
            .find((g) => g.grantType === grantType && (g.accepts === undefined || g.accepts(form)))
    // A grant that works without a client (workload identity federation) gets none when the request names none.
    const anonymous = extension?.clientAuthentication === "optional" && !identifiesClient(config, request, form)
    const authenticated = anonymous
      ? undefined
      : yield* authenticateWithinLimits(config, limiter, "token", request, form, [
          config.issuer,
          config.endpoints.token,
        ])
    const client = authenticated?.client
    const builtin = builtinGrants.find((g) => g.grantType === grantType)
    // A public client (its ID proves nothing) and a grant without a client are counted per client address; a refresh
    // by its grant, with its family, in the same check. A client that authenticated has spent its own allowance.
    const limitPublic: PublicLimit =
      authenticated === undefined || authenticated.method === "none"
        ? (family) => limitPublicToken(config, limiter, authenticated?.address ?? addressOf(config, request), family)
        : () => Effect.void
    if (builtin?.grantType !== Grant.REFRESH_TOKEN || client === undefined) yield* limitPublic()
    if (grantType === undefined || grantType === "") return yield* err("invalid_request", "grant_type is missing")
    if (builtin === undefined && extension === undefined) {
      return yield* err("unsupported_grant_type", `grant_type ${grantType} is not supported`)
    }
    if (client !== undefined && !client.grant_types.includes(grantType)) {
      return yield* err("unauthorized_client", `this client may not use the ${grantType} grant`)
    }
    const now = yield* nowSeconds
    const bindings: Array<TokenBinding> = []
    for (const e of config.extensions) {
      if (e.tokenRequest === undefined) continue
      const bound = yield* e.tokenRequest({ config, request, form, client, now })
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
    if (builtin !== undefined && client !== undefined) {
      return yield* builtin.run(config, client, form, binding, limitPublic)
    }
    const handler = extension as GrantHandler
    const grants = yield* GrantStore
    const services = yield* Effect.context<TokenSigner>()
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
      resource: (value) => resourceOf(config, value),
      issue: (issue: Issue) =>
        signAccessToken(config, binding, issue).pipe(
          Effect.tap(() => {
            reported = true
            return emit({
              event: "token_issued",
              grant_type: grantType,
              client_id: issue.clientId,
              subject: issue.subject,
              resource: issue.resource,
              scope: issue.scope,
              expires_in: config.accessTokenTtl,
              refresh_token_issued: false,
            })
          }),
          Effect.map((access) => tokenResponse(binding, access.token, config.accessTokenTtl, issue.scope, undefined)),
          Effect.provideContext(services),
        ),
      rememberJti: (namespace, jti, expiresAt) => grants.rememberJti(namespace, jti, expiresAt),
      sign: (claims, typ) =>
        Effect.gen(function* () {
          signed = claims
          const signer = yield* TokenSigner
          return yield* signer.sign({ ...claims }, typ)
        }).pipe(
          Effect.catchTag("NoSigningKey", () => err("server_error", "no signing key is active")),
          Effect.provideContext(services),
        ),
      verifyOwn: (token, options = {}) =>
        verifyOwnJwt(config, token, now, options.typ).pipe(Effect.provideContext(services)),
      limitIdentity: (issuer, subject) => limitIdentity(config, limiter, issuer, subject),
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
