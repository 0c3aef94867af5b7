/**
 * Presentation schemes: how an access token may be presented besides `Authorization: Bearer`. An extension (DPoP)
 * registers a scheme; the authentication pipeline extracts the token of a request presented with it, verifies the token
 * as any other (signature, issuer, audience, expiry, scopes) and then asks the scheme to confirm the presentation (the
 * proof of possession). A token bound to a scheme is refused when presented as Bearer. Every 401 offers the schemes'
 * challenges beside Bearer's.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.6.2 | RFC 9110 §11.6.2 (Authorization)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7 | RFC 9449 §7 (DPoP at protected resources)}
 * @module
 */
import type { InboundRequest } from "./ProtectedResource.js"
import type { VerifiedToken } from "./VerifiedToken.js"

/**
 * Why a scheme refused a presentation: an error code of the scheme's challenge (`invalid_token`, or one the scheme
 * defines such as `invalid_dpop_proof`) and a description, answered 401 with the scheme's challenge; `headers` are
 * added to the answer (for example a fresh `DPoP-Nonce`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7.1 | RFC 9449 §7.1}
 */
export interface PresentationRefusal {
  readonly error: string
  readonly description: string
  readonly headers?: Readonly<Record<string, string>>
}

/**
 * What a scheme's challenge says: `resource_metadata`, the scopes, and, when the token was presented with this
 * scheme, the error (the scheme's refusal, or the protected resource's own: `invalid_token`, `insufficient_scope`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-5.1 | RFC 9728 §5.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 */
export interface ChallengeContext {
  readonly resourceMetadata: string
  readonly realm?: string
  readonly scope?: string
  readonly error?: string
  readonly description?: string
}

/**
 * One presentation scheme.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-11.6.2 | RFC 9110 §11.6.2}
 */
export interface PresentationScheme {
  /** The auth-scheme name, for example `DPoP` (matched case-insensitively). */
  readonly scheme: string
  /**
   * Confirms the presentation of a verified token (for DPoP: the proof in the `DPoP` header, for this method, URL and
   * token, signed by the key the token is bound to). Undefined to accept.
   */
  readonly confirm: (
    request: InboundRequest,
    token: VerifiedToken,
    accessToken: string,
  ) => PresentationRefusal | undefined | Promise<PresentationRefusal | undefined>
  /** Whether a token is bound to this scheme: presented as Bearer, it is refused (RFC 9449 §7.2). */
  readonly binds?: (token: VerifiedToken) => boolean
  /**
   * Every token must be presented with this scheme (DPoP's `dpop_bound_access_tokens_required`, RFC 9449 §7.2): a
   * Bearer presentation is refused, whatever the token.
   */
  readonly required?: boolean
  /**
   * The scheme's `WWW-Authenticate` challenge: offered without an error in every 401 beside Bearer's, and alone, with
   * the error, in the refusals of a request that presented its token with this scheme.
   */
  readonly challenge: (context: ChallengeContext) => string
  /** Fields added to the protected resource metadata (RFC 9728 §2), for example `dpop_signing_alg_values_supported`. */
  readonly metadata?: Readonly<Record<string, unknown>>
}
