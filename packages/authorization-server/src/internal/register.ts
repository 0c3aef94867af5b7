import { Jwk, OAuthError, Scope } from "@keyway/core"
import { PayloadTooLarge } from "@keyway/http"
import { Effect, Result } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { StorageError } from "../storage/Errors.js"
import { ClientStore, type NewClient, type TokenEndpointAuthMethod } from "../storage/Storage.js"
import { randomToken } from "./crypto.js"
import { CORS_HEADERS, json, mediaType, oauthError, readBody } from "./http.js"
import { checkRedirectUriForRegistration } from "./redirect.js"
import { BodyTooLargeFailure } from "./token.js"

/**
 * What a registration policy decides.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.2 | RFC 7591 §3.2.2}
 */
export type PolicyDecision =
  | { readonly allow: true }
  | {
      readonly allow: false
      readonly error?: "invalid_client_metadata" | "invalid_redirect_uri" | "unapproved_software_statement"
      readonly description: string
    }

/**
 * Hook run on validated metadata before a client is created.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3 | RFC 7591 §3}
 */
export type RegistrationPolicy = (
  metadata: Readonly<Record<string, unknown>>,
  request: Request,
) => Promise<PolicyDecision>

const METHODS: ReadonlyArray<TokenEndpointAuthMethod> = [
  "none",
  "client_secret_basic",
  "client_secret_post",
  "private_key_jwt",
]
const GRANTS = ["authorization_code", "refresh_token"]

const fail = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

const optionalString = (body: Record<string, unknown>, name: string) => {
  const value = body[name]
  if (value === undefined) return Result.succeed(undefined)
  return typeof value === "string" ? Result.succeed(value) : Result.fail(`${name} must be a string`)
}

const stringArray = (
  body: Record<string, unknown>,
  name: string,
): Result.Result<ReadonlyArray<string> | undefined, string> => {
  const value = body[name]
  if (value === undefined) return Result.succeed(undefined)
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) {
    return Result.fail(`${name} must be an array of strings`)
  }
  return Result.succeed(value as ReadonlyArray<string>)
}

const httpsUrl = (value: string | undefined, name: string): string | undefined => {
  if (value === undefined) return undefined
  try {
    return new URL(value).protocol === "https:" ? undefined : `${name} must be an https URL`
  } catch {
    return `${name} must be an absolute URL`
  }
}

/**
 * Dynamic Client Registration (RFC 7591 §3): validates the metadata, applies the policy, creates the client and
 * returns its secret once (stored only hashed).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3 | RFC 7591 §3}
 */
