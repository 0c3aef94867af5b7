/**
 * The MCP specification revisions whose authorization rules Keyway implements, and the behaviour switches that
 * differ between them. Role packages read {@link features} instead of comparing dates.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP 2025-11-25 Authorization}
 * @module
 */

/**
 * Every supported revision, oldest first.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning | MCP Versioning}
 */
export const all = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] as const

/**
 * An MCP specification revision, identified by its date.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning | MCP Versioning}
 */
export type Revision = (typeof all)[number]

/**
 * The newest revision Keyway knows.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization | MCP 2026-07-28 Authorization}
 */
export const latest: Revision = "2026-07-28"

/**
 * The revision used when nothing else is configured: the current stable one, which the seed describes.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP 2025-11-25 Authorization}
 */
const defaultRevision: Revision = "2025-11-25"

export { defaultRevision as default }

const revisionSet: ReadonlySet<string> = new Set(all)

/**
 * Whether a string names a supported revision.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning | MCP Versioning}
 */
export const isRevision = (s: string): s is Revision => revisionSet.has(s)

/**
 * Orders revisions by date: negative when `a` is older than `b`, 0 when equal, positive when newer.
 * Usable with `Array.prototype.sort`.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning | MCP Versioning}
 */
export const compare = (a: Revision, b: Revision): number => all.indexOf(a) - all.indexOf(b)

/**
 * The authorization behaviours that differ between revisions. Each switch names the revision page that sets it.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP 2025-11-25 Authorization}
 */
export interface Features {
  /**
   * Servers publish RFC 9728 protected resource metadata and clients discover the authorization server through it
   * (from 2025-06-18). Before, the authorization server sat at the MCP server's origin.
   * {@link https://modelcontextprotocol.io/specification/2025-06-18/basic/authorization#authorization-server-discovery | 2025-06-18}
   */
  readonly protectedResourceMetadata: boolean
  /**
   * Authorization server metadata may be OpenID Connect Discovery 1.0 as well as RFC 8414, tried in the multi-location
   * order (from 2025-11-25).
   * {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-server-metadata-discovery | 2025-11-25}
   */
  readonly openIdDiscovery: boolean
  /**
   * Client ID metadata documents (URL-formatted client IDs) SHOULD be supported (from 2025-11-25).
   * {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | 2025-11-25}
   */
  readonly clientIdMetadataDocuments: boolean
  /**
   * RFC 7591 dynamic client registration: SHOULD up to 2025-06-18, MAY (backward compatibility) from 2025-11-25.
   * {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#dynamic-client-registration | 2025-11-25}
   */
  readonly dynamicRegistration: "should" | "may"
  /**
   * Dynamic client registration is explicitly deprecated (2026-07-28), kept only for authorization servers without
   * client ID metadata documents.
   * {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization#overview | 2026-07-28}
   */
  readonly dynamicRegistrationDeprecated: boolean
  /**
   * Clients MUST send `application_type` (`"native"` for desktop, mobile, CLI and localhost apps, `"web"` otherwise;
   * OpenID Connect Dynamic Client Registration 1.0 §2) in dynamic registration requests (2026-07-28).
   * {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization/client-registration#application-type-and-redirect-uri-constraints | 2026-07-28}
   */
  readonly registrationApplicationType: boolean
  /**
   * Pre-registered and dynamically registered client credentials are bound to the issuer that issued them: clients
   * MUST NOT reuse them with another authorization server and MUST re-register when it changes (2026-07-28).
   * Client ID metadata document client IDs stay portable.
   * {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization/client-registration#authorization-server-binding | 2026-07-28}
   */
  readonly issuerBoundCredentials: boolean
  /**
   * Clients MUST send the RFC 8707 `resource` parameter in authorization and token requests (from 2025-06-18).
   * {@link https://modelcontextprotocol.io/specification/2025-06-18/basic/authorization#resource-parameter-implementation | 2025-06-18}
   */
  readonly resourceParameter: boolean
  /**
   * Protected resource metadata may be found at the well-known URIs (path-specific, then root) when the 401 challenge
   * has no `resource_metadata`; before 2025-11-25 the header was mandatory.
   * {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#protected-resource-metadata-discovery-requirements | 2025-11-25}
   */
  readonly wellKnownPrmFallback: boolean
  /**
   * Scope guidance: `scope` in the challenge, the client's scope selection order, 403 `insufficient_scope` and
   * step-up authorization (from 2025-11-25).
   * {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-challenge-handling | 2025-11-25}
   */
  readonly scopeChallenges: boolean
  /**
   * On step-up, clients request the union of the previously requested scopes and the challenged ones (2026-07-28);
   * earlier revisions leave the set to the scope selection strategy.
   * {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization#step-up-authorization-flow | 2026-07-28}
   */
  readonly stepUpScopeUnion: boolean
  /**
   * Clients MUST refuse to proceed when `code_challenge_methods_supported` is absent from the authorization server
   * metadata, and use S256 (from 2025-11-25).
   * {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-code-protection | 2025-11-25}
   */
  readonly pkceMetadataCheck: boolean
  /**
   * RFC 9207 `iss` in authorization responses. `"optional"`: the revision says nothing, clients may check it.
   * `"required-when-advertised"` (2026-07-28): clients record the issuer before redirecting, reject a response
   * without `iss` when the metadata has `authorization_response_iss_parameter_supported: true`, compare a present
   * `iss` by simple string comparison whatever the metadata says (also on error responses), and never normalise it.
   * {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization#authorization-response-validation | 2026-07-28}
   */
  readonly issParameter: "optional" | "required-when-advertised"
  /**
   * `offline_access` guidance (2026-07-28): clients MAY request it when the authorization server lists it in
   * `scopes_supported`; protected resources SHOULD NOT put it in challenges or in their `scopes_supported`.
   * {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization#refresh-tokens | 2026-07-28}
   */
  readonly offlineAccess: boolean
  /**
   * 2025-03-26 only: the authorization base URL is the MCP server URL without its path, its RFC 8414 metadata is at
   * `{origin}/.well-known/oauth-authorization-server`, and without metadata the client uses `/authorize`, `/token`
   * and `/register` there (see {@link legacyEndpoints}).
   * {@link https://modelcontextprotocol.io/specification/2025-03-26/basic/authorization#2-3-3-fallbacks-for-servers-without-metadata-discovery | 2025-03-26}
   */
  readonly legacyDefaultEndpoints: boolean
  /**
   * Optional, additive, composable authorization extensions (from 2025-11-25).
   * {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#mcp-authorization-extensions | 2025-11-25}
   */
  readonly extensions: boolean
}

