import { AuthError, type UserAgent } from "@keyway/client"
import { AuthorizationResponse, ClientAuth, Pkce, TokenResponse, WellKnown } from "@keyway/core"
import { Clock, Effect, Result } from "effect"
import { createRemoteJWKSet, customFetch, jwtVerify } from "jose"
import { identityProviderMetadata } from "./discovery.js"

/**
 * Options of {@link signIn}.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#CodeFlowAuth | OpenID Connect Core 1.0 §3.1}
 */
export interface SignInOptions {
  /**
   * The identity provider's issuer identifier. Its metadata is read and checked by `@keyway/core`'s `Metadata`: the
   * `issuer` compared exactly, PKCE S256 listed, the authorization and token endpoints and `jwks_uri` published.
   */
  readonly issuer: string
  /** The client's ID at the identity provider. */
  readonly clientId: string
  /** The client's secret there (`client_secret_basic`); a public client sends only `client_id`. */
  readonly clientSecret?: string
  /** The user agent that shows the identity provider's pages: `UserAgent.browser()`, `UserAgent.testUser(...)`, ... */
  readonly userAgent: UserAgent.UserAgent["Service"]
  /** The scope asked; `openid` by default (it must include `openid`). */
  readonly scope?: string
  /** A `resource` for identity providers that want one (RFC 8707); none by default. */
  readonly resource?: string
  /** The `fetch` for the identity provider; the global one by default. */
  readonly fetch?: typeof globalThis.fetch
}

/**
 * What {@link signIn} obtained: the ID token (for `idToken` of {@link enterpriseManaged}) and its validated claims.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#IDToken | OpenID Connect Core 1.0 §2}
 */
export interface SignedIn {
  readonly idToken: string
  readonly claims: Readonly<Record<string, unknown>>
}

const failure = (url: string, reason: AuthError.Reason, message: string, step: AuthError.Step = "authorization") =>
  new AuthError.AuthError({ step, reason, url, message })

/** The sign-in's error for an answer core's `AuthorizationResponse.process` refused. */
const refused = (url: string, issuer: string, problem: AuthorizationResponse.AuthorizationResponseProblem) => {
  switch (problem.reason) {
    case "state-missing":
    case "state-mismatch":
      return failure(url, "state-mismatch", "the identity provider's answer does not carry the request's state")
    case "iss-mismatch":
      return failure(url, "iss-mismatch", `the answer comes from ${problem.iss}, not ${issuer} (RFC 9207)`)
    case "iss-missing":
      return failure(url, "iss-missing", problem.message)
    case "error-response":
      return failure(
        url,
        "authorization-error",
        `the identity provider refused the sign-in: ${problem.error} ${problem.description ?? ""}`.trim(),
      )
    case "code-missing":
      return failure(url, "authorization-error", "the identity provider refused the sign-in: no code")
    case "repeated-parameter":
      return failure(url, "invalid-input", problem.message)
  }
}

/**
 * Signs the user in with the enterprise identity provider (OpenID Connect authorization code flow with PKCE, `state`
 * and `nonce`, through one of the client's user agents) and returns the validated ID token: signature by the
 * provider's keys, `iss`, `aud` = the client, `exp`, `nonce`. The provider's metadata passes core's checks before the
 * user is sent anywhere, and its answer is checked by core's `AuthorizationResponse.process` (`state`, RFC 9207
 * `iss`, error, code). A refusal is an `AuthError`: a metadata document's with the reason core gave (`issuer-mismatch`,
 * `pkce-unsupported`, `missing-endpoint`, `invalid-document`), `not-found` when no location has one.
 *
 * @example
 * ```ts
 * const { idToken } = await signIn({ issuer: "https://idp.example.com", clientId: "chat", userAgent: UserAgent.browser() })
 * ```
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#CodeFlowAuth | OpenID Connect Core 1.0 §3.1}
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization §3}
 */
