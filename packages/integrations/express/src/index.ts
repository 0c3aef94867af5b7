/**
 * Express middleware for Keyway's resource server: serves the protected resource metadata and authenticates every
 * request to the MCP endpoint with the Bearer token of its Authorization header.
 *
 * @packageDocumentation
 */

/** The middleware. */
export * as KeywayExpress from "./KeywayExpress.js"

export { authOf, metadata, requireAuth } from "./KeywayExpress.js"
