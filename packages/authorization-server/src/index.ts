/**
 * OAuth 2.1 authorization server for MCP: metadata, authorization code with PKCE, login and consent, token endpoint
 * with refresh rotation, JWT access tokens, dynamic client registration; storage in memory, SQLite or
 * PostgreSQL, signing-key rotation and background purge.
 *
 * @packageDocumentation
 */

/** The server: Effect service and the plain `createAuthorizationServer` face. */
export * as AuthorizationServer from "./AuthorizationServer.js"
export { createAuthorizationServer } from "./AuthorizationServer.js"
/** Options, validation and defaults. */
export * as Config from "./Config.js"
/** Client ID metadata documents: resolver, HTTP caching, trust policy. */
export * as ClientMetadata from "./cimd/index.js"
/** Signing-key rotation: publish ahead, retire after the last token expires, on a schedule and on demand. */
export * as KeyRotation from "./KeyRotation.js"
/** The metadata document and its well-known locations (RFC 8414, OpenID Discovery). */
export * as Metadata from "./Metadata.js"
/** node:http bridge for Web handlers. */
export * as NodeServer from "./NodeServer.js"
/** The SSRF-guarded fetch for outbound requests to client-named URLs. */
export * as Outbound from "./outbound/index.js"
/** Proxy mode: per-client consent, then sign-in at an upstream authorization server. */
export * as Upstream from "./proxy/Upstream.js"
/** Access-token signing keys and the JWK Set. */
export * as Signing from "./Signing.js"
/** Storage services (clients, grants, keys) and their implementations. */
export * as Storage from "./storage/index.js"
/** Pluggable user authentication for the login page. */
export * as UserAuthenticator from "./UserAuthenticator.js"
