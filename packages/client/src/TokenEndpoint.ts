/**
 * Token endpoint requests: the authorization code grant and the refresh token grant, with client authentication by
 * the registered method, `resource` in every request, and strict validation of the token response.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-3.2 | OAuth 2.1 §3.2}
 * @module
 */
import { ClientAuth, TokenResponse, type Wire } from "@keyway/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { AuthError, fromTokenResponseProblem, type Step } from "./AuthError.js"
import { ClientConfig, type ClientInformation } from "./ClientConfig.js"
import type { DiscoveredAuthorizationServer } from "./Discovery.js"
import type { OutgoingRequest, TokenRequestOptions } from "./Extension.js"
import { discard, isRecord, readJson, requireSecure, send } from "./internal/http.js"
import type { Pending, Tokens } from "./TokenStore.js"

/**
 * Adds client authentication to a token request by the client's registered method.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-2.4.1 | OAuth 2.1 §2.4.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2 (private_key_jwt)}
 */
export const authenticate = Effect.fnUntraced(function* (
  step: Step,
  client: ClientInformation,
  server: DiscoveredAuthorizationServer,
  body: URLSearchParams,
  headers: Headers,
  options: Pick<TokenRequestOptions, "privateKey" | "assertionAudience"> = {},
) {
  const config = yield* ClientConfig
  const method =
    client.token_endpoint_auth_method ?? (client.client_secret !== undefined ? "client_secret_basic" : "none")
  const url = server.metadata.token_endpoint as string
  switch (method) {
    case "none":
      return ClientAuth.addTo(ClientAuth.apply("none", { clientId: client.client_id }), headers, body)
    case "client_secret_basic":
    case "client_secret_post": {
      const secret = client.client_secret
      if (secret === undefined) {
        return yield* new AuthError({
          step,
          reason: "invalid-input",
          url,
          message: `client ${client.client_id} uses ${method} but has no client_secret; provide it in the client information`,
        })
      }
      return ClientAuth.addTo(
        ClientAuth.apply(method, { clientId: client.client_id, clientSecret: secret }),
        headers,
        body,
      )
    }
    case "private_key_jwt": {
      const key = options.privateKey ?? config.privateKeyJwt
      if (key === undefined) {
        return yield* new AuthError({
          step,
          reason: "invalid-input",
          url,
          message: `client ${client.client_id} uses private_key_jwt but no privateKeyJwt key is configured`,
        })
      }
      // jose would read the system time itself; the assertion's lifetime follows the Effect clock instead.
      const issuedAt = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const assertion = yield* Effect.promise(async () => {
        // Loaded here, on the one path that signs: a client that never uses private_key_jwt does not load jose.
        const { SignJWT } = await import("jose/jwt/sign")
        return new SignJWT(
          ClientAuth.clientAssertionClaims(
            client.client_id,
            options.assertionAudience === "token_endpoint" ? url : server.issuer,
            issuedAt,
            crypto.randomUUID(),
          ),
        )
          .setProtectedHeader({ alg: key.alg, ...(key.kid !== undefined ? { kid: key.kid } : {}) })
          .sign(key.key)
      })
      return ClientAuth.addTo(
        ClientAuth.apply("private_key_jwt", { clientId: client.client_id, clientAssertion: assertion }),
        headers,
        body,
      )
    }
  }
})

/**
 * POSTs a form to the token endpoint (https only), authenticating as `options.client` when given, and returns the
 * validated token response; an error response becomes an {@link AuthError} carrying the OAuth error code.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-3.2 | OAuth 2.1 §3.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5 | RFC 6749 §5}
 */
