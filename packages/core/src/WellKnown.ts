/**
 * Well-known metadata locations: where a client looks for protected resource metadata and for authorization server
 * metadata, in the order MCP prescribes.
 *
 * Inputs are canonicalised first ({@link CanonicalUri.parse}), so `HTTPS://Example.COM:443/mcp` and
 * `https://example.com/mcp` give the same URLs; ports other than the default are kept.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3 | RFC 8414 §3}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderConfig | OpenID Connect Discovery 1.0 §4}
 * @module
 */
import * as CanonicalUri from "./CanonicalUri.js"
import { splitCanonical } from "./internal/uri.js"

/**
 * The well-known path of protected resource metadata.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 */
export const PROTECTED_RESOURCE_SUFFIX = "/.well-known/oauth-protected-resource"

/**
 * The well-known path of OAuth authorization server metadata.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3 | RFC 8414 §3}
 */
export const AUTHORIZATION_SERVER_SUFFIX = "/.well-known/oauth-authorization-server"

/**
 * The well-known path of OpenID Provider configuration.
 *
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderConfig | OpenID Connect Discovery 1.0 §4}
 */
export const OPENID_CONFIGURATION_SUFFIX = "/.well-known/openid-configuration"

/**
 * The protected resource metadata URLs to try for a resource, in order: the path-specific one (the well-known string
 * inserted between the host and the path and query), then the root one. A resource at the root path (`/` or empty)
 * with no query has only the root URL. The resource's query is kept in the path-specific URL, as RFC 9728 §3.1 says;
 * the root URL never has one.
 *
 * @throws {@link CanonicalUri.InvalidCanonicalUri} when `resource` is not a valid canonical server URI.
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.1 | RFC 9728 §3.1}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#protected-resource-metadata-discovery-requirements | MCP: Protected Resource Metadata Discovery}
 */
export const protectedResourceMetadataUrls = (resource: string): ReadonlyArray<string> => {
  const { origin, path, query } = splitCanonical(CanonicalUri.parse(resource))
  const root = `${origin}${PROTECTED_RESOURCE_SUFFIX}`
  if (path === "" && query === undefined) return [root]
  return [`${root}${path}${query === undefined ? "" : `?${query}`}`, root]
}

/**
 * The protected resource metadata URL a resource server advertises for itself: the path-specific one, or the root
 * one when the resource is at the root path.
 *
 * @throws {@link CanonicalUri.InvalidCanonicalUri} when `resource` is not a valid canonical server URI.
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.1 | RFC 9728 §3.1}
 */
export const protectedResourceMetadataUrl = (resource: string): string => protectedResourceMetadataUrls(resource)[0]!

/**
 * A place to look for authorization server metadata and the kind of document expected there.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.1 | RFC 8414 §3.1}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderConfigurationRequest | OpenID Connect Discovery 1.0 §4.1}
 */
export interface MetadataLocation {
  readonly url: string
  readonly kind: "oauth-authorization-server" | "openid-configuration"
}

/**
 * Authorization server metadata locations for an issuer, in the order MCP clients must try them.
 *
 * Issuer with a path (`https://h/tenant`):
 * 1. `https://h/.well-known/oauth-authorization-server/tenant` (RFC 8414, inserted)
 * 2. `https://h/.well-known/openid-configuration/tenant` (OpenID Connect, inserted)
 * 3. `https://h/tenant/.well-known/openid-configuration` (OpenID Connect Discovery, appended)
 *
 * Issuer without a path (`https://h`): `https://h/.well-known/oauth-authorization-server`, then
 * `https://h/.well-known/openid-configuration`.
 *
 * A query or fragment on the issuer is dropped (issuer identifiers have neither, RFC 8414 §2), and so is a
 * terminating "/" of its path (RFC 8414 §3.1, OpenID Connect Discovery §4).
 *
 * @throws {@link CanonicalUri.InvalidCanonicalUri} when `issuer` is not a valid absolute URI with a host.
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.1 | RFC 8414 §3.1}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderConfigurationRequest | OpenID Connect Discovery 1.0 §4.1}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-server-metadata-discovery | MCP: Authorization Server Metadata Discovery}
 */
export const authorizationServerMetadataUrls = (issuer: string): ReadonlyArray<MetadataLocation> => {
  const cut = issuer.search(/[?#]/)
  const { origin, path } = splitCanonical(CanonicalUri.parse(cut === -1 ? issuer : issuer.slice(0, cut)))
  const tenant = path.endsWith("/") ? path.slice(0, -1) : path
  if (tenant === "") {
    return [
      { url: `${origin}${AUTHORIZATION_SERVER_SUFFIX}`, kind: "oauth-authorization-server" },
      { url: `${origin}${OPENID_CONFIGURATION_SUFFIX}`, kind: "openid-configuration" },
    ]
  }
  return [
    { url: `${origin}${AUTHORIZATION_SERVER_SUFFIX}${tenant}`, kind: "oauth-authorization-server" },
    { url: `${origin}${OPENID_CONFIGURATION_SUFFIX}${tenant}`, kind: "openid-configuration" },
    { url: `${origin}${tenant}${OPENID_CONFIGURATION_SUFFIX}`, kind: "openid-configuration" },
  ]
}
