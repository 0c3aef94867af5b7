import { OAuthError, Scope, Wire } from "@keyway/core"
import { PayloadTooLarge } from "@keyway/http"
import { Effect, Result } from "effect"
import type { ResolvedConfig } from "../Config.js"
import { registrableGrantTypes } from "../grants/grantTypes.js"
import type { StorageError } from "../storage/Errors.js"
import { ClientStore, type NewClient, type TokenEndpointAuthMethod } from "../storage/Storage.js"
import { isApplicationType, type JwkSetProblem, jwkSetProblem } from "./clientMetadata.js"
import { nowSeconds } from "./clock.js"
import { randomToken } from "./crypto.js"
import { emit } from "./events.js"
import { declaredFields } from "./extensionMetadata.js"
import { BodyTooLargeFailure } from "./formEndpoint.js"
import { CORS_HEADERS, json, mediaType, oauthError, payloadTooLarge, readBody } from "./http.js"
import { isPrivateUseScheme, redirectProblemText, redirectUriProblem } from "./redirect.js"

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

const fail = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

const DOCUMENT = Wire.Documents.clientRegistrationRequest
const JWKS_URI_UNSUPPORTED = "jwks_uri is not supported; send the keys inline in jwks"

/** How the shared public-keys rule reads in a registration error. */
const jwkSetProblemText = (problem: JwkSetProblem): string => {
  switch (problem.kind) {
    case "not-a-set":
      return "jwks must be a JWK Set"
    case "no-kty":
      return "every key in jwks needs kty"
    case "secret":
      return `jwks must hold public keys only: jwks.${problem.path} is ${problem.secret.kind} key material`
  }
}