export const request = Effect.fnUntraced(function* (
  server: DiscoveredAuthorizationServer,
  body: URLSearchParams,
  options: TokenRequestOptions = {},
) {
  const step = options.step ?? "token"
  const config = yield* ClientConfig
  const endpoint = server.metadata.token_endpoint as string
  yield* requireSecure(step, endpoint, "the token endpoint")
  let resent = false
  let response: Response
  let outgoing: OutgoingRequest
  for (;;) {
    const headers = new Headers({
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
    })
    if (options.client !== undefined) yield* authenticate(step, options.client, server, body, headers, options)
    outgoing = {
      kind: "token",
      method: "POST",
      url: endpoint,
      headers,
      issuer: server.issuer,
      metadata: server.metadata,
      ...(options.resourceMetadata === undefined ? {} : { resourceMetadata: options.resourceMetadata }),
    }
    for (const extension of config.extensions) {
      if (extension.decorate !== undefined) yield* extension.decorate(outgoing)
    }
    response = yield* send(config.fetch, step, endpoint, { method: "POST", headers, body: body.toString() })
    // An extension may ask for the request once more (a DPoP nonce the server now requires, RFC 9449 §8).
    let again = false
    for (const extension of config.extensions) {
      if (extension.decorate === undefined || extension.response === undefined) continue
      const copy = response.clone()
      if (yield* extension.response(copy, outgoing)) again = true
      discard(copy)
    }
    if (!again || resent) break
    resent = true
    discard(response)
  }
  const json = yield* readJson(step, endpoint, response)
  // A token type beside Bearer is usable when an extension takes it (DPoP, RFC 9449 §5).
  let accepted = false
  if (response.status === 200 && isRecord(json) && typeof json.token_type === "string") {
    for (const extension of config.extensions) {
      if (extension.tokenType !== undefined && (yield* extension.tokenType(json.token_type, outgoing))) accepted = true
    }
  }
  const processed = TokenResponse.process(endpoint, response.status, json, {
    tokenType: (tokenType) => accepted || tokenType.toLowerCase() === "bearer",
  })
  if (Result.isFailure(processed)) return yield* fromTokenResponseProblem(step, processed.failure)
  return processed.success
})

/**
 * The tokens to store from a token response: the expiry as an instant, the scope (the requested one when the response
 * names none, RFC 6749 §5.1), and what they are bound to (resource, issuer, client, token endpoint).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-3.2.3 | OAuth 2.1 §3.2.3}
 */
export const toTokens = (
  now: number,
  response: Wire.TokenResponse,
  context: {
    readonly requestedScope: string
    readonly resource: string
    readonly issuer: string
    readonly clientId: string | undefined
    readonly tokenEndpoint: string
    readonly previousRefreshToken?: string | undefined
    readonly legacy: boolean
  },
): Tokens => {
  const refresh = response.refresh_token ?? context.previousRefreshToken
  return {
    access_token: response.access_token,
    token_type: response.token_type.toLowerCase() === "bearer" ? "Bearer" : response.token_type,
    ...(refresh !== undefined ? { refresh_token: refresh } : {}),
    ...(typeof response.expires_in === "number" ? { expires_at: now + response.expires_in * 1000 } : {}),
    // An omitted scope means the requested one was granted (RFC 6749 §5.1).
    scope: typeof response.scope === "string" ? response.scope : context.requestedScope,
    resource: context.resource,
    issuer: context.issuer,
    ...(context.clientId !== undefined ? { client_id: context.clientId } : {}),
    token_endpoint: context.tokenEndpoint,
    ...(context.legacy ? { legacy: true } : {}),
    obtained_at: now,
  }
}

/**
 * Exchanges an authorization code: `code`, `code_verifier`, `redirect_uri`, `resource`, and client authentication.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.3 | OAuth 2.1 §4.1.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2.2 | RFC 8707 §2.2}
 */
export const exchangeCode = Effect.fn("TokenEndpoint.exchangeCode")(function* (
  server: DiscoveredAuthorizationServer,
  client: ClientInformation,
  pending: Pending,
  code: string,
) {
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code,
    code_verifier: pending.code_verifier,
    redirect_uri: pending.redirect_uri,
    resource: pending.resource,
  })
  const response = yield* request(server, body, { client, step: "token" })
  return toTokens(yield* Clock.currentTimeMillis, response, {
    requestedScope: pending.scope,
    resource: pending.resource,
    issuer: server.issuer,
    clientId: client.client_id,
    tokenEndpoint: server.metadata.token_endpoint as string,
    legacy: pending.legacy === true,
  })
})

/**
 * Refreshes an access token with the same `resource`; a rotated refresh token replaces the old one, an omitted one
 * keeps it.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3 | OAuth 2.1 §4.3}
 */
export const refresh = Effect.fn("TokenEndpoint.refresh")(function* (
  server: DiscoveredAuthorizationServer,
  client: ClientInformation,
  tokens: Tokens,
) {
  const refreshToken = tokens.refresh_token
  if (refreshToken === undefined) {
    return yield* new AuthError({
      step: "refresh",
      reason: "invalid-grant",
      url: server.metadata.token_endpoint as string,
      message: `no refresh token is held for ${tokens.resource}; a new authorization is needed`,
    })
  }
  const body = new URLSearchParams({
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    resource: tokens.resource,
  })
  const response = yield* request(server, body, { client, step: "refresh" })
  return toTokens(yield* Clock.currentTimeMillis, response, {
    requestedScope: tokens.scope,
    resource: tokens.resource,
    issuer: server.issuer,
    clientId: client.client_id,
    tokenEndpoint: server.metadata.token_endpoint as string,
    previousRefreshToken: refreshToken,
    legacy: tokens.legacy === true,
  })
})
