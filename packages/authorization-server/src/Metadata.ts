/**
 * The authorization server metadata document and the well-known paths it is served at.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3 | RFC 8414 §3}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderMetadata | OpenID Connect Discovery 1.0 §3}
 * @module
 */
import { WellKnown } from "@keyway/core"
import type { ResolvedConfig } from "./Config.js"
import { mergeMetadata } from "./Extension.js"
import { grantTypes } from "./grants/grantTypes.js"

/**
 * Signature algorithms accepted for `private_key_jwt` client assertions.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
export const CLIENT_ASSERTION_ALGORITHMS: ReadonlyArray<string> = ["ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA"]

const AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]

/**
 * The metadata document. The same document answers at the RFC 8414 and the OpenID Discovery locations;
 * `subject_types_supported` and `id_token_signing_alg_values_supported` are there because OpenID Discovery
 * requires them; ID tokens are issued only with the `openid` option, which adds `openid` to `scopes_supported`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-3 | RFC 9207 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html#section-2 | RFC 7009 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2 | RFC 7662 §2}
 */
export const document = (config: ResolvedConfig): Record<string, unknown> => {
  const scopes = new Set<string>()
  for (const resource of config.resources.values()) for (const scope of resource.scopes.keys()) scopes.add(scope)
  if (config.openid) scopes.add("openid")
  const authMethods = [
    ...AUTH_METHODS,
    ...config.extensions.flatMap((e) => (e.clientAuthenticationMethods ?? []).map((m) => m.name)),
  ]
  const own: Record<string, unknown> = {
    issuer: config.issuer,
    authorization_endpoint: config.endpoints.authorization,
    token_endpoint: config.endpoints.token,
    ...(config.registration ? { registration_endpoint: config.endpoints.registration } : {}),
    jwks_uri: config.endpoints.jwks,
    scopes_supported: [...scopes],
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: grantTypes(config.extensions),
    token_endpoint_auth_methods_supported: authMethods,
    token_endpoint_auth_signing_alg_values_supported: CLIENT_ASSERTION_ALGORITHMS,
    revocation_endpoint: config.endpoints.revocation,
    revocation_endpoint_auth_methods_supported: authMethods,
    revocation_endpoint_auth_signing_alg_values_supported: CLIENT_ASSERTION_ALGORITHMS,
    introspection_endpoint: config.endpoints.introspection,
    // Public clients (`none`) cannot introspect.
    introspection_endpoint_auth_methods_supported: authMethods.filter((m) => m !== "none"),
    introspection_endpoint_auth_signing_alg_values_supported: CLIENT_ASSERTION_ALGORITHMS,
    code_challenge_methods_supported: ["S256"],
    authorization_response_iss_parameter_supported: true,
    ...(config.clientIdMetadataDocuments ? { client_id_metadata_document_supported: true } : {}),
    subject_types_supported: ["public"],
    id_token_signing_alg_values_supported: ["ES256"],
  }
  return config.extensions.reduce(
    (doc, e) => (e.metadata === undefined ? doc : mergeMetadata(doc, e.metadata(config))),
    own,
  )
}

/**
 * Every path the metadata document is served at: the paths of core's {@link WellKnown.authorizationServerMetadataUrls},
 * the locations MCP clients try, in their order (RFC 8414's path-inserted form, OpenID Discovery's path-inserted form
 * and, for an issuer with a path, OpenID Discovery's appended form).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.1 | RFC 8414 §3.1}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderConfig | OpenID Connect Discovery 1.0 §4}
 */
export const wellKnownPaths = (issuer: URL): ReadonlyArray<string> =>
  WellKnown.authorizationServerMetadataUrls(issuer.href).map((location) => new URL(location.url).pathname)
