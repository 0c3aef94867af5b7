/**
 * Wire schemas (zod 4) for every JSON document of MCP authorization, each exported as a schema and as the
 * same-named TypeScript type, plus helpers that turn a zod failure into an {@link InvalidDocument} naming the field.
 *
 * Choices that apply to every schema:
 * - Documents are loose objects: unknown members (extensions, `client_name#ja-Jpan-JP` language tags) are kept.
 * - URL-valued members must be absolute URLs (a scheme, parseable by WHATWG URL) but may use any scheme: the https
 *   requirements of issuers, endpoints and resources depend on the role and on development settings, so role
 *   packages enforce them (e.g. RFC 8414 §2 "issuer uses https, no query or fragment").
 * - Members the RFCs mark REQUIRED but that MCP can live without (`response_types_supported`,
 *   `authorization_servers`) are optional here; the role packages decide. A registration response's missing
 *   `client_secret_expires_at` reads as `0` (see {@link ClientRegistrationResponse}).
 * - `null` is not accepted for an optional member: the RFCs say to omit it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 * @module
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { z } from "zod"
import * as F from "./schemas/fields.js"

/**
 * A document failed its schema or rules. `message` reads `<document>: "<path>" <what is wrong>`, e.g.
 * `protected resource metadata: "authorization_servers.0" must be a URL`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3 | RFC 8414 §3.3}
 */
export class InvalidDocument extends Schema.TaggedError<InvalidDocument>()("InvalidDocument", {
  /** Which document, e.g. `"protected resource metadata"` (see {@link Documents}). */
  document: Schema.String,
  /** Dot-separated path of the offending member (`"authorization_servers.0"`); empty for the document itself. */
  path: Schema.String,
  message: Schema.String,
}) {}

/**
 * The document names Keyway uses in {@link InvalidDocument} messages.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 */
export const Documents = {
  protectedResourceMetadata: "protected resource metadata",
  authorizationServerMetadata: "authorization server metadata",
  clientIdMetadataDocument: "client ID metadata document",
  clientRegistrationRequest: "client registration request",
  clientRegistrationResponse: "client registration response",
  tokenResponse: "token response",
  deviceAuthorizationResponse: "device authorization response",
  errorResponse: "error response",
  introspectionResponse: "introspection response",
  jwtAccessTokenClaims: "JWT access token claims",
} as const

/**
 * Builds an {@link InvalidDocument} for one member. `problem` starts with a verb: `"must be a URL"`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3}
 */
export const invalid = (document: string, path: string, problem: string): InvalidDocument =>
  new InvalidDocument({
    document,
    path,
    message: path === "" ? `${document} ${problem}` : `${document}: "${path}" ${problem}`,
  })

/**
 * Turns a zod failure into an {@link InvalidDocument} describing its first issue.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3}
 */
export const fromZodError = (error: z.ZodError, document: string): InvalidDocument => {
  const issue = error.issues[0]
  if (issue === undefined) return invalid(document, "", "is invalid")
  return invalid(document, issue.path.map(String).join("."), issue.message)
}

/**
 * How many times each schema is parsed by zod's interpreter before zod may compile it. Compiling an object schema
 * (zod's generated fast path) costs about a millisecond on its first parse, as much as a hundred interpreted parses of
 * a metadata document: a process that parses a document a few times (a client's cold start) never pays it, one that
 * parses it on every request (a server) still gets the compiled parser after the first hundred. Both give the same
 * result.
 */
const INTERPRETED_PARSES = 100
const interpretedParses = new WeakMap<z.ZodType, number>()
const INTERPRETED = { reportInput: true, jitless: true } as const
const COMPILED = { reportInput: true } as const

/**
 * Validates a value against a schema without throwing.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.2 | RFC 9728 §3.2}
 */
export const validate = <S extends z.ZodType>(
  schema: S,
  input: unknown,
  document: string,
): Result.Result<z.infer<S>, InvalidDocument> => {
  const parsed = interpretedParses.get(schema) ?? 0
  const interpreted = parsed < INTERPRETED_PARSES
  if (interpreted) interpretedParses.set(schema, parsed + 1)
  const result = schema.safeParse(input, interpreted ? INTERPRETED : COMPILED)
  return result.success ? Result.succeed(result.data) : Result.fail(fromZodError(result.error, document))
}

