/**
 * OAuth 2.0 Token Exchange (RFC 8693) for MCP servers that call other APIs for their users. MCP forbids passing the
 * user's token on; instead the MCP server exchanges it at the authorization server that issued it for a token of its
 * own for the downstream API, which still names the user (`sub`) and says who acts for them (`act`). The
 * authorization server side (the grant and its per-client policy) is `@keyway/ext-token-exchange/authorization-server`;
 * the resource server side (the exchange, cached, and a `fetch` for the downstream API) is
 * `@keyway/ext-token-exchange/resource-server`. A downstream Keyway resource server accepts the exchanged tokens with
 * its `delegation` option.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html | RFC 8693}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 * @packageDocumentation
 */
import { Grant } from "@keyway/core"

/**
 * The extension's identifier: the token exchange grant type it adds to the authorization server.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export const EXTENSION_ID: typeof Grant.TOKEN_EXCHANGE = Grant.TOKEN_EXCHANGE
