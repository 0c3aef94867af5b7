import type { ClientConfig, Extension } from "@keyway/client"
import { AuthError } from "@keyway/client"
import { ClientAuth, Grant, Options, SecureUrl, TokenExchange, TokenResponse, WellKnown } from "@keyway/core"
import { Clock, Effect, Result } from "effect"
import { decodeJwt } from "jose"
import { identityProviderMetadata } from "./discovery.js"

/**
 * The enterprise identity provider the client exchanges ID tokens at.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization §4}
 */
export interface IdentityProviderOptions {
  /** Its issuer identifier; its token endpoint is read from its metadata when `tokenEndpoint` is not given. */
  readonly issuer?: string
  /** Its token endpoint, instead of discovery. */
  readonly tokenEndpoint?: string
  /** The client's ID at the identity provider. */
  readonly clientId: string
  /** The client's secret there; without one the client is public there and sends only `client_id`. */
  readonly clientSecret?: string
  /** How the secret is sent; `client_secret_basic` by default. */
  readonly method?: "client_secret_basic" | "client_secret_post"
}

/**
 * The client's registration at the MCP authorization servers it presents identity assertions to.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization §5}
 */
export interface AuthorizationServerClient {
  /**
   * The authorization server this registration belongs to: its issuer, or a function deciding for an issuer discovery
   * found. Credentials are never sent to another server.
   */
  readonly issuer: string | ((issuer: string) => boolean)
  readonly clientId: string
  readonly clientSecret?: string
  /** A key for `private_key_jwt`, instead of a secret. */
  readonly privateKey?: ClientConfig.PrivateKeyJwt
  /** How a secret is sent; `client_secret_basic` by default. */
  readonly method?: "client_secret_basic" | "client_secret_post"
}

/**
 * Options of {@link enterpriseManaged}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 */
export interface EnterpriseManagedOptions {
  readonly identityProvider: IdentityProviderOptions
  /**
   * The user's ID token from the identity provider (from its single sign-on with the identity provider); asked for each
   * token exchange, so it may sign the user in again when the one held has expired.
   */
  readonly idToken: () => string | Promise<string>
  /** The client at the MCP authorization servers: one registration, or several. */
  readonly clients: AuthorizationServerClient | ReadonlyArray<AuthorizationServerClient>
  /**
   * Seconds before an identity assertion's expiry from which it is no longer presented; 30 by default.
   */
  readonly assertionSkewSeconds?: number
  /** Called after each exchange with the assertion's claims (never the assertion itself), for transcripts. */
  readonly onAssertion?: (claims: Readonly<Record<string, unknown>>) => void
}

const fail = (
  url: string,
  reason: AuthError.Reason,
  message: string,
  extra: { error?: string; status?: number } = {},
) => Effect.fail(new AuthError.AuthError({ step: "token", reason, url, message, ...extra }))

interface Held {
  readonly assertion: string
  /** Milliseconds since the epoch. */
  readonly expiresAt: number
}

/**
 * The enterprise-managed authorization extension for `@keyway/client`: tokens for an MCP server are obtained without
 * a consent page, by exchanging the user's ID token at the enterprise identity provider for an identity assertion
 * (RFC 8693, `audience` = the MCP authorization server's validated issuer, `resource` = the MCP server's resource
 * identifier) and presenting it with the JWT bearer grant (RFC 7523) as the client registered there. Assertions are
 * held per authorization server, resource and scope until they expire or are presented; access tokens are obtained
 * again before they expire. `authorization_grant_profiles_supported` is not required; no dynamic registration is done.
 *
 * @example
 * ```ts
 * const auth = createAuthClient({
 *   extensions: [enterpriseManaged({
 *     identityProvider: { issuer: "https://idp.example.com", clientId: "chat", clientSecret: idpSecret },
 *     idToken: () => session.idToken,
 *     clients: { issuer: "https://auth.example.com", clientId: "chat", clientSecret },
 *   })],
 * })
 * ```
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.3 | Identity Assertion Authorization Grant §4.3, §4.4}
 */
