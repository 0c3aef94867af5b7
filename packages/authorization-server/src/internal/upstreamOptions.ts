import { CanonicalUri, SecureUrl } from "@keyway/core"
import type { ResolvedUpstream, UpstreamOptions } from "../proxy/UpstreamProvider.js"

/**
 * Resolves the upstream options once `Config.upstreamSchema` has checked each member's shape (non-empty `clientId`,
 * positive whole `timeoutMs` and `consentSeconds`): the issuer's transport and the rules between members.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2 (issuer)}
 */
export const resolveUpstream = (
  options: UpstreamOptions,
  allowHttpLoopback: boolean,
): { readonly error: string } | { readonly upstream: ResolvedUpstream } => {
  const issuerUrl = URL.parse(options.issuer)
  if (issuerUrl === null) return { error: `upstream.issuer must be an absolute URL, got ${options.issuer}` }
  if (issuerUrl.search !== "" || issuerUrl.hash !== "" || /[?#]/.test(options.issuer)) {
    return { error: "upstream.issuer must not have a query or fragment (RFC 8414 §2)" }
  }
  if (issuerUrl.protocol === "http:") {
    if (SecureUrl.transportOf(issuerUrl) !== "http-loopback" || !allowHttpLoopback) {
      return {
        error:
          "upstream.issuer must use https (http only on a loopback host with development.allowHttpLoopbackUpstream)",
      }
    }
  } else if (issuerUrl.protocol !== "https:") {
    return { error: `upstream.issuer must use https, got ${issuerUrl.protocol}` }
  }
  let resource: string | undefined
  if (options.resource !== undefined) {
    if (!CanonicalUri.isValid(options.resource)) return { error: "upstream.resource must be an absolute URI" }
    resource = options.resource
  }
  const openid = (options.scope ?? "").split(" ").includes("openid")
  const subjectFrom = options.subjectFrom ?? (openid ? "id_token" : "access_token")
  if (subjectFrom === "id_token" && !openid) {
    return { error: 'upstream.subjectFrom "id_token" needs "openid" in upstream.scope' }
  }
  if (subjectFrom === "access_token" && resource === undefined) {
    return {
      error:
        'upstream.subjectFrom "access_token" needs upstream.resource (the audience of the upstream access token); or set "openid" in upstream.scope, or give a function',
    }
  }
  const timeoutMs = options.timeoutMs ?? 10_000
  const consentSeconds = options.consentSeconds ?? 180 * 24 * 3600
  return {
    upstream: {
      issuer: options.issuer,
      issuerUrl,
      clientId: options.clientId,
      clientSecret: options.clientSecret,
      scope: options.scope,
      resource,
      subjectFrom,
      name: options.name ?? issuerUrl.host,
      timeoutMs,
      consentSeconds,
    },
  }
}
