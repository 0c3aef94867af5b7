/**
 * Express middleware over the plain face of `@keyway/resource-server`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-2.1 | RFC 6750 §2.1}
 */
import { Body } from "@keyway/http"
import type { ProtectedResource, ProtectedResourceService } from "@keyway/resource-server"
import type { NextFunction, Request, RequestHandler, Response } from "express"

const authenticated = new WeakMap<Request, ProtectedResource.Authenticated>()

/**
 * The authentication of a request that passed {@link requireAuth}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export const authOf = (req: Request): ProtectedResource.Authenticated | undefined => authenticated.get(req)

const send = (res: Response, status: number, headers: Readonly<Record<string, string>>, body: string): void => {
  res.writeHead(status, headers)
  res.end(body)
}

/**
 * Serves the protected resource metadata at its well-known paths and the advertised URL; passes other requests on.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 */
export const metadata =
  (protectedResource: ProtectedResourceService): RequestHandler =>
  (req, res, next) => {
    if (!protectedResource.metadataPaths.includes(req.path)) return next()
    const response = protectedResource.handleMetadata(
      new Request(`http://localhost${req.originalUrl}`, { method: req.method }),
    )
    if (response === undefined) return next()
    res.status(response.status)
    for (const [name, value] of response.headers) res.setHeader(name, value)
    void response.text().then((body) => res.end(req.method === "HEAD" ? undefined : body))
  }

/**
 * Options of {@link requireAuth}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export interface RequireAuthOptions {
  /** Scopes this route needs in addition to the protected resource's own requirements. */
  readonly scopes?: ReadonlyArray<string>
}

// Within the protected resource's body limit: past it the check answers 413 (and the rest is never read).
const readBody = async (req: Request, limit: number): Promise<string> => {
  const declared = req.headers["content-length"]
  const bytes = await Body.readIterable(req, limit, declared === undefined ? undefined : Number(declared))
  return new TextDecoder().decode(bytes)
}

/**
 * Authenticates the request; answers 400/401/403 with the specified challenge, or calls the next handler with the
 * verified token available through {@link authOf}. When per-operation scopes need the JSON-RPC body and no body
 * parser ran before, the body is read here and left parsed in `req.body` for the handlers after it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#access-token-usage | MCP: Access Token Usage}
 */
export const requireAuth = (
  protectedResource: ProtectedResourceService,
  options: RequireAuthOptions = {},
): RequestHandler => {
  const scopes = options.scopes
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined) {
      const pre = protectedResource.preflight(
        new Request(`http://localhost${req.originalUrl}`, {
          method: "OPTIONS",
          headers: req.headers as Record<string, string>,
        }),
      )
      if (pre !== undefined) {
        res.writeHead(pre.status, Object.fromEntries(pre.headers))
        res.end()
        return
      }
    }
    const raw = req.rawHeaders
    const authorization: Array<string> = []
    for (let i = 0; i < raw.length; i += 2)
      if (raw[i]!.toLowerCase() === "authorization") authorization.push(raw[i + 1]!)
    let text: Promise<string> | undefined
    const parsed = (req as { body?: unknown }).body
    protectedResource
      .check(
        {
          method: req.method,
          url: req.originalUrl,
          authorization,
          contentType: req.headers["content-type"],
          contentLength: req.headers["content-length"],
          origin: req.headers.origin,
          header: (name) => req.get(name),
          ...(parsed === undefined || typeof parsed === "string" ? {} : { parsedBody: parsed }),
          readBody: () => {
            if (typeof parsed === "string") return Promise.resolve(parsed)
            text ??= readBody(req, protectedResource.maxBodyBytes).then((body) => {
              try {
                ;(req as { body?: unknown }).body = JSON.parse(body)
              } catch {
                ;(req as { body?: unknown }).body = body
              }
              return body
            })
            return text
          },
        },
        scopes,
      )
      .then((outcome) => {
        if (!outcome.ok) {
          send(res, outcome.rejection.status, outcome.rejection.headers, outcome.rejection.body)
          return
        }
        authenticated.set(req, { token: outcome.token, accessToken: outcome.accessToken })
        for (const [name, value] of Object.entries(protectedResource.corsHeaders(req.headers.origin)))
          res.setHeader(name, value)
        next()
      }, next)
  }
}
