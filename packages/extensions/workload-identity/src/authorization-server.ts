/**
 * The authorization server's side of workload identity federation: the JWT bearer grant (RFC 7523 §2.1) for
 * workloads that present a JWT from their own platform (Kubernetes, SPIFFE, a cloud provider, a CI system). Which
 * issuers are trusted, with which keys, and which workloads (by their claims) may obtain tokens for which MCP servers
 * and scopes is configuration; every assertion is checked as RFC 7523 §3 asks and used once.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 * @module
 */
export {
  type ClaimRule,
  claimRuleSchema,
  defaults,
  type IssuanceEvent,
  MAX_CLOCK_SKEW,
  optionsDataSchema,
  optionsSchema,
  type TrustedIssuer,
  trustedIssuerSchema,
  type WorkloadIdentityOptions,
  workloadIdentityGrant,
} from "./internal/server.js"
