/**
 * The protocol vocabulary shared by Keyway's client, resource server and authorization server.
 * Pure functions and schemas; no I/O.
 *
 * @packageDocumentation
 */

/** PKCE S256 (RFC 7636). */
export * as Pkce from "./Pkce.js"
