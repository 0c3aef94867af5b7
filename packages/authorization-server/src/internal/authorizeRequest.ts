import { CanonicalUri, Pkce, Scope, SecureUrl } from "@keyway/core"
import { Result } from "effect"
import type { ResolvedConfig, Resource } from "../Config.js"

/** The client facts the authorization endpoint needs. */
export interface ClientView {
  readonly clientId: string
  readonly clientName: string | undefined
  readonly redirectUris: ReadonlyArray<string>
  readonly grantTypes: ReadonlyArray<string>
  /** A public client (`token_endpoint_auth_method` `none`): nothing proves which program is asking. */
  readonly publicClient: boolean
  /** Space-separated scopes the client may request; any when undefined. */
  readonly scope: string | undefined
  /** For a client ID metadata document client: its host and whether the trust policy vouches for it. */
  readonly metadataDocument?: { readonly host: string; readonly verified: boolean }
}

/** A request that passed every check. */
export interface ValidAuthorizationRequest {
  readonly client: ClientView
  readonly redirectUri: string
  /** Whether `redirect_uri` was in the request (then the token request must repeat it). */
  readonly redirectUriGiven: boolean
  readonly codeChallenge: string
  readonly resource: Resource
  readonly scopes: ReadonlyArray<string>
  readonly state: string | undefined
  /** The OpenID Connect `nonce`, repeated in the ID token. */
  readonly nonce: string | undefined
  /** What the code's redemption must prove, from an extension's parameter (DPoP's `dpop_jkt`). */
  readonly confirmation: string | undefined
}

/** Error shown on a page: the redirect URI is not (yet) trusted. */
export interface PageError {
  readonly _tag: "PageError"
  readonly error: "invalid_request" | "invalid_client" | "temporarily_unavailable"
  readonly description: string
  /** Set for `temporarily_unavailable`: answered 429 with this `Retry-After`. */
  readonly retryAfter?: number
}

/** Error sent back to the (trusted) redirect URI. */
export interface RedirectError {
  readonly _tag: "RedirectError"
  readonly redirectUri: string
  readonly state: string | undefined
  readonly error:
    | "invalid_request"
    | "unsupported_response_type"
    | "unauthorized_client"
    | "invalid_scope"
    | "invalid_target"
  readonly description: string
}

const CHALLENGE = /^[A-Za-z0-9_-]{43}$/
const SINGLE = [
  "client_id",
  "redirect_uri",
  "response_type",
  "code_challenge",
  "code_challenge_method",
  "scope",
  "state",
  "nonce",
]

/**
 * Validates an authorization request (OAuth 2.1 §4.1.1, RFC 7636 §4.3, RFC 8707 §2). The client and redirect URI are
 * checked first; until both are trusted, errors are `PageError`s (OAuth 2.1 §4.1.2.1: never redirect).
 */
export const validate = (
  params: URLSearchParams,
  config: ResolvedConfig,
  client: ClientView | undefined,
): Result.Result<ValidAuthorizationRequest, PageError | RedirectError> => {
  const page = (error: PageError["error"], description: string) =>
    Result.fail<PageError>({ _tag: "PageError", error, description })
  const clientIds = params.getAll("client_id")
  if (clientIds.length === 0 || clientIds[0] === "") return page("invalid_request", "client_id is missing")
  if (clientIds.length > 1) return page("invalid_request", "client_id is repeated")
  if (client === undefined) return page("invalid_client", "the client_id is not known to this server")

  const redirectUris = params.getAll("redirect_uri")
  if (redirectUris.length > 1) return page("invalid_request", "redirect_uri is repeated")
  let redirectUri: string
  const given = redirectUris[0]
  if (given === undefined) {
    // OAuth 2.1 §4.1.1: optional only when exactly one is registered, and never for a loopback URI whose port varies.
    const only = client.redirectUris[0]
    if (client.redirectUris.length !== 1 || only === undefined) {
      return page("invalid_request", "redirect_uri is missing and the client has several registered")
    }
    redirectUri = only
  } else {
    if (SecureUrl.matchRedirectUri(given, client.redirectUris) === undefined) {
      return page("invalid_request", "redirect_uri does not match any URI registered for this client")
    }
    redirectUri = given
  }

  const state = params.get("state") ?? undefined
  const fail = (error: RedirectError["error"], description: string) =>
    Result.fail<RedirectError>({ _tag: "RedirectError", redirectUri, state, error, description })

  for (const name of SINGLE) {
    if (params.getAll(name).length > 1) return fail("invalid_request", `${name} is repeated`)
  }
  const responseType = params.get("response_type")
  if (responseType === null || responseType === "") return fail("invalid_request", "response_type is missing")
  if (responseType !== "code") return fail("unsupported_response_type", "only response_type=code is supported")
  if (!client.grantTypes.includes("authorization_code")) {
    return fail("unauthorized_client", "this client may not use the authorization code grant")
  }

  const method = params.get("code_challenge_method")
  const challenge = params.get("code_challenge")
  if (challenge === null || challenge === "") return fail("invalid_request", "code_challenge is required (PKCE)")
  if (method === null) return fail("invalid_request", "code_challenge_method is required and must be S256")
  if (method !== Pkce.METHOD)
    return fail("invalid_request", `code_challenge_method ${method} is not supported; use S256`)
  if (!CHALLENGE.test(challenge)) return fail("invalid_request", "code_challenge is not a base64url SHA-256 digest")

  const resource = requestedResource(config, params.getAll("resource"))
  if (Result.isFailure(resource)) return fail(resource.failure.error, resource.failure.description)
  const scopes = requestedScopes(config, resource.success, client.scope, params.get("scope"))
  if (Result.isFailure(scopes)) return fail(scopes.failure.error, scopes.failure.description)

  let confirmation: string | undefined
  for (const extension of config.extensions) {
    if (extension.authorizationRequest === undefined) continue
    const read = extension.authorizationRequest(params)
    if (Result.isFailure(read)) return fail("invalid_request", read.failure)
    confirmation ??= read.success
  }

  return Result.succeed({
    client,
    redirectUri,
    redirectUriGiven: given !== undefined,
    codeChallenge: challenge,
    resource: resource.success,
    scopes: scopes.success,
    state,
    nonce: params.get("nonce") ?? undefined,
    confirmation,
  })
}

