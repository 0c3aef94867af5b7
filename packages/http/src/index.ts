/**
 * HTTP plumbing shared by Keyway's servers, with Web-standard APIs only: request bodies read within a limit, and the
 * checks of the request line and `Host` that run before any handler. The node:http bridge is in `@keyway/http/node`.
 *
 * @packageDocumentation
 */

/** Request bodies read within a size limit (413). */
export * as Body from "./Body.js"
export { DEFAULT_MAX_BODY_BYTES, PayloadTooLarge } from "./Body.js"
/** A server's own Prometheus metrics and the handler serving them. */
export * as Metrics from "./Metrics.js"
/** The `Host` field, the request-target and the method, checked before a handler runs. */
export * as RequestLine from "./RequestLine.js"
