/**
 * Processing of discovered metadata documents, the "process" half of discovery: the caller fetches a document from
 * the locations {@link WellKnown} gives and hands its JSON here, which validates it against the {@link Wire} schema and
 * applies the checks a client of that document must make before trusting it (the issuer or resource it names, PKCE
 * S256, the endpoints the caller needs). Every role that reads another party's metadata (the client, the resource
 * server looking for a `jwks_uri`, the authorization server's upstream proxy) uses these, so they accept and refuse
 * the same documents with the same messages.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3 | RFC 8414 §3.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3}
 * @module
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as CanonicalUri from "./CanonicalUri.js"
import * as SecureUrl from "./SecureUrl.js"
import * as Wire from "./Wire.js"

/**
 * Why a metadata document was refused.
 *
 * - `invalid-document`: not the document's schema (a member of the wrong type, a URL that is not one, ...).
 * - `issuer-mismatch`: authorization server metadata whose `issuer` is not the expected one (RFC 8414 §3.3).
 * - `pkce-unsupported`: `code_challenge_methods_supported` absent or without `S256` (MCP, RFC 7636 §4.2).
 * - `missing-endpoint`: an endpoint the caller needs is not published.
 * - `resource-mismatch`: protected resource metadata for another resource (RFC 9728 §3.3).
 * - `no-authorization-servers`: protected resource metadata naming no authorization server (MCP requires one).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3 | RFC 8414 §3.3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3}
 */
export const ProblemReason = Schema.Literals([
  "invalid-document",
  "issuer-mismatch",
  "pkce-unsupported",
  "missing-endpoint",
  "resource-mismatch",
  "no-authorization-servers",
])

/** @see {@link ProblemReason} */
export type ProblemReason = typeof ProblemReason.Type

/**
 * A refused metadata document: the reason, the URL it was read from, and a message that says what is wrong and what
 * the publisher must fix.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3 | RFC 8414 §3.3}
 */
export class MetadataProblem extends Schema.TaggedError<MetadataProblem>()("MetadataProblem", {
  reason: ProblemReason,
  url: Schema.String,
  message: Schema.String,
}) {}

/** The endpoint members of authorization server metadata a caller may require. */
export type Endpoint =
  | "authorization_endpoint"
  | "token_endpoint"
  | "jwks_uri"
  | "registration_endpoint"
  | "introspection_endpoint"
  | "revocation_endpoint"

/** What the authorization code flow needs from an authorization server. */
const CODE_FLOW: ReadonlyArray<Endpoint> = ["authorization_endpoint", "token_endpoint"]

const why = (endpoint: Endpoint): string =>
  endpoint === "jwks_uri" ? "its signing keys cannot be found" : "the authorization code flow needs it"

/**
 * Whether the 2025-03-26 fallback may use metadata whose `issuer` is not the MCP server's origin. That revision
 * derives the metadata URL from the MCP server's origin, so the client never had an issuer to expect; an issuer that
 * is an https (or loopback http) URL at that same origin, without query, fragment or credentials, is accepted and
 * becomes the issuer the tokens and the `iss` check are bound to.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-03-26/basic/authorization#2-3-2-authorization-base-url | MCP 2025-03-26 authorization base URL}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export const legacyIssuerAccepted = (issuer: string, serverOrigin: string): boolean => {
  const url = URL.parse(issuer)
  const origin = URL.parse(serverOrigin)
  if (url === null || origin === null) return false
  if (issuer.includes("?") || issuer.includes("#") || url.username !== "" || url.password !== "") return false
  return SecureUrl.isAllowed(url, { httpLoopback: true }) && url.origin === origin.origin
}

/** Options of {@link processAuthorizationServerMetadata}. */
export interface AuthorizationServerMetadataOptions {
  /**
   * The 2025-03-26 fallback: `expectedIssuer` is the MCP server's origin, and an issuer elsewhere at that origin is
   * accepted ({@link legacyIssuerAccepted}). Default `false`: the issuer must equal `expectedIssuer` exactly.
   */
  readonly legacy?: boolean
  /** Require `S256` in `code_challenge_methods_supported`. Default `true` (every MCP client uses PKCE S256). */
  readonly pkce?: boolean
  /** The endpoints that must be published. Default `authorization_endpoint` and `token_endpoint`. */
  readonly endpoints?: ReadonlyArray<Endpoint>
}

