/**
 * The client side of the MCP OAuth client credentials extension: a token strategy that obtains access tokens with the
 * client credentials grant, authenticating with a pre-registered secret or private key, never registering itself.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.2 | OAuth 2.1 §4.2}
 * @module
 */
export {
  type ClientCredentialsOptions,
  clientCredentials,
  type PrivateKeyOption,
  type SecretMethod,
  selectMethod,
} from "./internal/client.js"
