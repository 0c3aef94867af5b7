/**
 * Which client ID metadata document URLs the authorization server accepts, and which it vouches for: an allow-list
 * of domains (exact or `*.suffix`), accepting any https client ID, a deny-list, or a custom function. The decision
 * carries the client's host so the consent page can show it prominently and mark clients outside the allow-list as
 * unverified.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.5 | draft-ietf-oauth-client-id-metadata-document-02 §8.5 (phishing; display the client_id host)}
 * @module
 */
import { Context, Effect, Layer } from "effect"

/**
 * The outcome for one client ID.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.5 | draft-ietf-oauth-client-id-metadata-document-02 §8.5}
 */
export interface TrustDecision {
  /** Whether the server accepts this client ID at all (it is fetched only when allowed). */
  readonly allowed: boolean
  /** Whether the server vouches for the client (on the allow-list); consent marks unverified clients. */
  readonly verified: boolean
  /** The client ID's host name, lower-case, to show on the consent page. */
  readonly host: string
}

/**
 * Domain rules. A pattern is an exact host (`app.example.com`) or `*.` and a suffix (`*.example.com`: any
 * subdomain, not the apex). Matching is case-insensitive and ignores a trailing dot.
 *
 * - `deny`: always refused, whatever else matches.
 * - `allow`: accepted and verified.
 * - Anything else: accepted, unverified, when `acceptAnyHttps` is true; refused when it is false. It defaults to
 *   true without an allow-list and to false with one.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export interface PolicyOptions {
  readonly allow?: ReadonlyArray<string>
  readonly deny?: ReadonlyArray<string>
  readonly acceptAnyHttps?: boolean
}

/**
 * A custom policy: receives the client ID URL and its lower-case host, returns whether to accept and whether to
 * vouch for the client.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export type PolicyFunction = (input: {
  readonly clientId: string
  readonly host: string
}) =>
  | { readonly allowed: boolean; readonly verified: boolean }
  | Promise<{ readonly allowed: boolean; readonly verified: boolean }>

/**
 * The shape of the {@link ClientTrustPolicy} service.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export interface ClientTrustPolicyService {
  /** Decides for a client ID URL (already checked to be a valid client ID URL). */
  readonly evaluate: (clientId: string) => Effect.Effect<TrustDecision>
}

const normalizeHost = (host: string): string => host.toLowerCase().replace(/\.$/, "")

/**
 * Whether `host` matches a domain pattern (exact, or `*.suffix` for any subdomain of suffix).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6125.html#section-6.4.3 | RFC 6125 §6.4.3 (wildcard matching, for comparison)}
 */
export const matchesDomain = (host: string, pattern: string): boolean => {
  const h = normalizeHost(host)
  const p = normalizeHost(pattern)
  if (p.startsWith("*.")) {
    const suffix = p.slice(1)
    return h.endsWith(suffix) && h.length > suffix.length
  }
  return h === p
}

/**
 * The lower-case host of a client ID URL, without IPv6 brackets: what the consent page shows.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.5 | draft-ietf-oauth-client-id-metadata-document-02 §8.5}
 */
export const hostOf = (clientId: string): string => {
  const host = new URL(clientId).hostname
  return normalizeHost(host.startsWith("[") ? host.slice(1, -1) : host)
}

/**
 * The decision rule of {@link ClientTrustPolicy.layer}, as a plain function.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export const decide = (options: PolicyOptions, clientId: string): TrustDecision => {
  const host = hostOf(clientId)
  if ((options.deny ?? []).some((p) => matchesDomain(host, p))) return { allowed: false, verified: false, host }
  if ((options.allow ?? []).some((p) => matchesDomain(host, p))) return { allowed: true, verified: true, host }
  const acceptAny = options.acceptAnyHttps ?? options.allow === undefined
  return { allowed: acceptAny, verified: false, host }
}

/**
 * The trust policy for client ID metadata documents.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 */
export class ClientTrustPolicy extends Context.Service<ClientTrustPolicy, ClientTrustPolicyService>()(
  "@keyway/authorization-server/ClientTrustPolicy",
) {
  /**
   * Domain rules ({@link PolicyOptions}).
   *
   * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
   */
  static readonly layer = (options: PolicyOptions): Layer.Layer<ClientTrustPolicy> =>
    Layer.succeed(ClientTrustPolicy, ClientTrustPolicy.of({ evaluate: (id) => Effect.sync(() => decide(options, id)) }))

  /**
   * Accept any https client ID, vouching for none (every client shows as unverified).
   *
   * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
   */
  static readonly layerAcceptAny: Layer.Layer<ClientTrustPolicy> = ClientTrustPolicy.layer({ acceptAnyHttps: true })

  /**
   * A custom function, for reputation checks, certificate or age restrictions and the like. A function that throws
   * or rejects is a defect (the request ends in a server error), not a refusal.
   *
   * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
   */
  static readonly layerFunction = (policy: PolicyFunction): Layer.Layer<ClientTrustPolicy> =>
    Layer.succeed(
      ClientTrustPolicy,
      ClientTrustPolicy.of({
        evaluate: (clientId) =>
          Effect.promise(async () => {
            const host = hostOf(clientId)
            const { allowed, verified } = await policy({ clientId, host })
            return { allowed, verified: allowed && verified, host }
          }),
      }),
    )
}