export const enterpriseManaged = (options: EnterpriseManagedOptions): Extension.ClientExtension => {
  const idp = options.identityProvider
  if (idp.issuer === undefined && idp.tokenEndpoint === undefined) {
    throw Options.invalid("enterpriseManaged", "identityProvider", "needs issuer or tokenEndpoint")
  }
  const registrations = Array.isArray(options.clients)
    ? (options.clients as ReadonlyArray<AuthorizationServerClient>)
    : [options.clients as AuthorizationServerClient]
  registrations.forEach((r, i) => {
    if (r.clientSecret === undefined && r.privateKey === undefined) {
      const option = Array.isArray(options.clients) ? `clients.${i}` : "clients"
      throw Options.invalid("enterpriseManaged", option, `the client ${r.clientId} needs clientSecret or privateKey`)
    }
  })
  const skewMs = (options.assertionSkewSeconds ?? 30) * 1000
  const held = new Map<string, Held>()
  let discovered: string | undefined = idp.tokenEndpoint
  const metadataUrls =
    idp.issuer === undefined ? [] : WellKnown.authorizationServerMetadataUrls(idp.issuer).map((l) => l.url)

  /** The identity provider's token endpoint: configured, or from its metadata (RFC 8414 §3 order), its issuer checked. */
  const tokenEndpoint = (fetch: ClientConfig.FetchLike) =>
    Effect.gen(function* () {
      if (discovered !== undefined) return discovered
      // No PKCE: the identity provider is used for token exchange only.
      const metadata = yield* identityProviderMetadata(fetch, idp.issuer as string, metadataUrls, "token", {
        pkce: false,
        endpoints: ["token_endpoint"],
      })
      discovered = metadata.token_endpoint as string
      return discovered
    })

  /** Token exchange at the identity provider: the ID token for an identity assertion. */
  const exchange = (context: Extension.AcquireContext, endpoint: string) =>
    Effect.gen(function* () {
      if (!SecureUrl.isAllowed(endpoint, { httpLoopback: true })) {
        return yield* fail(
          endpoint,
          "insecure-endpoint",
          `refusing to send the ID token to ${endpoint}: the identity provider's token endpoint must use https`,
        )
      }
      const idToken = yield* Effect.tryPromise({
        try: async () => options.idToken(),
        catch: (e) =>
          new AuthError.AuthError({
            step: "token",
            reason: "invalid-input",
            url: endpoint,
            message: `no ID token: ${(e as Error).message}`,
          }),
      })
      const body = new URLSearchParams(
        TokenExchange.request({
          requestedTokenType: Grant.ID_JAG_TOKEN_TYPE,
          subjectToken: idToken,
          subjectTokenType: Grant.ID_TOKEN_TYPE,
          audience: context.server.issuer,
          resource: context.resource,
          scope: context.scope,
        }),
      )
      const headers = new Headers({ "content-type": "application/x-www-form-urlencoded", accept: "application/json" })
      const auth =
        idp.clientSecret === undefined
          ? ClientAuth.apply("none", { clientId: idp.clientId })
          : ClientAuth.apply(idp.method ?? "client_secret_basic", {
              clientId: idp.clientId,
              clientSecret: idp.clientSecret,
            })
      ClientAuth.addTo(auth, headers, body)
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          context.fetch(endpoint, { method: "POST", redirect: "manual", signal, headers, body: body.toString() }),
        catch: (e) =>
          new AuthError.AuthError({
            step: "token",
            reason: "network-error",
            url: endpoint,
            message: `the identity provider's token endpoint ${endpoint} could not be reached: ${(e as Error).message}`,
          }),
      })
      const json = yield* Effect.promise(() => response.json().catch(() => undefined))
      // RFC 8693 §2.2.1: an ID-JAG, of the token type N_A (it is not an access token).
      const processed = TokenResponse.process(endpoint, response.status, json, {
        tokenType: () => true,
        issuedTokenType: Grant.ID_JAG_TOKEN_TYPE,
      })
      if (Result.isFailure(processed)) {
        const problem = processed.failure
        return yield* AuthError.fromTokenResponseProblem(
          "token",
          problem,
          `the identity provider's token exchange: ${problem.message}`,
        )
      }
      const exchanged = processed.success
      let claims: Record<string, unknown>
      try {
        claims = decodeJwt(exchanged.access_token) as Record<string, unknown>
      } catch {
        return yield* fail(endpoint, "invalid-document", `the identity assertion from ${endpoint} is not a JWT`)
      }
      options.onAssertion?.(claims)
      const now = yield* Clock.currentTimeMillis
      const expiresAt =
        typeof claims.exp === "number"
          ? claims.exp * 1000
          : exchanged.expires_in !== undefined
            ? now + exchanged.expires_in * 1000
            : now
      return { assertion: exchanged.access_token, expiresAt } satisfies Held
    })

  return {
    id: Grant.extensions.enterpriseManaged,
    strategy: {
      unattended: true,
      stepUp: true,
      acquire: (context) =>
        Effect.gen(function* () {
          const { server } = context
          const registration = registrations.find((r) =>
            typeof r.issuer === "string" ? r.issuer === server.issuer : r.issuer(server.issuer),
          )
          if (registration === undefined) {
            return yield* fail(
              server.issuer,
              "no-client",
              `${context.serverUrl} uses the authorization server ${server.issuer}, where this client has no registration for enterprise-managed authorization`,
            )
          }
          // How to authenticate there, before an identity assertion is obtained for it.
          const listed = server.metadata.token_endpoint_auth_methods_supported
          const method = ClientAuth.chooseMethod(listed, {
            secret: registration.clientSecret !== undefined,
            privateKey: registration.privateKey !== undefined,
            method: registration.method,
          })
          if (method === undefined) {
            return yield* fail(
              server.metadata.token_endpoint ?? server.issuer,
              "invalid-input",
              `${server.issuer} accepts ${(listed ?? ["client_secret_basic"]).join(", ")} at its token endpoint, but the client ${registration.clientId} has ${registration.privateKey === undefined ? "a secret" : registration.clientSecret === undefined ? "a private key" : "a private key and a secret"}${registration.method === undefined ? "" : ` and asks for ${registration.method}`}`,
            )
          }
          const key = `${server.issuer} ${context.resource} ${context.scope ?? ""}`
          const now = yield* Clock.currentTimeMillis
          let current = held.get(key)
          if (current === undefined || current.expiresAt - skewMs <= now) {
            held.delete(key)
            current = yield* exchange(context, yield* tokenEndpoint(context.fetch))
            if (current.expiresAt - skewMs > now) held.set(key, current)
          }
          const body = new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion: current.assertion })
          if (context.scope !== undefined) body.set("scope", context.scope)
          const response = yield* context
            .tokenRequest(body, {
              client: {
                issuer: server.issuer,
                client_id: registration.clientId,
                token_endpoint_auth_method: method,
                ...(registration.clientSecret === undefined ? {} : { client_secret: registration.clientSecret }),
              },
              ...(registration.privateKey === undefined ? {} : { privateKey: registration.privateKey }),
            })
            .pipe(
              // A presented assertion is spent (its jti is single use); one refused as a grant is no good either.
              // Kept only when the request failed before the server judged it.
              Effect.tapError((e) =>
                e.reason === "network-error" ? Effect.void : Effect.sync(() => held.delete(key)),
              ),
              Effect.tap(() => Effect.sync(() => held.delete(key))),
            )
          return {
            response,
            clientId: registration.clientId,
            ...(context.scope === undefined ? {} : { requestedScope: context.scope }),
          }
        }),
    },
  }
}