export const registerEndpoint = (
  config: ResolvedConfig,
  request: Request,
  policy: RegistrationPolicy | undefined,
): Effect.Effect<Response, StorageError, ClientStore> =>
  Effect.gen(function* () {
    if (mediaType(request) !== "application/json") {
      return yield* fail("invalid_client_metadata", "the body must be application/json")
    }
    const text = yield* Effect.tryPromise({
      try: () => readBody(request, config.maxBodyBytes),
      catch: (e) =>
        e instanceof PayloadTooLarge
          ? new BodyTooLargeFailure()
          : OAuthError.make("invalid_client_metadata", "the body is not valid UTF-8"),
    })
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return yield* fail("invalid_client_metadata", "the body is not valid JSON")
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* fail("invalid_client_metadata", "the body must be a JSON object")
    }
    const metadata = body as Record<string, unknown>
    if (metadata.software_statement !== undefined) {
      return yield* fail("invalid_software_statement", "software statements are not supported by this server")
    }

    const strings = [
      "client_name",
      "client_uri",
      "logo_uri",
      "tos_uri",
      "policy_uri",
      "scope",
      "token_endpoint_auth_method",
      "application_type",
      "software_id",
      "software_version",
      "jwks_uri",
    ]
    const values: Record<string, string | undefined> = {}
    for (const name of strings) {
      const r = optionalString(metadata, name)
      if (Result.isFailure(r)) return yield* fail("invalid_client_metadata", r.failure)
      values[name] = r.success
    }
    const redirectUrisR = stringArray(metadata, "redirect_uris")
    const grantTypesR = stringArray(metadata, "grant_types")
    const responseTypesR = stringArray(metadata, "response_types")
    const contactsR = stringArray(metadata, "contacts")
    for (const r of [redirectUrisR, grantTypesR, responseTypesR, contactsR]) {
      if (Result.isFailure(r)) return yield* fail("invalid_client_metadata", r.failure)
    }
    const redirectUris = Result.getOrUndefined(redirectUrisR) ?? []
    const grantTypes = Result.getOrUndefined(grantTypesR) ?? ["authorization_code"]
    const responseTypes = Result.getOrUndefined(responseTypesR) ?? ["code"]

    for (const g of grantTypes) {
      if (!GRANTS.includes(g)) return yield* fail("invalid_client_metadata", `grant_type ${g} is not supported`)
    }
    for (const r of responseTypes) {
      if (r !== "code") return yield* fail("invalid_client_metadata", `response_type ${r} is not supported`)
    }
    if (grantTypes.includes("authorization_code") !== responseTypes.includes("code")) {
      return yield* fail(
        "invalid_client_metadata",
        "grant_types authorization_code and response_types code go together",
      )
    }
    const applicationType = values.application_type ?? "web"
    if (applicationType !== "web" && applicationType !== "native") {
      return yield* fail("invalid_client_metadata", "application_type must be web or native")
    }
    if (grantTypes.includes("authorization_code") && redirectUris.length === 0) {
      return yield* fail("invalid_redirect_uri", "redirect_uris is required for the authorization_code grant")
    }
    for (const uri of redirectUris) {
      const problem = checkRedirectUriForRegistration(uri)
      if (problem !== undefined) return yield* fail("invalid_redirect_uri", problem)
      const scheme = new URL(uri).protocol
      if (applicationType === "web" && scheme !== "https:" && scheme !== "http:") {
        return yield* fail("invalid_redirect_uri", `${uri}: private-use schemes are for native applications`)
      }
    }
    const method = (values.token_endpoint_auth_method ?? "client_secret_basic") as TokenEndpointAuthMethod
    if (!METHODS.includes(method)) {
      return yield* fail("invalid_client_metadata", `token_endpoint_auth_method ${String(method)} is not supported`)
    }
    let jwks: NewClient["jwks"]
    if (values.jwks_uri !== undefined) {
      return yield* fail("invalid_client_metadata", "jwks_uri is not supported; send the keys inline in jwks")
    }
    if (metadata.jwks !== undefined) {
      const candidate = metadata.jwks as { keys?: unknown }
      if (typeof candidate !== "object" || candidate === null || !Array.isArray(candidate.keys)) {
        return yield* fail("invalid_client_metadata", "jwks must be a JWK Set")
      }
      if (
        candidate.keys.some(
          (k) => typeof k !== "object" || k === null || typeof (k as { kty?: unknown }).kty !== "string",
        )
      ) {
        return yield* fail("invalid_client_metadata", "every key in jwks needs kty")
      }
      const secret = Jwk.findPrivateKeyMaterial(candidate)
      if (secret !== undefined) {
        return yield* fail(
          "invalid_client_metadata",
          `jwks must hold public keys only: jwks.${secret.path} is ${secret.kind} key material`,
        )
      }
      jwks = candidate as NewClient["jwks"]
    }
    if (method === "private_key_jwt" && jwks === undefined) {
      return yield* fail("invalid_client_metadata", "private_key_jwt needs jwks")
    }
    if (values.scope !== undefined) {
      const parsed = Scope.validate(values.scope)
      if (Result.isFailure(parsed)) return yield* fail("invalid_client_metadata", "scope is malformed")
      const known = new Set([...config.resources.values()].flatMap((r) => [...r.scopes.keys()]))
      for (const s of parsed.success) {
        if (!known.has(s)) return yield* fail("invalid_client_metadata", `scope ${s} is not offered by this server`)
      }
    }
    for (const name of ["client_uri", "logo_uri", "tos_uri", "policy_uri"]) {
      const problem = httpsUrl(values[name], name)
      if (problem !== undefined) return yield* fail("invalid_client_metadata", problem)
    }

    if (policy !== undefined) {
      const decision = yield* Effect.promise(() => policy(metadata, request))
      if (!decision.allow) return yield* fail(decision.error ?? "invalid_client_metadata", decision.description)
    }

    const issuedAt = Math.floor(Date.now() / 1000)
    const clientId = randomToken(16)
    const secret = method === "client_secret_basic" || method === "client_secret_post" ? randomToken(32) : undefined
    const optional = (name: string) => (values[name] === undefined ? {} : { [name]: values[name] })
    const registered = {
      client_id: clientId,
      client_id_issued_at: issuedAt,
      ...(secret === undefined ? {} : { client_secret_expires_at: 0 }),
      redirect_uris: redirectUris,
      grant_types: grantTypes,
      response_types: responseTypes,
      token_endpoint_auth_method: method,
      application_type: applicationType,
      ...optional("client_name"),
      ...optional("client_uri"),
      ...optional("logo_uri"),
      ...optional("tos_uri"),
      ...optional("policy_uri"),
      ...optional("scope"),
      ...optional("software_id"),
      ...optional("software_version"),
      ...(Result.getOrUndefined(contactsR) === undefined ? {} : { contacts: Result.getOrUndefined(contactsR) }),
      ...(jwks === undefined ? {} : { jwks }),
    }
    const clients = yield* ClientStore
    yield* clients
      .create({
        ...(registered as Omit<NewClient, "origin" | "client_secret_expires_at">),
        client_secret_expires_at: 0,
        origin: "dynamic",
        ...(secret === undefined ? {} : { client_secret: secret }),
      })
      .pipe(Effect.catchTag("ClientAlreadyExists", () => fail("server_error", "client_id collision, retry")))
    return json(
      { ...registered, ...(secret === undefined ? {} : { client_secret: secret }) },
      { status: 201, headers: CORS_HEADERS },
    )
  }).pipe(
    Effect.catchTags({
      OAuthError: (e) => Effect.succeed(oauthError(e)),
      BodyTooLargeFailure: () =>
        Effect.succeed(
          json(
            { error: "invalid_client_metadata", error_description: `the body exceeds ${config.maxBodyBytes} bytes` },
            { status: 413, headers: CORS_HEADERS },
          ),
        ),
    }),
  )
