/**
 * The client's side of workload identity federation: an autonomous MCP client presents the JWT its platform issued
 * it (Kubernetes, SPIFFE, a cloud provider, a CI system) with the JWT bearer grant (RFC 7523 §2.1), and needs no
 * client ID, no registration and no credentials of its own. Discovery, `resource`, scope selection, token storage,
 * re-acquisition before expiry and the 401 handling stay the client's.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.1 | RFC 7523 §2.1}
 * @module
 */
export {
  type AssertionContext,
  type AssertionSource,
  type WorkloadIdentityOptions,
  workloadIdentity,
} from "./internal/client.js"
