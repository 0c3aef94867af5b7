/**
 * Serving the protected resource metadata document (RFC 9728 §3) at its paths: the path-specific and root well-known
 * URLs and the URL advertised in challenges. GET and HEAD answer the document, OPTIONS the allowed methods (and a CORS
 * preflight when CORS is on), anything else 405.
 */
import type { Config } from "./config.js"

const ALLOW = "GET, HEAD, OPTIONS"

/** The metadata response when `url` targets a metadata path, otherwise undefined. */
export type MetadataServer = (request: Request, url?: string) => Response | undefined

export const makeMetadataServer = (config: Config): MetadataServer => {
  const documentHeaders = (): Record<string, string> => {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "cache-control": `public, max-age=${config.metadataMaxAge}`,
    }
    // The document is public: any origin may read it whatever the origin list of the protected endpoints.
    if (config.cors !== undefined) headers["access-control-allow-origin"] = "*"
    return headers
  }

  return (request, url = request.url) => {
    // The path is cut out of the URL by hand: parsing a URL costs more than the rest of a cached request.
    const start = url.indexOf("/", url.indexOf("//") + 2)
    const end = url.indexOf("?", start)
    const path = start === -1 ? "/" : url.slice(start, end === -1 ? undefined : end)
    if (!config.metadataPaths.has(path)) return undefined
    const method = request.method
    if (method === "GET" || method === "HEAD") {
      return new Response(method === "HEAD" ? null : config.metadataBody, { status: 200, headers: documentHeaders() })
    }
    if (method === "OPTIONS") {
      const headers: Record<string, string> = { allow: ALLOW }
      if (config.cors !== undefined) {
        headers["access-control-allow-origin"] = "*"
        headers["access-control-allow-methods"] = ALLOW
        headers["access-control-allow-headers"] = request.headers.get("access-control-request-headers") ?? "*"
        headers["access-control-max-age"] = "86400"
      }
      return new Response(null, { status: 204, headers })
    }
    return new Response(null, { status: 405, headers: { allow: ALLOW } })
  }
}
