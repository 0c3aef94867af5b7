/**
 * The MCP client side of authorization: discovery, registration, PKCE, resource indicators, scope selection,
 * step-up, token storage and refresh, user agents, and a drop-in `fetch` for MCP transports.
 *
 * This entry uses Web-standard APIs only (`fetch`, `URL`, Web Crypto, Web Storage where used): it runs in browsers,
 * Cloudflare Workers (no `nodejs_compat` needed), Deno, Bun and Node.js. The system browser with a loopback listener
 * and the file store need Node.js and are in `@keyway/client/node`.
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
/** Token revocation at the authorization server (RFC 7009). */
export * as Revocation from "./Revocation.js"
/** Token endpoint requests and client authentication (OAuth 2.1 §3.2, RFC 7523). */
export * as TokenEndpoint from "./TokenEndpoint.js"
/** Token storage: memory, Web Storage (browsers), custom. */
export * as TokenStore from "./TokenStore.js"
/** URL-mode elicitation: the prompt, consent, opening the URL, and completion notifications (MCP 2025-11-25). */
export * as UrlElicitation from "./UrlElicitation.js"
export { createUrlElicitation } from "./UrlElicitation.js"
/** User agents: redirect (web apps), headless, test user, two-phase. */
export * as UserAgent from "./UserAgent.js"
