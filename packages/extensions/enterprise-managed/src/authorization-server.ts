/**
 * The authorization server side of MCP enterprise-managed authorization: the identity assertion grant of the MCP
 * authorization server (the JWT bearer grant with ID-JAGs from trusted identity providers) and the enterprise identity
 * provider's (the token exchange that issues them).
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 * @module
 */

export {
  type AccessRule,
  type DownstreamAuthorizationServer,
  type IdentityAssertionIssuerOptions,
  identityAssertionIssuer,
  issuerOptionsSchema,
} from "./internal/idp.js"
export {
  ID_JAG_PROFILE,
  type IdentityAssertionGrantOptions,
  identityAssertionGrant,
  optionsSchema,
  type TrustedIdentityProvider,
} from "./internal/server.js"
