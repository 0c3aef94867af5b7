/**
 * OAuth 2.1 authorization server for MCP: metadata, authorization code with PKCE, login and consent, token endpoint
 * with refresh rotation, JWT access tokens, dynamic client registration; storage in memory, SQLite or
 * PostgreSQL, signing-key rotation, background purge and abuse limits.
 *
 * @packageDocumentation
 */

/** Operator actions on the storage: clients, grants and signing keys. */
export * as Administration from "./Administration.js"
/** The server: Effect service and the plain `createAuthorizationServer` face. */
export * as AuthorizationServer from "./AuthorizationServer.js"
export { createAuthorizationServer } from "./AuthorizationServer.js"
/** Options, validation and defaults. */
export * as Config from "./Config.js"
/** Client ID metadata documents: resolver, HTTP caching, trust policy. */
export * as ClientIdMetadata from "./cimd/index.js"
/**
 * The former name of {@link ClientIdMetadata} (client ID metadata documents), easily confused with the storage
 * record `Storage.ClientMetadata`.
 *
 * @deprecated Use {@link ClientIdMetadata}; this alias is removed in the next minor release.
 */
export * as ClientMetadata from "./cimd/index.js"
/** The extension seams: grant handlers, client-authentication methods, token bindings, metadata fields. */
export * as Extension from "./Extension.js"
/** Signing-key rotation: publish ahead, retire after the last token expires, on a schedule and on demand. */
export * as KeyRotation from "./KeyRotation.js"
/** The metadata document and its well-known locations (RFC 8414, OpenID Discovery). */
export * as Metadata from "./Metadata.js"
/** node:http bridge for Web handlers. */
export * as NodeServer from "./NodeServer.js"
/** Readiness and storage timing, for health endpoints and metrics. */
export * as Operations from "./Operations.js"
/** The SSRF-guarded fetch for outbound requests to client-named URLs. */
export * as Outbound from "./outbound/index.js"
/** Proxy mode's upstream identity provider: per-client consent, then sign-in at an upstream authorization server. */
export * as UpstreamProvider from "./proxy/UpstreamProvider.js"
/**
 * The former name of {@link UpstreamProvider} (proxy mode's upstream identity provider), easily confused with
 * `@keyway/resource-server`'s `Upstream`.
 *
 * @deprecated Use {@link UpstreamProvider}; this alias is removed in the next minor release.
 */
export * as Upstream from "./proxy/UpstreamProvider.js"
/** Abuse limits: the counters behind the 429 answers (fixed windows, growing delays), in memory or in the store. */
export * as RateLimiter from "./RateLimiter.js"
/** Access-token signing keys and the JWK Set. */
export * as Signing from "./Signing.js"
/** Storage services (clients, grants, keys) and their implementations. */
export * as Storage from "./storage/index.js"
/** The keys of trusted external JWT issuers as jose key sets: inline, or fetched through the SSRF guard and cached. */
export * as TrustedIssuers from "./TrustedIssuers.js"
/** Pluggable user authentication for the login page. */
export * as UserAuthenticator from "./UserAuthenticator.js"