/**
 * Validates a value against a schema; throws {@link InvalidDocument}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.2 | RFC 9728 §3.2}
 */
export const parse = <S extends z.ZodType>(schema: S, input: unknown, document: string): z.infer<S> => {
  const result = validate(schema, input, document)
  if (Result.isFailure(result)) throw result.failure
  return result.success
}

/**
 * Validates a value against a schema as an Effect failing with {@link InvalidDocument}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.2 | RFC 9728 §3.2}
 */
export const decode = <S extends z.ZodType>(
  schema: S,
  input: unknown,
  document: string,
): Effect.Effect<z.infer<S>, InvalidDocument> =>
  Effect.suspend(() => Effect.fromResult(validate(schema, input, document)))

/**
 * OAuth 2.0 Protected Resource Metadata, all members of RFC 9728 §2. `resource` is required;
 * `authorization_servers` is optional here, MCP's "at least one" is enforced by the role packages.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2}
 */
export const ProtectedResourceMetadata = F.document({
  resource: F.url(),
  authorization_servers: F.urls().optional(),
  jwks_uri: F.url().optional(),
  scopes_supported: F.strings().optional(),
  bearer_methods_supported: F.strings().optional(),
  resource_signing_alg_values_supported: F.strings().optional(),
  resource_name: F.string().optional(),
  resource_documentation: F.url().optional(),
  resource_policy_uri: F.url().optional(),
  resource_tos_uri: F.url().optional(),
  tls_client_certificate_bound_access_tokens: F.boolean().optional(),
  authorization_details_types_supported: F.strings().optional(),
  dpop_signing_alg_values_supported: F.strings().optional(),
  dpop_bound_access_tokens_required: F.boolean().optional(),
  signed_metadata: F.string().optional(),
})
/** @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-2 | RFC 9728 §2} */
export type ProtectedResourceMetadata = z.infer<typeof ProtectedResourceMetadata>

/**
 * Authorization server metadata: every member of RFC 8414 §2, the OpenID Connect Discovery 1.0 §3 members,
 * `authorization_response_iss_parameter_supported` (RFC 9207 §3), `client_id_metadata_document_supported`
 * (client ID metadata documents), PAR (RFC 9126 §5), DPoP (RFC 9449 §5.1), mTLS (RFC 8705 §3.3, §5) and
 * rich authorization requests (RFC 9396 §10). Only `issuer` is required.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderMetadata | OpenID Connect Discovery 1.0 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-3 | RFC 9207 §3}
 */
export const AuthorizationServerMetadata = F.document({
  // RFC 8414 §2
  issuer: F.url(),
  authorization_endpoint: F.url().optional(),
  token_endpoint: F.url().optional(),
  jwks_uri: F.url().optional(),
  registration_endpoint: F.url().optional(),
  scopes_supported: F.strings().optional(),
  response_types_supported: F.strings().optional(),
  response_modes_supported: F.strings().optional(),
  grant_types_supported: F.strings().optional(),
  token_endpoint_auth_methods_supported: F.strings().optional(),
  token_endpoint_auth_signing_alg_values_supported: F.strings().optional(),
  service_documentation: F.url().optional(),
  ui_locales_supported: F.strings().optional(),
  op_policy_uri: F.url().optional(),
  op_tos_uri: F.url().optional(),
  revocation_endpoint: F.url().optional(),
  revocation_endpoint_auth_methods_supported: F.strings().optional(),
  revocation_endpoint_auth_signing_alg_values_supported: F.strings().optional(),
  introspection_endpoint: F.url().optional(),
  introspection_endpoint_auth_methods_supported: F.strings().optional(),
  introspection_endpoint_auth_signing_alg_values_supported: F.strings().optional(),
  /** RFC 8628 §4. */
  device_authorization_endpoint: F.url().optional(),
  code_challenge_methods_supported: F.strings().optional(),
  signed_metadata: F.string().optional(),
  // OpenID Connect Discovery 1.0 §3 and RP-Initiated Logout 1.0 §2.1
  userinfo_endpoint: F.url().optional(),
  acr_values_supported: F.strings().optional(),
  subject_types_supported: F.strings().optional(),
  id_token_signing_alg_values_supported: F.strings().optional(),
  id_token_encryption_alg_values_supported: F.strings().optional(),
  id_token_encryption_enc_values_supported: F.strings().optional(),
  userinfo_signing_alg_values_supported: F.strings().optional(),
  userinfo_encryption_alg_values_supported: F.strings().optional(),
  userinfo_encryption_enc_values_supported: F.strings().optional(),
  request_object_signing_alg_values_supported: F.strings().optional(),
  request_object_encryption_alg_values_supported: F.strings().optional(),
  request_object_encryption_enc_values_supported: F.strings().optional(),
  display_values_supported: F.strings().optional(),
  claim_types_supported: F.strings().optional(),
  claims_supported: F.strings().optional(),
  claims_locales_supported: F.strings().optional(),
  claims_parameter_supported: F.boolean().optional(),
  request_parameter_supported: F.boolean().optional(),
  request_uri_parameter_supported: F.boolean().optional(),
  require_request_uri_registration: F.boolean().optional(),
  end_session_endpoint: F.url().optional(),
  // RFC 9207 §3 and client ID metadata documents
  authorization_response_iss_parameter_supported: F.boolean().optional(),
  client_id_metadata_document_supported: F.boolean().optional(),
  // RFC 9126 §5, RFC 9449 §5.1, RFC 8705 §3.3 and §5, RFC 9396 §10
  pushed_authorization_request_endpoint: F.url().optional(),
  require_pushed_authorization_requests: F.boolean().optional(),
  dpop_signing_alg_values_supported: F.strings().optional(),
  tls_client_certificate_bound_access_tokens: F.boolean().optional(),
  mtls_endpoint_aliases: F.urlRecord().optional(),
  authorization_details_types_supported: F.strings().optional(),
})
/** @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2} */
export type AuthorizationServerMetadata = z.infer<typeof AuthorizationServerMetadata>

