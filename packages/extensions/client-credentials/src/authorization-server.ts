/**
 * The authorization server side of the MCP OAuth client credentials extension: the `client_credentials` grant for
 * confidential clients configured for it, with per-client resources and scopes.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4 | RFC 6749 §4.4}
 * @module
 */
export {
  type ClientCredentialsGrantOptions,
  type ClientPolicy,
  clientCredentialsGrant,
  optionsSchema,
} from "./internal/server.js"
