/**
 * Storage services of the authorization server and their implementations.
 *
 * @module
 */
export * from "./Errors.js"
export * from "./Purge.js"
export * from "./Storage.js"
