/**
 * The authorization request (PKCE S256, `state`, `resource`, scope selection) and the validation of the
 * authorization response at the redirect URI (`state`, RFC 9207 `iss`, errors, code).
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 * @module
 */
import { AuthorizationResponse, Bytes, Pkce, Scope, type Wire } from "@keyway/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { AuthError } from "./AuthError.js"
import type { ClientInformation } from "./ClientConfig.js"
import type { DiscoveredAuthorizationServer, DiscoveredResource } from "./Discovery.js"
import type { Pending } from "./TokenStore.js"

/**
 * Inputs of scope selection.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-selection-strategy | MCP scope selection}
 */
export interface ScopeInputs {
  /** Scopes the caller insists on (configuration, or the union computed for step-up). */
  readonly explicit?: string | undefined
  /** The `scope` of the challenge that triggered authorization. */
  readonly challenge?: string | undefined
  readonly resourceMetadata?: Wire.ProtectedResourceMetadata | undefined
  readonly serverMetadata: Wire.AuthorizationServerMetadata
  /** Whether the client wants a refresh token. */
  readonly offlineAccess: boolean
}

/**
 * The scopes to request: explicit ones, else the challenge's, else all of `scopes_supported`, else none; plus
 * `offline_access` when refresh is wanted, the authorization server lists it, and some scope is requested at all
 * (adding it alone would change the meaning of an omitted scope).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-selection-strategy | MCP scope selection}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization#refresh-tokens | MCP 2026-07-28 refresh tokens}
 */
export const selectScope = (inputs: ScopeInputs): ReadonlyArray<string> => {
  const base =
    inputs.explicit !== undefined && inputs.explicit.trim() !== ""
      ? Scope.parse(inputs.explicit)
      : inputs.challenge !== undefined && inputs.challenge.trim() !== ""
        ? Scope.parse(inputs.challenge)
        : (inputs.resourceMetadata?.scopes_supported ?? [])
  if (base.length === 0) return []
  const offered = inputs.serverMetadata.scopes_supported ?? []
  if (inputs.offlineAccess && offered.includes("offline_access")) return Scope.union(base, ["offline_access"])
  return Scope.dedupe(base)
}

/**
 * The `prompt` to send with an authorization request: `consent` when `offline_access` is requested from an OpenID
 * provider, undefined otherwise. OpenID Connect Core §11 has a provider ignore `offline_access` unless `prompt`
 * contains `consent` (oidc-provider does so by default), and then no refresh token is issued. When the server
 * publishes `prompt_values_supported`, that list decides. Otherwise a server is an OpenID provider when its metadata
 * was found at the OpenID Connect Discovery location, or carries the members that OpenID Connect Discovery §3
 * requires of every OpenID provider (`subject_types_supported` and `id_token_signing_alg_values_supported`; many
 * providers serve the same document at the RFC 8414 location, which the client tries first). Plain OAuth servers get
 * no `prompt`: OAuth 2.1 defines none.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#OfflineAccess | OpenID Connect Core §11}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderMetadata | OpenID Connect Discovery §3}
 * @see {@link https://openid.net/specs/openid-connect-prompt-create-1_0.html#section-4.1 | OpenID Connect prompt=create §4.1 (prompt_values_supported)}
 */
export const promptFor = (
  scope: ReadonlyArray<string>,
  server: DiscoveredAuthorizationServer,
): "consent" | undefined => {
  if (!scope.includes("offline_access")) return undefined
  const metadata = server.metadata as Record<string, unknown>
  const advertised = metadata.prompt_values_supported
  if (Array.isArray(advertised)) return advertised.includes("consent") ? "consent" : undefined
  const at = server.metadataUrl === undefined ? undefined : URL.parse(server.metadataUrl)
  if (at?.pathname.includes("/.well-known/openid-configuration") === true) return "consent"
  const openIdMembers =
    Array.isArray(metadata.subject_types_supported) && Array.isArray(metadata.id_token_signing_alg_values_supported)
  return openIdMembers ? "consent" : undefined
}

/**
 * An authorization request ready to open in a user agent, with the state to keep until the callback.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 */
export interface AuthorizationRequest {
  readonly url: string
  readonly pending: Pending
}

/**
 * Builds the authorization URL: `response_type=code`, `client_id`, `redirect_uri`, PKCE S256, a fresh `state`,
 * `resource` exactly as the protected resource metadata publishes it, `scope` when any, and `prompt=consent` when
 * {@link promptFor} says so. Existing query
 * parameters of the authorization endpoint are kept. The expected issuer is recorded with the verifier and state.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2 | RFC 8707 §2}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization#authorization-response-validation | MCP 2026-07-28 authorization response validation}
 */