/** RFC 7591 §2 client metadata members, shared by the registration and client ID metadata documents. */
const clientMetadata = {
  redirect_uris: F.urls().optional(),
  token_endpoint_auth_method: F.string().optional(),
  grant_types: F.strings().optional(),
  response_types: F.strings().optional(),
  client_name: F.string().optional(),
  client_uri: F.url().optional(),
  logo_uri: F.url().optional(),
  scope: F.string().optional(),
  contacts: F.strings().optional(),
  tos_uri: F.url().optional(),
  policy_uri: F.url().optional(),
  jwks_uri: F.url().optional(),
  jwks: F.jwks().optional(),
  software_id: F.string().optional(),
  software_version: F.string().optional(),
  // OpenID Connect Dynamic Client Registration 1.0 §2; MCP 2026-07-28 requires it in registration requests
  application_type: F.string().optional(),
  // RFC 9449 §5.2: the client always uses DPoP at the token endpoint
  dpop_bound_access_tokens: F.boolean().optional(),
}

/** RFC 7591 §2: "The jwks_uri and jwks parameters MUST NOT both be present". */
const jwksExclusive = (value: { readonly jwks?: unknown; readonly jwks_uri?: unknown }): boolean =>
  value.jwks === undefined || value.jwks_uri === undefined
const jwksExclusiveError = { error: 'must not be present together with "jwks_uri"', path: ["jwks"] }

/**
 * An RFC 7591 client registration request: the client metadata of §2 and an optional `software_statement`
 * (§2.3). `jwks` and `jwks_uri` are mutually exclusive.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.1 | RFC 7591 §3.1}
 */
export const ClientRegistrationRequest = F.document({
  ...clientMetadata,
  software_statement: F.string().optional(),
}).refine(jwksExclusive, jwksExclusiveError)
/** @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2} */
export type ClientRegistrationRequest = z.infer<typeof ClientRegistrationRequest>

/**
 * An RFC 7591 client information response: `client_id` (required), `client_secret`, `client_id_issued_at`,
 * `client_secret_expires_at`, the RFC 7592 management members, and the registered metadata echoed back.
 *
 * Deliberate leniency: RFC 7591 §3.2.1 makes `client_secret_expires_at` REQUIRED when a `client_secret` is issued,
 * but deployed authorization servers omit it. Its absence is accepted and read as `0` (the secret never expires),
 * so the parsed value always carries `client_secret_expires_at` alongside a `client_secret`. A value that is
 * present must still be a number; every other member is checked as strictly as elsewhere.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.1 | RFC 7591 §3.2.1}
 */
