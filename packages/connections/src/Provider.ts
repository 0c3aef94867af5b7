/**
 * The third-party providers an MCP server connects its users' accounts at: their configuration, and the OAuth client
 * each one is, built from the client package's pieces (discovery, authorization request, callback validation, token
 * endpoint, revocation) so that no rule is written twice.
 *
 * @module
 */
import type { ClientConfig, Discovery } from "@keyway/client"
import { SecureUrl, type Wire } from "@keyway/core"
import * as Schema from "effect/Schema"

/**
 * The endpoints of a provider that publishes no authorization server metadata (GitHub, for one).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export interface ProviderEndpoints {
  readonly authorization: string
  readonly token: string
  /** RFC 7009; without it, disconnecting only forgets the tokens. */
  readonly revocation?: string
}

/**
 * One provider: found by its `issuer` (metadata discovered through the client's `Discovery`, which applies core's
 * `Metadata` rules), or given `endpoints` when it publishes no metadata. With `endpoints`, `issuer` (optional) is what
 * an `iss` in the authorization response must name (RFC 9207); without it the origin of the authorization endpoint is.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3 | RFC 8414 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4}
 */
export interface ProviderConfig {
  /** What the connect page calls the provider ("GitHub"). */
  readonly name: string
  readonly issuer?: string
  readonly endpoints?: ProviderEndpoints
  readonly clientId: string
  /** A confidential client authenticates with `client_secret_basic`; a public one sends its `client_id` only. */
  readonly clientSecret?: string
  readonly scopes: ReadonlyArray<string>
  /**
   * The API the connection's `fetch` may call: an origin or a URL prefix. Requests elsewhere are refused, so the
   * provider's token never leaves for another host. A relative URL given to that `fetch` is resolved under it, as
   * under a directory. Also sent as `resource` (RFC 8707).
   */
  readonly apiBase: string
}

/** A configuration the connections cannot work with; thrown by the plain face, the failure of the layer. */
export class InvalidConnectionsConfig extends Schema.TaggedError<InvalidConnectionsConfig>()(
  "InvalidConnectionsConfig",
  { message: Schema.String },
) {}

/** Whether a provider URL passes the outbound rules of the client: https, or http on a loopback host. */
const secure = (url: string): boolean => URL.parse(url) !== null && SecureUrl.isAllowed(url, { httpLoopback: true })

/**
 * The problems of one provider's configuration (empty when none): an identifier that cannot be a path segment, both
 * or neither of `issuer` and `endpoints` for discovery, URLs that are not https (or http on loopback).
 */
export const problemsOf = (id: string, config: ProviderConfig): ReadonlyArray<string> => {
  const problems: Array<string> = []
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/u.test(id)) {
    problems.push(
      `provider ID ${JSON.stringify(id)} must be letters, digits, ".", "_" or "-", not starting with one of the last three`,
    )
  }
  if (config.issuer === undefined && config.endpoints === undefined) {
    problems.push(`provider ${id} needs an issuer (for metadata discovery) or its endpoints`)
  }
  const urls: Array<[string, string | undefined]> = [
    ["issuer", config.issuer],
    ["endpoints.authorization", config.endpoints?.authorization],
    ["endpoints.token", config.endpoints?.token],
    ["endpoints.revocation", config.endpoints?.revocation],
    ["apiBase", config.apiBase],
  ]
  for (const [name, url] of urls) {
    if (url !== undefined && !secure(url)) {
      problems.push(`provider ${id}: ${name} ${JSON.stringify(url)} must be an https URL (http only on loopback)`)
    }
  }
  if (config.clientId === "") problems.push(`provider ${id} needs a clientId`)
  return problems
}

/** The provider's OAuth client as the client package describes it. */
export const clientOf = (config: ProviderConfig, issuer: string): ClientConfig.ClientInformation => ({
  issuer,
  client_id: config.clientId,
  ...(config.clientSecret === undefined ? {} : { client_secret: config.clientSecret }),
})

/**
 * The authorization server of a provider configured by its endpoints, in the shape discovery gives, so that the
 * client's pieces take it unchanged. `iss` is only required where metadata says so, which these providers have none
 * of.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export const configuredServer = (
  config: ProviderConfig,
  endpoints: ProviderEndpoints,
): Discovery.DiscoveredAuthorizationServer => {
  const issuer = config.issuer ?? new URL(endpoints.authorization).origin
  const metadata = {
    issuer,
    authorization_endpoint: endpoints.authorization,
    token_endpoint: endpoints.token,
    ...(endpoints.revocation === undefined ? {} : { revocation_endpoint: endpoints.revocation }),
    response_types_supported: ["code"],
    code_challenge_methods_supported: ["S256"],
  } as Wire.AuthorizationServerMetadata
  return { issuer, metadata, metadataUrl: undefined }
}

/**
 * Whether a URL is inside the provider's API: same origin as `apiBase`, and under its path when it names one.
 */
export const withinApi = (apiBase: string, url: URL): boolean => {
  const base = new URL(apiBase)
  if (url.origin !== base.origin) return false
  const prefix = base.pathname.endsWith("/") ? base.pathname : `${base.pathname}/`
  return base.pathname === "/" || url.pathname === base.pathname || url.pathname.startsWith(prefix)
}
