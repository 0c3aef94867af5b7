/**
 * The MCP client side of authorization: discovery, registration, PKCE, resource indicators, scope selection,
 * step-up, token storage and refresh, user agents, and a drop-in `fetch` for MCP transports.
 *
 * @packageDocumentation
 */

/** The client service, its drop-in fetch, and the plain face `createAuthClient`. */
export * as AuthClient from "./AuthClient.js"
export { createAuthClient } from "./AuthClient.js"
/** The one typed error family, naming the step and URL of every failure. */
export * as AuthError from "./AuthError.js"
export { AuthError as KeywayAuthError, isAuthError } from "./AuthError.js"
/** The authorization request and the validation of the authorization response (OAuth 2.1 §4.1, RFC 9207). */
export * as Authorization from "./Authorization.js"
/** Client options and the configuration service. */
export * as ClientConfig from "./ClientConfig.js"
/** Protected resource and authorization server discovery (RFC 9728, RFC 8414, OpenID Connect Discovery). */
export * as Discovery from "./Discovery.js"
/** The discovery cache with freshness (RFC 9111). */
export * as DiscoveryCache from "./DiscoveryCache.js"
/** The extension seams: token strategies and the capabilities that declare extensions. */
export * as Extension from "./Extension.js"
/** Client registration: pre-registered, client ID metadata documents, dynamic registration (RFC 7591). */
export * as Registration from "./Registration.js"
/** Token endpoint requests and client authentication (OAuth 2.1 §3.2, RFC 7523). */
export * as TokenEndpoint from "./TokenEndpoint.js"
/** Token storage: memory, file, custom. */
export * as TokenStore from "./TokenStore.js"
/** User agents: system browser with loopback listener, headless, two-phase (RFC 8252). */
export * as UserAgent from "./UserAgent.js"