export const ClientRegistrationResponse = F.document({
  ...clientMetadata,
  software_statement: F.string().optional(),
  client_id: F.nonEmptyString(),
  client_secret: F.string().optional(),
  client_id_issued_at: F.number().optional(),
  client_secret_expires_at: F.number().optional(),
  registration_access_token: F.string().optional(),
  registration_client_uri: F.url().optional(),
})
  .refine(jwksExclusive, jwksExclusiveError)
  .transform((value) =>
    value.client_secret !== undefined && value.client_secret_expires_at === undefined
      ? { ...value, client_secret_expires_at: 0 }
      : value,
  )
/** @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.1 | RFC 7591 §3.2.1} */
export type ClientRegistrationResponse = z.infer<typeof ClientRegistrationResponse>

/**
 * A client ID metadata document: RFC 7591 client metadata with `client_id`, `client_name` and `redirect_uris`
 * required. The schema checks shapes only; {@link validateClientIdMetadataDocument} applies the rules that need
 * the document's URL.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-00.html#section-3 | draft-ietf-oauth-client-id-metadata-document-00 §3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export const ClientIdMetadataDocument = F.document({
  ...clientMetadata,
  client_id: F.url(),
  client_name: F.string(),
  redirect_uris: F.urls(),
})
/** @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-00.html#section-3 | draft-ietf-oauth-client-id-metadata-document-00 §3} */
export type ClientIdMetadataDocument = z.infer<typeof ClientIdMetadataDocument>

/** Single-dot or double-dot path segments, raw or percent-encoded (checked before WHATWG URL removes them). */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i

