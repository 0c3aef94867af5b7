/**
 * The client side of MCP enterprise-managed authorization: a token strategy that exchanges the user's ID token at
 * the enterprise identity provider for an identity assertion and presents it at the MCP authorization server.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 * @module
 */
export {
  type AuthorizationServerClient,
  type EnterpriseManagedOptions,
  enterpriseManaged,
  type IdentityProviderOptions,
} from "./internal/client.js"
export { type SignedIn, type SignInOptions, signIn } from "./internal/signIn.js"
