/**
 * The identifiers of grant types, client assertion types and MCP authorization extensions, named once for every role.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2 (grant_types)}
 * @module
 */

/**
 * The authorization code grant.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1 | OAuth 2.1 §4.1}
 */
export const AUTHORIZATION_CODE = "authorization_code"

/**
 * The refresh token grant.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3 | OAuth 2.1 §4.3}
 */
export const REFRESH_TOKEN = "refresh_token"

/**
 * The client credentials grant.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.2 | OAuth 2.1 §4.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4 | RFC 6749 §4.4}
 */
export const CLIENT_CREDENTIALS = "client_credentials"

/**
 * The JWT bearer authorization grant: a JWT as the `assertion` parameter.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.1 | RFC 7523 §2.1}
 */
export const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"

/**
 * The token exchange grant.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"

/**
 * The device authorization grant: a device access token request.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.4 | RFC 8628 §3.4}
 */
export const DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"

/**
 * The `client_assertion_type` of JWT client authentication (`private_key_jwt`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 */
export const JWT_CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/**
 * The identifiers of the MCP authorization extensions, as clients declare them in their capabilities
 * (`capabilities.extensions`) and as the extension specifications name them.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 */
export const extensions = {
  /** OAuth client credentials (SEP-1046). */
  clientCredentials: "io.modelcontextprotocol/oauth-client-credentials",
  /** Workload identity federation (SEP-1933). */
  workloadIdentity: "io.modelcontextprotocol/auth/wif",
  /** Enterprise-managed authorization (SEP-990). */
  enterpriseManaged: "io.modelcontextprotocol/enterprise-managed-authorization",
  /** DPoP sender-constrained tokens (SEP-1932). */
  dpop: "io.modelcontextprotocol/auth/dpop",
} as const

/**
 * The asymmetric JWS algorithms Keyway signs and accepts assertions with (no `none`, no HMAC: an assertion must be
 * verifiable by a party that cannot forge it).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7518.html#section-3.1 | RFC 7518 §3.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8037.html#section-3.1 | RFC 8037 §3.1 (EdDSA)}
 */
export const ASYMMETRIC_ALGORITHMS: ReadonlyArray<string> = [
  "ES256",
  "ES384",
  "ES512",
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "EdDSA",
]

/**
 * The token type of an Identity Assertion JWT Authorization Grant (ID-JAG): the `requested_token_type` and
 * `issued_token_type` of the token exchange that obtains one.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.3 | Identity Assertion Authorization Grant §4.3}
 */
export const ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"

/**
 * The token type of an OpenID Connect ID token, as the `subject_token_type` of a token exchange.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-3 | RFC 8693 §3}
 */
export const ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"

/**
 * The JWT header `typ` of an ID-JAG: what tells it apart from other assertions of the JWT bearer grant.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-3 | Identity Assertion Authorization Grant §3}
 */
export const ID_JAG_TYP = "oauth-id-jag+jwt"

/**
 * The token type of an OAuth 2.0 access token, as a token exchange's `subject_token_type`, `requested_token_type`
 * and `issued_token_type`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-3 | RFC 8693 §3}
 */
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

/**
 * The token type of a JWT, as a token exchange's `subject_token_type` or `actor_token_type`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-3 | RFC 8693 §3}
 */
export const JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