/**
 * Validates a client ID metadata document fetched from `url`:
 * 1. the document matches {@link ClientIdMetadataDocument} (`client_id`, `client_name`, `redirect_uris` present);
 * 2. `client_id` equals `url` exactly (simple string comparison, no normalisation);
 * 3. the URL uses https, contains only RFC 3986 characters, has a path other than `/`, and has no fragment,
 *    userinfo, or dot segments;
 * 4. no `client_secret` or `client_secret_expires_at` (the client has no shared secret);
 * 5. `token_endpoint_auth_method`, when present, is `none` or `private_key_jwt`, and `private_key_jwt` comes with
 *    `jwks` or `jwks_uri` (not both).
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-00.html#section-3 | draft-ietf-oauth-client-id-metadata-document-00 §3}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-00.html#section-4.1 | draft-ietf-oauth-client-id-metadata-document-00 §4.1}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-3 | draft-ietf-oauth-client-id-metadata-document-02 §3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export const validateClientIdMetadataDocument = (
  doc: unknown,
  url: string,
): Result.Result<ClientIdMetadataDocument, InvalidDocument> => {
  const name = Documents.clientIdMetadataDocument
  const parsed = validate(ClientIdMetadataDocument, doc, name)
  if (Result.isFailure(parsed)) return parsed
  const value = parsed.success
  const fail = (path: string, problem: string) => Result.fail(invalid(name, path, problem))

  if (value.client_id !== url) {
    return fail("client_id", `must equal the document URL exactly: expected "${url}", got "${value.client_id}"`)
  }
  // The literal prefix also refuses forms WHATWG URL would repair, such as "https:/host/path".
  if (!/^https:\/\//i.test(url)) return fail("client_id", "must use the https scheme")
  // WHATWG URL reads a backslash as "/" in https URLs; other servers may not, so the document URL would be ambiguous.
  if (/[\\<>"{}|^`]/.test(url)) return fail("client_id", "must contain only characters allowed in RFC 3986 URIs")
  const location = new URL(url)
  if (location.hash !== "" || url.includes("#")) return fail("client_id", "must not contain a fragment")
  if (location.username !== "" || location.password !== "") {
    return fail("client_id", "must not contain a username or password")
  }
  const rawPath = url
    .slice(url.indexOf("//") + 2)
    .replace(/^[^/?#]*/, "")
    .replace(/[?#].*$/, "")
  if (rawPath.split("/").some((segment) => DOT_SEGMENT.test(segment))) {
    return fail("client_id", "must not contain dot path segments")
  }
  if (location.pathname === "/" || location.pathname === "") return fail("client_id", "must contain a path component")

  for (const secret of ["client_secret", "client_secret_expires_at"] as const) {
    if (value[secret] !== undefined) {
      return fail(secret, "must not be present: a client identified by a metadata document has no shared secret")
    }
  }
  const method = value.token_endpoint_auth_method
  if (method !== undefined && method !== "none" && method !== "private_key_jwt") {
    return fail("token_endpoint_auth_method", `must be "none" or "private_key_jwt", got "${method}"`)
  }
  if (value.jwks !== undefined && value.jwks_uri !== undefined) {
    return fail("jwks", 'must not be present together with "jwks_uri"')
  }
  if (method === "private_key_jwt" && value.jwks === undefined && value.jwks_uri === undefined) {
    return fail("jwks_uri", 'is required when "token_endpoint_auth_method" is "private_key_jwt" (or give "jwks")')
  }
  return parsed
}

/**
 * A successful access token response. `token_type` is any non-empty string here: the role packages compare it
 * to `Bearer` case-insensitively (RFC 6749 §7.1). `id_token` appears when `openid` was requested (OpenID Connect
 * Core §3.1.3.3).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.1 | RFC 6749 §5.1}
 */
export const TokenResponse = F.document({
  access_token: F.nonEmptyString(),
  token_type: F.nonEmptyString(),
  expires_in: F.nonNegativeInteger().optional(),
  refresh_token: F.string().optional(),
  scope: F.string().optional(),
  id_token: F.string().optional(),
})
/** @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.1 | RFC 6749 §5.1} */
export type TokenResponse = z.infer<typeof TokenResponse>

/**
 * A device authorization response: the codes, where the user goes, and how long and how often the client may poll.
 * `interval` is optional (5 seconds when absent, RFC 8628 §3.2); `expires_in` must be positive.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.2 | RFC 8628 §3.2}
 */
export const DeviceAuthorizationResponse = F.document({
  device_code: F.nonEmptyString(),
  user_code: F.nonEmptyString(),
  verification_uri: F.url(),
  verification_uri_complete: F.url().optional(),
  expires_in: F.nonNegativeInteger().refine((n) => n > 0, { error: "must be positive" }),
  interval: F.nonNegativeInteger().optional(),
})
/** @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.2 | RFC 8628 §3.2} */
export type DeviceAuthorizationResponse = z.infer<typeof DeviceAuthorizationResponse>

/**
 * An OAuth error response as received. `error` is any string, not only the codes Keyway knows, because
 * extensions register more (RFC 6749 §8.5).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export const OAuthErrorResponse = F.document({
  error: F.nonEmptyString(),
  error_description: F.string().optional(),
  error_uri: F.url().optional(),
})
/** @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2} */
export type OAuthErrorResponse = z.infer<typeof OAuthErrorResponse>

/**
 * A token introspection response: `active` (required) and the optional members of RFC 7662 §2.2.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2.2 | RFC 7662 §2.2}
 */
export const IntrospectionResponse = F.document({
  active: F.boolean(),
  scope: F.string().optional(),
  client_id: F.string().optional(),
  username: F.string().optional(),
  token_type: F.string().optional(),
  exp: F.number().optional(),
  iat: F.number().optional(),
  nbf: F.number().optional(),
  sub: F.string().optional(),
  aud: F.stringOrStrings().optional(),
  iss: F.string().optional(),
  jti: F.string().optional(),
})
/** @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2.2 | RFC 7662 §2.2} */
export type IntrospectionResponse = z.infer<typeof IntrospectionResponse>

/**
 * The claims of a JWT access token: `iss`, `exp`, `aud` (string or array), `sub`, `client_id`, `iat`, `jti`
 * required; `scope`, `auth_time`, `acr`, `amr` (§2.2.1), `groups`, `roles`, `entitlements` (§2.2.3.1) and `nbf`
 * optional. Signature, `typ` and time checks belong to the verifier.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2}
 */
export const JwtAccessTokenClaims = F.document({
  iss: F.nonEmptyString(),
  exp: F.number(),
  aud: F.stringOrStrings(),
  sub: F.nonEmptyString(),
  client_id: F.nonEmptyString(),
  iat: F.number(),
  jti: F.nonEmptyString(),
  nbf: F.number().optional(),
  scope: F.string().optional(),
  auth_time: F.number().optional(),
  acr: F.string().optional(),
  amr: F.strings().optional(),
  groups: F.strings().optional(),
  roles: F.strings().optional(),
  entitlements: F.strings().optional(),
})
/** @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2 | RFC 9068 §2.2} */
export type JwtAccessTokenClaims = z.infer<typeof JwtAccessTokenClaims>
