/**
 * The typed failures of the storage services. Each names one outcome a caller must handle; none carries a secret.
 *
 * @module
 */
import { Schema } from "effect"

/**
 * The storage backend failed (I/O, locking, corrupt data). Callers answer `server_error` / HTTP 500.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2.1 | RFC 6749 §4.1.2.1 (server_error)}
 */
export class StorageError extends Schema.TaggedError<StorageError>()("StorageError", {
  /** The store operation that failed, e.g. `GrantStore.rotate`. */
  operation: Schema.String,
  /** The backend's description of the failure. */
  message: Schema.String,
}) {}

/**
 * No client with this `client_id` is stored (or its cached metadata document has expired).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2 (invalid_client)}
 */
export class ClientNotFound extends Schema.TaggedError<ClientNotFound>()("ClientNotFound", {
  client_id: Schema.String,
}) {}

/**
 * A client with this `client_id` already exists.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.1 | RFC 7591 §3.2.1}
 */
export class ClientAlreadyExists extends Schema.TaggedError<ClientAlreadyExists>()("ClientAlreadyExists", {
  client_id: Schema.String,
}) {}

/**
 * The presented authorization code was never issued (or has been purged).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2 (invalid_grant)}
 */
export class CodeNotFound extends Schema.TaggedError<CodeNotFound>()("CodeNotFound", {}) {}

/**
 * The presented authorization code is past its `expires_at`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2 | RFC 6749 §4.1.2}
 */
export class CodeExpired extends Schema.TaggedError<CodeExpired>()("CodeExpired", {
  grant_id: Schema.String,
}) {}

/**
 * The presented authorization code was already redeemed. The store has revoked the grant it belongs to (its refresh
 * family and access tokens) in the same transaction; `grant_id` names it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2 | RFC 6749 §4.1.2}
 */
export class CodeAlreadyUsed extends Schema.TaggedError<CodeAlreadyUsed>()("CodeAlreadyUsed", {
  grant_id: Schema.String,
}) {}

/**
 * No grant with this id is stored.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-1.3 | RFC 6749 §1.3}
 */
export class GrantNotFound extends Schema.TaggedError<GrantNotFound>()("GrantNotFound", {
  grant_id: Schema.String,
}) {}

/**
 * The grant was revoked (code replay, refresh token reuse, explicit revocation): nothing more may be issued under it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-10.5 | RFC 6749 §10.5}
 */
export class GrantRevoked extends Schema.TaggedError<GrantRevoked>()("GrantRevoked", {
  grant_id: Schema.String,
}) {}

/**
 * The presented refresh token was never issued (or has been purged).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2 (invalid_grant)}
 */
export class RefreshTokenNotFound extends Schema.TaggedError<RefreshTokenNotFound>()("RefreshTokenNotFound", {}) {}

/**
 * The presented refresh token is past its `expires_at`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2 (invalid_grant)}
 */
export class RefreshTokenExpired extends Schema.TaggedError<RefreshTokenExpired>()("RefreshTokenExpired", {
  family_id: Schema.String,
}) {}

/**
 * The presented refresh token belongs to a revoked family.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2 (invalid_grant)}
 */
export class RefreshTokenRevoked extends Schema.TaggedError<RefreshTokenRevoked>()("RefreshTokenRevoked", {
  family_id: Schema.String,
  grant_id: Schema.String,
}) {}

/**
 * The presented refresh token was already rotated out. The store has revoked its whole grant (the family and the
 * access tokens issued under it) in the same transaction.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3.1 | OAuth 2.1 §4.3.1}
 */
export class RefreshTokenReused extends Schema.TaggedError<RefreshTokenReused>()("RefreshTokenReused", {
  family_id: Schema.String,
  grant_id: Schema.String,
}) {}

/**
 * The refresh token was presented by a client other than the one it was issued to. Nothing is changed.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3.1 | OAuth 2.1 §4.3.1}
 */
export class RefreshTokenClientMismatch extends Schema.TaggedError<RefreshTokenClientMismatch>()(
  "RefreshTokenClientMismatch",
  {
    family_id: Schema.String,
    client_id: Schema.String,
  },
) {}

/**
 * No signing key with this `kid` is stored.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-4.5 | RFC 7517 §4.5}
 */
export class KeyNotFound extends Schema.TaggedError<KeyNotFound>()("KeyNotFound", {
  kid: Schema.String,
}) {}

/**
 * A signing key with this `kid` already exists.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-4.5 | RFC 7517 §4.5}
 */
export class KeyAlreadyExists extends Schema.TaggedError<KeyAlreadyExists>()("KeyAlreadyExists", {
  kid: Schema.String,
}) {}

/**
 * No key is active for signing at the given time (none stored, none activated yet, or all retired).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-4 | RFC 9068 §4}
 */
export class NoSigningKey extends Schema.TaggedError<NoSigningKey>()("NoSigningKey", {}) {}
