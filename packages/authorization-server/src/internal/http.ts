import type { OAuthError } from "@keyway/core"
import { Body } from "@keyway/http"

/** Headers that let browser-based clients call an endpoint from any origin (no credentials involved). */
export const CORS_HEADERS: Readonly<Record<string, string>> = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Expose-Headers": "WWW-Authenticate",
}

/** Answer to a CORS preflight for an endpoint that accepts `methods`. */
export const preflight = (methods: string): Response =>
  new Response(null, {
    status: 204,
    headers: {
      ...CORS_HEADERS,
      "Access-Control-Allow-Methods": methods,
      "Access-Control-Allow-Headers": "Authorization, Content-Type",
      "Access-Control-Max-Age": "600",
    },
  })

/** A JSON answer; `no-store` unless `cacheable`. */
export const json = (
  body: unknown,
  init: { status?: number; headers?: Record<string, string>; cacheable?: boolean } = {},
): Response => {
  const headers = new Headers(init.headers)
  if (!headers.has("Content-Type")) headers.set("Content-Type", "application/json")
  if (init.cacheable !== true) {
    headers.set("Cache-Control", "no-store")
    headers.set("Pragma", "no-cache")
  }
  return Body.wholeResponse(JSON.stringify(body), { status: init.status ?? 200, headers })
}

/** An OAuth error as a JSON response with CORS headers (token and registration endpoints). */
export const oauthError = (error: OAuthError.OAuthError, headers: Record<string, string> = {}): Response =>
  error.toResponse({ headers: { ...CORS_HEADERS, ...headers } })

/**
 * The answer to a body over the limit: 413 with the endpoint's OAuth error code (`invalid_request` on the
 * back-channel endpoints, `invalid_client_metadata` on registration, RFC 7591 §3.2.2).
 */
export const payloadTooLarge = (code: "invalid_request" | "invalid_client_metadata", limit: number): Response =>
  json({ error: code, error_description: `the body exceeds ${limit} bytes` }, { status: 413, headers: CORS_HEADERS })

/**
 * Reads the request body as UTF-8 text (malformed UTF-8 is refused), within `limit` bytes.
 *
 * @throws PayloadTooLarge from `@keyway/http`
 */
export const readBody = (request: Request, limit: number): Promise<string> =>
  Body.readText(request, limit, { fatal: true })

/** The media type of a request, lower-cased, without parameters. */
export const mediaType = (request: Request): string =>
  (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase()

/**
 * Parses an `application/x-www-form-urlencoded` body. Parameters sent more than once are refused (RFC 6749 §3.1,
 * §3.2: "Request and response parameters MUST NOT be included more than once").
 */
export const parseForm = (body: string): Map<string, string> | { readonly duplicate: string } => {
  const params = new URLSearchParams(body)
  const out = new Map<string, string>()
  for (const [key, value] of params) {
    if (out.has(key)) return { duplicate: key }
    out.set(key, value)
  }
  return out
}

/** Same rule for query strings. */
export const parseQuery = (url: URL): Map<string, string> | { readonly duplicate: string } => parseForm(url.search)

/** Reads one cookie from the Cookie header. */
export const readCookie = (request: Request, name: string): string | undefined => {
  const header = request.headers.get("cookie")
  if (header === null) return undefined
  for (const part of header.split(";")) {
    const i = part.indexOf("=")
    if (i < 0) continue
    if (part.slice(0, i).trim() === name) return part.slice(i + 1).trim()
  }
  return undefined
}
