/**
 * The vault's errors, in a module of their own so that the backends can raise them without importing the service
 * module that builds its layers from them.
 */
import { Schema } from "effect"

/** Why the vault failed: the backend, or a record that no configured key can decrypt (its key ID is named). */
export class VaultError extends Schema.TaggedError<VaultError>()("VaultError", {
  reason: Schema.Literals(["storage", "unknown-key", "decrypt"]),
  message: Schema.String,
}) {}

/**
 * The provider refused the refresh token (`invalid_grant`): the connection is now `broken`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export class RefreshRejected extends Schema.TaggedError<RefreshRejected>()("RefreshRejected", {
  message: Schema.String,
}) {}
