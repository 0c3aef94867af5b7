/**
 * The OAuth 2.0 Device Authorization Grant (RFC 8628) for Keyway. The authorization server's part is in
 * `@keyway/ext-device-authorization/authorization-server`, the client's in `@keyway/ext-device-authorization/client`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html | RFC 8628}
 * @module
 */
export {}