const table: Readonly<Record<Revision, Features>> = {
  "2025-03-26": {
    protectedResourceMetadata: false,
    openIdDiscovery: false,
    clientIdMetadataDocuments: false,
    dynamicRegistration: "should",
    dynamicRegistrationDeprecated: false,
    registrationApplicationType: false,
    issuerBoundCredentials: false,
    resourceParameter: false,
    wellKnownPrmFallback: false,
    scopeChallenges: false,
    stepUpScopeUnion: false,
    pkceMetadataCheck: false,
    issParameter: "optional",
    offlineAccess: false,
    legacyDefaultEndpoints: true,
    extensions: false,
  },
  "2025-06-18": {
    protectedResourceMetadata: true,
    openIdDiscovery: false,
    clientIdMetadataDocuments: false,
    dynamicRegistration: "should",
    dynamicRegistrationDeprecated: false,
    registrationApplicationType: false,
    issuerBoundCredentials: false,
    resourceParameter: true,
    wellKnownPrmFallback: false,
    scopeChallenges: false,
    stepUpScopeUnion: false,
    pkceMetadataCheck: false,
    issParameter: "optional",
    offlineAccess: false,
    legacyDefaultEndpoints: false,
    extensions: false,
  },
  "2025-11-25": {
    protectedResourceMetadata: true,
    openIdDiscovery: true,
    clientIdMetadataDocuments: true,
    dynamicRegistration: "may",
    dynamicRegistrationDeprecated: false,
    registrationApplicationType: false,
    issuerBoundCredentials: false,
    resourceParameter: true,
    wellKnownPrmFallback: true,
    scopeChallenges: true,
    stepUpScopeUnion: false,
    pkceMetadataCheck: true,
    issParameter: "optional",
    offlineAccess: false,
    legacyDefaultEndpoints: false,
    extensions: true,
  },
  "2026-07-28": {
    protectedResourceMetadata: true,
    openIdDiscovery: true,
    clientIdMetadataDocuments: true,
    dynamicRegistration: "may",
    dynamicRegistrationDeprecated: true,
    registrationApplicationType: true,
    issuerBoundCredentials: true,
    resourceParameter: true,
    wellKnownPrmFallback: true,
    scopeChallenges: true,
    stepUpScopeUnion: true,
    pkceMetadataCheck: true,
    issParameter: "required-when-advertised",
    offlineAccess: true,
    legacyDefaultEndpoints: false,
    extensions: true,
  },
}

/**
 * The behaviour switches of a revision.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP 2025-11-25 Authorization}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization | MCP 2026-07-28 Authorization}
 */
export const features = (revision: Revision): Features => table[revision]

/**
 * The 2025-03-26 authorization locations derived from an MCP server URL: the authorization base URL (the server
 * URL with its path, query and fragment discarded), where its RFC 8414 metadata must be, and the default endpoints
 * a client uses when the server has no metadata.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-03-26/basic/authorization#2-3-2-authorization-base-url | MCP 2025-03-26 §2.3.2}
 */
export interface LegacyEndpoints {
  readonly baseUrl: string
  readonly metadata: string
  readonly authorization_endpoint: string
  readonly token_endpoint: string
  readonly registration_endpoint: string
}

/**
 * Computes the 2025-03-26 authorization base URL, metadata URL and default endpoints for an MCP server URL, e.g.
 * `https://api.example.com/v1/mcp` gives `https://api.example.com/authorize`, `/token` and `/register`.
 * Throws `TypeError` when the URL is not absolute.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-03-26/basic/authorization#2-3-3-fallbacks-for-servers-without-metadata-discovery | MCP 2025-03-26 §2.3.3}
 */
export const legacyEndpoints = (serverUrl: string): LegacyEndpoints => {
  const baseUrl = new URL(serverUrl).origin
  if (baseUrl === "null") throw new TypeError(`MCP server URL has no origin: ${serverUrl}`)
  return {
    baseUrl,
    metadata: `${baseUrl}/.well-known/oauth-authorization-server`,
    authorization_endpoint: `${baseUrl}/authorize`,
    token_endpoint: `${baseUrl}/token`,
    registration_endpoint: `${baseUrl}/register`,
  }
}