export const signIn = (options: SignInOptions): Promise<SignedIn> => {
  const fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const scope = options.scope ?? "openid"
  return Effect.runPromise(
    Effect.gen(function* () {
      const metadata = yield* identityProviderMetadata(
        fetch,
        options.issuer,
        WellKnown.authorizationServerMetadataUrls(options.issuer).map((location) => location.url),
        "authorization",
        { endpoints: ["authorization_endpoint", "token_endpoint", "jwks_uri"] },
      )
      const authorize = metadata.authorization_endpoint as string
      const token = metadata.token_endpoint as string
      const jwks = metadata.jwks_uri as string
      const session = yield* options.userAgent.open
      return yield* Effect.gen(function* () {
        const pkce = yield* Effect.promise(() => Pkce.generate())
        const state = Pkce.generateVerifier(43)
        const nonce = Pkce.generateVerifier(43)
        const url = new URL(authorize)
        const params: Record<string, string> = {
          response_type: "code",
          client_id: options.clientId,
          redirect_uri: session.redirectUri,
          scope,
          state,
          nonce,
          code_challenge: pkce.challenge,
          code_challenge_method: "S256",
          ...(options.resource === undefined ? {} : { resource: options.resource }),
        }
        for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value)
        const callback = new URL(yield* session.run(url.href))
        const answered = AuthorizationResponse.process(callback, {
          state,
          issuer: options.issuer,
          issParameterSupported: metadata.authorization_response_iss_parameter_supported === true,
        })
        if (Result.isFailure(answered)) return yield* refused(callback.origin, options.issuer, answered.failure)
        const { code } = answered.success
        const headers = new Headers({ "content-type": "application/x-www-form-urlencoded", accept: "application/json" })
        const body = new URLSearchParams({
          grant_type: "authorization_code",
          code,
          redirect_uri: session.redirectUri,
          code_verifier: pkce.verifier,
        })
        const auth =
          options.clientSecret === undefined
            ? ClientAuth.apply("none", { clientId: options.clientId })
            : ClientAuth.apply("client_secret_basic", {
                clientId: options.clientId,
                clientSecret: options.clientSecret,
              })
        ClientAuth.addTo(auth, headers, body)
        const answer = yield* Effect.tryPromise({
          try: async (signal) => {
            const response = await fetch(token, {
              method: "POST",
              redirect: "manual",
              signal,
              headers,
              body: body.toString(),
            })
            return { status: response.status, json: (await response.json().catch(() => undefined)) as unknown }
          },
          catch: (e) =>
            failure(token, "network-error", `${token} could not be reached: ${(e as Error).message}`, "token"),
        })
        // Only the ID token is used: any token type, no schema beyond the tokens.
        const processed = TokenResponse.process(token, answer.status, answer.json, {
          tokenType: () => true,
          schema: false,
        })
        if (Result.isFailure(processed)) {
          return yield* AuthError.fromTokenResponseProblem(
            "token",
            processed.failure,
            `the identity provider's sign-in: ${processed.failure.message}`,
          )
        }
        const idToken = processed.success.id_token
        if (typeof idToken !== "string") {
          return yield* failure(
            token,
            "invalid-document",
            `the identity provider's token response from ${token} has no id_token (OpenID Connect Core §3.1.3.3)`,
            "token",
          )
        }
        const now = yield* Clock.currentTimeMillis
        const verified = yield* Effect.tryPromise({
          try: () =>
            jwtVerify(idToken, createRemoteJWKSet(new URL(jwks), { [customFetch]: fetch }), {
              issuer: options.issuer,
              audience: options.clientId,
              requiredClaims: ["sub", "exp", "iat"],
              currentDate: new Date(now),
            }),
          catch: (e) =>
            failure(token, "invalid-document", `the ID token does not validate: ${(e as Error).message}`, "token"),
        })
        if (verified.payload.nonce !== nonce) {
          return yield* failure(token, "invalid-document", "the ID token's nonce is not the request's", "token")
        }
        return { idToken, claims: verified.payload as Record<string, unknown> }
      }).pipe(Effect.ensuring(session.close))
    }),
  )
}