/**
 * Validates authorization server metadata read from `url` for the issuer `expectedIssuer`: the document's schema
 * (RFC 8414 §2), its `issuer` identical to the expected one without normalisation (RFC 8414 §3.3; OpenID Connect
 * Discovery §4.3), PKCE `S256` advertised (MCP: clients must refuse to proceed otherwise), and the endpoints the
 * caller needs.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3 | RFC 8414 §3.3}
 * @see {@link https://openid.net/specs/openid-connect-discovery-1_0.html#ProviderConfigurationValidation | OpenID Connect Discovery §4.3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-code-protection | MCP authorization code protection}
 */
export const processAuthorizationServerMetadata = (
  expectedIssuer: string,
  url: string,
  json: unknown,
  options: AuthorizationServerMetadataOptions = {},
): Result.Result<Wire.AuthorizationServerMetadata, MetadataProblem> => {
  const fail = (reason: ProblemReason, message: string) =>
    Result.fail(new MetadataProblem({ reason, url, message: `the authorization server metadata at ${url} ${message}` }))
  const result = Wire.validate(Wire.AuthorizationServerMetadata, json, "authorization server metadata")
  if (Result.isFailure(result)) return fail("invalid-document", `is invalid: ${result.failure.message}`)
  const metadata = result.success
  if (metadata.issuer !== expectedIssuer) {
    if (options.legacy !== true) {
      return fail(
        "issuer-mismatch",
        `has issuer "${metadata.issuer}" but "${expectedIssuer}" was expected (compared exactly, without normalisation); refusing to use it`,
      )
    }
    if (!legacyIssuerAccepted(metadata.issuer, expectedIssuer)) {
      return fail(
        "issuer-mismatch",
        `has issuer "${metadata.issuer}", which is not an https (or loopback http) URL at the MCP server's origin ${expectedIssuer} (2025-03-26 fallback, no protected resource metadata); refusing to use it`,
      )
    }
  }
  if (options.pkce !== false) {
    const methods = metadata.code_challenge_methods_supported
    if (methods === undefined) {
      return fail(
        "pkce-unsupported",
        "has no code_challenge_methods_supported, so PKCE support cannot be verified; the authorization server must list S256",
      )
    }
    if (!methods.includes("S256")) {
      return fail(
        "pkce-unsupported",
        `lists code_challenge_methods_supported [${methods.join(", ")}] without S256; the authorization server must support PKCE S256`,
      )
    }
  }
  for (const endpoint of options.endpoints ?? CODE_FLOW) {
    if (typeof metadata[endpoint] !== "string") return fail("missing-endpoint", `has no ${endpoint}; ${why(endpoint)}`)
  }
  return Result.succeed(metadata)
}

/**
 * Whether published protected resource metadata may be used for an MCP server URL: the same canonical URI, or the
 * same origin with a `resource` path that is a path-segment prefix of the server's path.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3}
 */
export const resourceMatches = (resource: string, serverUrl: string): boolean => {
  if (CanonicalUri.equals(resource, serverUrl)) return true
  const a = URL.parse(resource)
  const b = URL.parse(serverUrl)
  if (a === null || b === null || a.search !== "" || a.hash !== "") return false
  if (CanonicalUri.origin(a.href) !== CanonicalUri.origin(b.href)) return false
  const prefix = a.pathname.replace(/\/+$/, "")
  return prefix === "" || b.pathname === prefix || b.pathname.startsWith(`${prefix}/`)
}

/**
 * Validates protected resource metadata read from `url` for the MCP server at `serverUrl`: the document's schema
 * (RFC 9728 §2), a `resource` that matches the server ({@link resourceMatches}, RFC 9728 §3.3), and at least one
 * authorization server (MCP).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-server-location | MCP authorization server location}
 */
export const processProtectedResourceMetadata = (
  serverUrl: string,
  url: string,
  json: unknown,
): Result.Result<Wire.ProtectedResourceMetadata, MetadataProblem> => {
  const fail = (reason: ProblemReason, message: string) =>
    Result.fail(new MetadataProblem({ reason, url, message: `the protected resource metadata at ${url} ${message}` }))
  const result = Wire.validate(Wire.ProtectedResourceMetadata, json, "protected resource metadata")
  if (Result.isFailure(result)) return fail("invalid-document", `is invalid: ${result.failure.message}`)
  const metadata = result.success
  if (!resourceMatches(metadata.resource, serverUrl)) {
    return fail(
      "resource-mismatch",
      `is for resource "${metadata.resource}", not for ${serverUrl}; refusing to authorize for another server`,
    )
  }
  if ((metadata.authorization_servers ?? []).length === 0) {
    return fail("no-authorization-servers", "lists no authorization_servers; the MCP server must name at least one")
  }
  return Result.succeed(metadata)
}