/** A member the schema refused, as this endpoint has always worded it (`<member> must be ...`). */
const schemaFailure = (body: Record<string, unknown>, failure: Wire.InvalidDocument): OAuthError.OAuthError => {
  const { path } = failure
  const prefix = `${DOCUMENT}: "${path}" `
  const problem = failure.message.startsWith(prefix) ? failure.message.slice(prefix.length) : failure.message
  const element = /^redirect_uris\.(\d+)$/.exec(path)
  if (element !== null) {
    const uri = (body.redirect_uris as ReadonlyArray<unknown>)[Number(element[1])]
    if (typeof uri === "string") {
      const text = redirectProblemText(uri, redirectUriProblem(uri) ?? { kind: "not-absolute" })
      return OAuthError.make("invalid_redirect_uri", text)
    }
  }
  if (path === "jwks_uri" || (path === "jwks" && body.jwks_uri !== undefined)) {
    return OAuthError.make("invalid_client_metadata", JWKS_URI_UNSUPPORTED)
  }
  if (path === "jwks" || path.startsWith("jwks."))
    return OAuthError.make("invalid_client_metadata", "jwks must be a JWK Set")
  const member = /^([a-z_]+)\.\d+$/.exec(path)
  if (member !== null) return OAuthError.make("invalid_client_metadata", `${member[1]} must be an array of strings`)
  const wording = problem === "must be a URL" ? "must be an absolute URL" : problem.replace(/of URLs$/, "of strings")
  return OAuthError.make("invalid_client_metadata", `${path} ${wording}`)
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
    const parsed = Wire.validate(Wire.ClientRegistrationRequest, metadata, DOCUMENT)
    if (Result.isFailure(parsed)) return yield* Effect.fail(schemaFailure(metadata, parsed.failure))
    const registration = parsed.success
    const redirectUris = registration.redirect_uris ?? []
    const grantTypes = registration.grant_types ?? ["authorization_code"]
    const responseTypes = registration.response_types ?? ["code"]

    const registrable = registrableGrantTypes(config.extensions)
    for (const g of grantTypes) {
      if (!registrable.includes(g)) {
        return yield* fail("invalid_client_metadata", `grant_type ${g} is not supported`)
      }
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
    const applicationType = registration.application_type ?? "web"
    if (!isApplicationType(applicationType)) {
      return yield* fail("invalid_client_metadata", "application_type must be web or native")
    }
    if (grantTypes.includes("authorization_code") && redirectUris.length === 0) {
      return yield* fail("invalid_redirect_uri", "redirect_uris is required for the authorization_code grant")
    }
    for (const uri of redirectUris) {
      const problem = redirectUriProblem(uri)
      if (problem !== undefined) return yield* fail("invalid_redirect_uri", redirectProblemText(uri, problem))
      if (applicationType === "web" && isPrivateUseScheme(uri)) {
        return yield* fail("invalid_redirect_uri", `${uri}: private-use schemes are for native applications`)
      }
    }
    const method = (registration.token_endpoint_auth_method ?? "client_secret_basic") as TokenEndpointAuthMethod
    if (!METHODS.includes(method)) {
      return yield* fail("invalid_client_metadata", `token_endpoint_auth_method ${String(method)} is not supported`)
    }
    if (registration.jwks_uri !== undefined) return yield* fail("invalid_client_metadata", JWKS_URI_UNSUPPORTED)
    if (registration.jwks !== undefined) {
      const problem = jwkSetProblem(registration.jwks)
      if (problem !== undefined) return yield* fail("invalid_client_metadata", jwkSetProblemText(problem))
    }
    // jwkSetProblem has made sure every key has a string kty.
    const jwks = registration.jwks as NewClient["jwks"]
    if (method === "private_key_jwt" && jwks === undefined) {
      return yield* fail("invalid_client_metadata", "private_key_jwt needs jwks")
    }
    if (registration.scope !== undefined) {
      const scopes = Scope.validate(registration.scope)
      if (Result.isFailure(scopes)) return yield* fail("invalid_client_metadata", "scope is malformed")
      const known = new Set([...config.resources.values()].flatMap((r) => [...r.scopes.keys()]))
      for (const s of scopes.success) {
        if (!known.has(s)) return yield* fail("invalid_client_metadata", `scope ${s} is not offered by this server`)
      }
    }
    for (const name of ["client_uri", "logo_uri", "tos_uri", "policy_uri"] as const) {
      const value = registration[name]
      if (value !== undefined && new URL(value).protocol !== "https:") {
        return yield* fail("invalid_client_metadata", `${name} must be an https URL`)
      }
    }

    const declared = declaredFields(metadata, config.extensions)
    if (Result.isFailure(declared)) {
      return yield* fail("invalid_client_metadata", `${declared.failure.path} ${declared.failure.problem}`)
    }
    const extensionMetadata = declared.success

    if (policy !== undefined) {
      const decision = yield* Effect.promise(() => policy(metadata, request))
      if (!decision.allow) return yield* fail(decision.error ?? "invalid_client_metadata", decision.description)
    }

    const issuedAt = yield* nowSeconds
    const clientId = randomToken(16)
    const secret = method === "client_secret_basic" || method === "client_secret_post" ? randomToken(32) : undefined
    // RFC 7591 §3.2.1: 0 means the secret does not expire.
    const secretExpiresAt = config.registeredClientSecret === false ? 0 : issuedAt + config.registeredClientSecret
    const optional = <K extends keyof Wire.ClientRegistrationRequest>(name: K) =>
      registration[name] === undefined ? {} : { [name]: registration[name] }
    const registered = {
      client_id: clientId,
      client_id_issued_at: issuedAt,
      ...(secret === undefined ? {} : { client_secret_expires_at: secretExpiresAt }),
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
      ...optional("contacts"),
      ...(jwks === undefined ? {} : { jwks }),
    }
    const clients = yield* ClientStore
    yield* clients
      .create({
        ...(registered as Omit<NewClient, "origin" | "client_secret_expires_at">),
        ...(extensionMetadata === undefined ? {} : { extension_metadata: extensionMetadata }),
        client_secret_expires_at: secret === undefined ? 0 : secretExpiresAt,
        origin: "dynamic",
        // An unused registration (no authorization completed) goes with the purge job; redeeming a code keeps it.
        ...(config.unusedRegistration === false ? {} : { expires_at: issuedAt + config.unusedRegistration }),
        ...(secret === undefined ? {} : { client_secret: secret }),
      })
      .pipe(Effect.catchTag("ClientAlreadyExists", () => fail("server_error", "client_id collision, retry")))
    yield* emit({
      event: "client_registered",
      client_id: clientId,
      ...(registration.client_name === undefined ? {} : { client_name: registration.client_name }),
      token_endpoint_auth_method: method,
      redirect_uris: redirectUris,
    })
    return json(
      // The fields an extension declares are echoed back: the client learns the server honours them.
      { ...registered, ...extensionMetadata, ...(secret === undefined ? {} : { client_secret: secret }) },
      { status: 201, headers: CORS_HEADERS },
    )
  }).pipe(
    Effect.catchTags({
      OAuthError: (e) =>
        Effect.as(
          emit({ event: "registration_refused", error: e.error, description: e.error_description ?? "" }),
          oauthError(e),
        ),
      BodyTooLargeFailure: () =>
        Effect.as(
          emit({
            event: "registration_refused",
            error: "invalid_client_metadata",
            description: `the body exceeds ${config.maxBodyBytes} bytes`,
          }),
          payloadTooLarge("invalid_client_metadata", config.maxBodyBytes),
        ),
    }),
  )
