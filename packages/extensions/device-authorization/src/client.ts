/**
 * The client part of the device authorization grant: `deviceAuthorization()`, a token strategy for
 * `@keyway/client` that shows a user code and polls the token endpoint.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html | RFC 8628}
 * @module
 */
export {
  type DeviceAuthorizationOptions,
  type DeviceCode,
  deviceAuthorization,
  printOnStderr,
  printTo,
  type TextStream,
} from "./internal/client.js"
