/**
 * The authorization-server part of the device authorization grant: the device authorization endpoint, the
 * verification page and the `device_code` grant, as an extension of `@keyway/authorization-server`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html | RFC 8628}
 * @module
 */
export {
  type DeviceAuthorizationOptions,
  deviceAuthorization,
  ID,
  optionsSchema,
} from "./internal/authorizationServer.js"