/** The redirect carrying an authorization response: keeps the registered query, adds ours, always with `iss`. */
export const redirectWith = (redirectUri: string, params: Record<string, string | undefined>): string => {
  const url = new URL(redirectUri)
  for (const [key, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(key, value)
  return url.href
}

/** Why a request's `resource` or `scope` cannot be granted: the OAuth error and its description. */
export interface RequestProblem {
  readonly error: "invalid_target" | "invalid_scope"
  readonly description: string
}

/**
 * The configured resource the request's `resource` values name (RFC 8707 §2: one, absolute, served here), or the
 * default resource when there is none.
 */
export const requestedResource = (
  config: ResolvedConfig,
  values: ReadonlyArray<string>,
): Result.Result<Resource, RequestProblem> => {
  const fail = (description: string) => Result.fail<RequestProblem>({ error: "invalid_target", description })
  let resource: Resource | undefined
  if (values.length === 0) {
    if (config.defaultResource === undefined) return fail("resource is required")
    resource = config.resources.get(config.defaultResource)
  } else if (values.length > 1) {
    return fail("exactly one resource is allowed per request")
  } else {
    const canonical = CanonicalUri.validate(values[0] ?? "")
    if (Result.isFailure(canonical)) return fail("resource is not a valid absolute URI")
    resource = config.resources.get(canonical.success)
    if (resource === undefined) return fail("this server does not issue tokens for that resource")
  }
  return resource === undefined ? fail("resource is required") : Result.succeed(resource)
}

/**
 * The scopes a request for `resource` asks (`scope` as sent, `null` when absent), checked against the resource's
 * scopes and the scope an operator registered the client with (`clientScope`, any when undefined).
 */
export const requestedScopes = (
  config: ResolvedConfig,
  resource: Resource,
  clientScope: string | undefined,
  scope: string | null,
): Result.Result<ReadonlyArray<string>, RequestProblem> => {
  const fail = (description: string) => Result.fail<RequestProblem>({ error: "invalid_scope", description })
  const parsedScope = Scope.validate(scope ?? "")
  if (Result.isFailure(parsedScope)) return fail("scope is malformed")
  const allowed = clientScope === undefined ? undefined : new Set(Scope.parse(clientScope))
  let scopes = Scope.dedupe(parsedScope.success)
  if (scope === null) {
    // RFC 6749 §3.3: without a scope, the default is every scope of the resource this client may have.
    scopes = [...resource.scopes.keys()].filter((s) => allowed === undefined || allowed.has(s))
  }
  for (const name of scopes) {
    // OpenID Connect's `openid` asks for an ID token, not for access to the resource.
    if (name === "openid" && config.openid) continue
    if (!resource.scopes.has(name)) return fail(`scope ${name} is not defined for this resource`)
    if (allowed !== undefined && !allowed.has(name)) return fail(`this client may not request ${name}`)
  }
  return Result.succeed(scopes)
}
