/**
 * The MCP client side of authorization on Node.js: everything the main entry has (which runs on any runtime with
 * Web-standard APIs), plus what needs Node.js: the system browser with a loopback redirect listener, the owner-only
 * JSON file store, and `createAuthClient` with those as defaults. Only this entry loads `node:*` modules.
 *
 * @packageDocumentation
 */

export * from "../index.js"
/** The client service, its drop-in fetch, and `createAuthClient` with the Node.js defaults. */
export * as AuthClient from "./AuthClient.js"
export { createAuthClient } from "./AuthClient.js"
/** Token storage: memory, Web Storage, custom, and the owner-only JSON file. */
export * as TokenStore from "./TokenStore.js"
/** User agents: headless, test user, redirect, two-phase, and the system browser with a loopback listener. */
export * as UserAgent from "./UserAgent.js"