export const buildRequest = Effect.fn("Authorization.buildRequest")(function* (input: {
  readonly resource: DiscoveredResource
  readonly server: DiscoveredAuthorizationServer
  readonly client: ClientInformation
  readonly redirectUri: string
  readonly scope: ReadonlyArray<string>
  /** Further parameters (from extensions); they never replace the ones set here. */
  readonly parameters?: Readonly<Record<string, string>>
  /** A PKCE pair made beforehand (`Pkce.generate()`); a new one is made when absent. */
  readonly pkce?: Pkce.Pair
}) {
  const endpoint = input.server.metadata.authorization_endpoint as string
  const url = URL.parse(endpoint)
  if (url === null || (url.protocol !== "https:" && url.protocol !== "http:")) {
    return yield* new AuthError({
      step: "authorization",
      reason: "invalid-input",
      url: endpoint,
      message: `the authorization_endpoint "${endpoint}" of ${input.server.issuer} is not an http(s) URL`,
    })
  }
  const pkce = input.pkce ?? (yield* Effect.promise(() => Pkce.generate()))
  const state = Bytes.randomBase64Url(32)
  const params = url.searchParams
  params.set("response_type", "code")
  params.set("client_id", input.client.client_id)
  params.set("redirect_uri", input.redirectUri)
  params.set("code_challenge", pkce.challenge)
  params.set("code_challenge_method", pkce.method)
  params.set("state", state)
  params.set("resource", input.resource.resource)
  const scope = Scope.format(input.scope)
  if (scope !== "") params.set("scope", scope)
  const prompt = promptFor(input.scope, input.server)
  if (prompt !== undefined) params.set("prompt", prompt)
  for (const [name, value] of Object.entries(input.parameters ?? {})) if (!params.has(name)) params.set(name, value)
  const pending: Pending = {
    state,
    code_verifier: pkce.verifier,
    issuer: input.server.issuer,
    iss_parameter_supported: input.server.metadata.authorization_response_iss_parameter_supported === true,
    redirect_uri: input.redirectUri,
    resource: input.resource.resource,
    scope,
    client_id: input.client.client_id,
    server: input.resource.serverUrl,
    ...(input.resource.legacy ? { legacy: true } : {}),
    created_at: yield* Clock.currentTimeMillis,
  }
  return { url: url.href, pending } as AuthorizationRequest
})

/**
 * The client's error for a response core's {@link AuthorizationResponse.process} refused: an error response belongs to
 * the authorization step (with its OAuth code), the rest to the callback; an `iss` other than the issuer is
 * `iss-mismatch` from a server that advertises `iss` and `iss-unexpected` from one that does not; a repeated parameter
 * is `invalid-input`.
 */
const fromProblem = (
  problem: AuthorizationResponse.AuthorizationResponseProblem,
  where: string,
  pending: Pending,
): AuthError => {
  const reason: AuthError["reason"] =
    problem.reason === "error-response"
      ? "authorization-error"
      : problem.reason === "repeated-parameter"
        ? "invalid-input"
        : problem.reason === "iss-mismatch" && !pending.iss_parameter_supported
          ? "iss-unexpected"
          : problem.reason
  return new AuthError({
    step: problem.reason === "error-response" ? "authorization" : "callback",
    reason,
    url: where,
    message: problem.message,
    ...(problem.error === undefined ? {} : { error: problem.error }),
  })
}

/**
 * Validates the authorization response delivered to the redirect URI and returns the code, with core's
 * {@link AuthorizationResponse.process}. In order: `state` must be present and equal (else the response is
 * discarded); `iss` is checked against the recorded issuer by simple string comparison (required when the server
 * advertises `authorization_response_iss_parameter_supported`, compared whenever present); only then are `error`
 * responses surfaced; finally the `code` must be present. No parameter may appear twice.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization#authorization-response-validation | MCP 2026-07-28 authorization response validation}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.2 | OAuth 2.1 §4.1.2}
 */
export const validateCallback = Effect.fn("Authorization.validateCallback")(function* (
  callbackUrl: string,
  pending: Pending,
) {
  const url = URL.parse(callbackUrl)
  if (url === null) {
    return yield* new AuthError({
      step: "callback",
      reason: "invalid-input",
      url: callbackUrl,
      message: `the callback URL "${callbackUrl}" is not an absolute URL`,
    })
  }
  const processed = AuthorizationResponse.process(url, {
    state: pending.state,
    issuer: pending.issuer,
    issParameterSupported: pending.iss_parameter_supported,
  })
  if (Result.isFailure(processed)) return yield* fromProblem(processed.failure, `${url.origin}${url.pathname}`, pending)
  return processed.success.code
})
