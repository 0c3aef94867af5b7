/**
 * The protocol vocabulary shared by Keyway's client, resource server and authorization server.
 * Pure functions and schemas; no I/O.
 *
 * @packageDocumentation
 */

/** Claim checks of JWTs presented as authorization grants (RFC 7523 §3). */
export * as Assertion from "./Assertion.js"
/** The processing half of an authorization request: state, RFC 9207 iss, error responses, the code (RFC 6749 §4.1.2, RFC 9207 §2.4). */
export * as AuthorizationResponse from "./AuthorizationResponse.js"
/** Web-standard byte helpers: base64url, random values, constant-time comparison (RFC 4648 §5). */
export * as Bytes from "./Bytes.js"
/** Canonical server URIs: parse, validate, canonicalise, compare (RFC 8707 §2, RFC 3986 §6). */
export * as CanonicalUri from "./CanonicalUri.js"

/** WWW-Authenticate challenges and the Bearer parameters (RFC 9110 §11.6.1, RFC 6750 §3, RFC 9728 §5.1). */
export * as Challenge from "./Challenge.js"

/** Client authentication encodings: client_secret_basic (RFC 6749 §2.3.1). */
export * as ClientAuth from "./ClientAuth.js"

/** Identifiers of grant types, client assertion types and the MCP authorization extensions (RFC 7523, RFC 8693). */
export * as Grant from "./Grant.js"

/** HTTP caching: Cache-Control and freshness (RFC 9111 §4.2, §5.2). */
export * as HttpCache from "./HttpCache.js"

/** Public keys only: the private and symmetric JWK members a client must not publish (RFC 7517 §4, RFC 7518 §6, RFC 7591 §2). */
export * as Jwk from "./Jwk.js"
/** The MCP operations of a JSON-RPC body: methods, tools, batches, and the JSON-RPC errors for unreadable bodies. */
export * as McpOperation from "./McpOperation.js"
/** Processing of discovered authorization server and protected resource metadata (RFC 8414 §3.3, RFC 9728 §3.3). */
export * as Metadata from "./Metadata.js"

/** The OAuth error codes, their HTTP statuses and the typed error (RFC 6749 §5.2). */
export * as OAuthError from "./OAuthError.js"

/** The typed error of a factory given options it cannot work with (the extensions' factories). */
export * as Options from "./Options.js"

/** Token passthrough found before it happens: the inbound token in an outgoing request (MCP security best practices). */
export * as Passthrough from "./Passthrough.js"

/** PKCE S256 (RFC 7636). */
export * as Pkce from "./Pkce.js"

/** Revisions of the MCP specification and the authorization behaviours that differ between them. */
export * as Revision from "./Revision.js"

/** Scope strings and order-preserving scope-set operations (RFC 6749 §3.3). */
export * as Scope from "./Scope.js"

/** Where plain http is acceptable: loopback hosts, the secure-or-loopback policy, loopback redirect URIs (RFC 8252 §7.3, §8.3). */
export * as SecureUrl from "./SecureUrl.js"
/** The token exchange: the request, its checks at the token endpoint, and the `act` and `may_act` delegation claims (RFC 8693). */
export * as TokenExchange from "./TokenExchange.js"
/** The processing half of a token request: an error response, a missing token, a token type the caller cannot use (RFC 6749 §5, RFC 8693 §2.2). */
export * as TokenResponse from "./TokenResponse.js"

/** Trusted external issuers of JWTs: their keys (`jwksUri` or `jwks`), schema and transport rule (RFC 7523 §3, RFC 7517 §5). */
export * as TrustedIssuer from "./TrustedIssuer.js"

/** Well-known metadata locations (RFC 9728 §3, RFC 8414 §3, OpenID Connect Discovery §4). */
export * as WellKnown from "./WellKnown.js"

/** zod schemas of the wire documents and the helpers that decode them (RFC 9728, RFC 8414, RFC 7591, ...). */
export * as Wire from "./Wire.js"
