/**
 * The protected resource as a node:http handler, with no Web `Request` or `Response` on the way: the bridge's checks
 * (`@keyway/http/node`), then the protected resource metadata, CORS preflights and authentication, and the handler
 * only for authenticated requests with enough scope, given the verified token and the body read within
 * `maxBodyBytes`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-2.1 | RFC 6750 §2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3 | RFC 9728 §3}
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Body, PayloadTooLarge } from "@keyway/http"
import { announcesBody, type MarkedNodeHandler, nodeHandler, writeResponse } from "@keyway/http/node"
import type {
  Authenticated,
  InboundRequest,
  Outcome,
  ProtectedResourceService,
  Rejection,
} from "../ProtectedResource.js"

/**
 * What a {@link ProtectedNodeHandler} is given: the verified token, the raw access token (never to be forwarded
 * upstream) and the request body.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-5.2 | OAuth 2.1 §5.2}
 */
export interface NodeAuthenticated extends Authenticated {
  /**
   * The request body, read whole within `maxBodyBytes` (a larger one is answered 413 and the handler never runs);
   * `undefined` for a request without one, and for GET and HEAD, whose bodies are not read. The request stream has
   * been read to its end when there was a body.
   */
  readonly body: Uint8Array | undefined
}

/**
 * A node:http handler that runs only for authenticated requests with enough scope. An exception it throws or a
 * promise it rejects is a 500 without detail, reported through the bridge's `onError`.
 *
 * @see {@link https://nodejs.org/api/http.html#event-request | node:http request event}
 */
export type ProtectedNodeHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  auth: NodeAuthenticated,
) => void | Promise<void>

/**
 * Options of {@link protectNode}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1 | RFC 6750 §3.1}
 */
export interface ProtectNodeOptions {
  /** Scopes the handler needs in addition to the protected resource's own requirements. */
  readonly scopes?: ReadonlyArray<string>
}

const EMPTY = new Uint8Array(0)

/** Bodies declared this long or shorter are drained after a refusal; longer or chunked ones close the connection. */
const DRAIN_BYTES = 64 * 1024

// A node:http request as the check sees it. A class, so the per-request object carries no closures; headers are read
// only when the check needs them, and the body at most once.
class NodeInbound implements InboundRequest {
  #bytes: Promise<Uint8Array> | undefined
  constructor(
    readonly req: IncomingMessage,
    readonly url: string,
    readonly method: string,
    readonly authorization: string | ReadonlyArray<string> | null,
    readonly limit: number,
    readonly hasBody: boolean,
  ) {}
  get contentType(): string | undefined {
    return this.req.headers["content-type"]
  }
  get contentLength(): string | undefined {
    return this.req.headers["content-length"]
  }
  get origin(): string | undefined {
    return this.req.headers.origin
  }
  header(name: string): string | undefined {
    const value = this.req.headers[name.toLowerCase()]
    return Array.isArray(value) ? value.join(", ") : value
  }
  /** Whether reading the body failed other than by its size (the caller went away, or broke its framing). */
  broken = false
  bytes(): Promise<Uint8Array> {
    if (this.#bytes === undefined) {
      const declared = this.req.headers["content-length"]
      this.#bytes = this.hasBody
        ? Body.readIterable(this.req, this.limit, declared === undefined ? undefined : Number(declared)).catch(
            (error: unknown) => {
              if (!(error instanceof PayloadTooLarge)) this.broken = true
              throw error
            },
          )
        : Promise.resolve(EMPTY)
    }
    return this.#bytes
  }
  readBody(): Promise<string> {
    return this.bytes().then((bytes) => new TextDecoder().decode(bytes))
  }
}

// Every Authorization line, as node:http keeps only the first in `req.headers`: two are refused, not one of them used.
const authorizationOf = (raw: ReadonlyArray<string>): string | ReadonlyArray<string> | null => {
  let first: string | undefined
  let all: Array<string> | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length === 13 && name.toLowerCase() === "authorization") {
      if (first === undefined) {
        first = raw[i + 1]!
      } else {
        all ??= [first]
        all.push(raw[i + 1]!)
      }
    }
  }
  return all ?? first ?? null
}

const send = (req: IncomingMessage, res: ServerResponse, rejection: Rejection): void => {
  // A body left unread is drained for the next request only when it is small and declared.
  if (!req.complete) {
    const declared = Number(req.headers["content-length"] ?? Number.NaN)
    if (!(declared <= DRAIN_BYTES) || req.headers["transfer-encoding"] !== undefined) res.shouldKeepAlive = false
  }
  res.writeHead(rejection.status, {
    ...rejection.headers,
    "content-length": String(Buffer.byteLength(rejection.body)),
  })
  res.end(rejection.body)
}

// The request stream failed (the caller went away, or broke the framing of its body): the caller's doing, not a
// failure of the server. node:http has mostly answered it already (400) and closed the connection.
const incomplete = (req: IncomingMessage, res: ServerResponse): void => {
  if (res.headersSent || res.destroyed) return
  send(req, res, {
    status: 400,
    headers: { "content-type": "application/json", "cache-control": "no-store", connection: "close" },
    body: JSON.stringify({
      error: "invalid_request",
      error_description: "The request body ended before it was complete",
    }),
  })
}

// The answers that need no authentication (the metadata document, CORS preflights) are rare: they go through the
// protected resource's Web-standard answers.
const answerPublic = (
  protectedResource: ProtectedResourceService,
  req: IncomingMessage,
  res: ServerResponse,
  target: string,
  method: string,
  preflight: boolean,
): Promise<void> | undefined => {
  const headers = new Headers()
  for (const name of ["origin", "access-control-request-method", "access-control-request-headers"]) {
    const value = req.headers[name]
    if (typeof value === "string") headers.set(name, value)
  }
  // Only the path, the method and these headers matter to the answers: the origin is a placeholder.
  const request = new Request(`http://localhost${target}`, { method, headers })
  const response = preflight ? protectedResource.preflight(request) : protectedResource.handleMetadata(request)
  if (response === undefined) return undefined
  if (!req.complete) res.shouldKeepAlive = false
  return writeResponse(response, res, method === "HEAD")
}

/**
 * Wraps a node:http handler, the way {@link ProtectedResourceService.protect} wraps a Web one: serves the protected
 * resource metadata and CORS preflights, authenticates everything else and calls `handler` only for authenticated
 * requests with enough scope, with the body read within `maxBodyBytes`. Refusals are the same as `protect`'s, status,
 * headers and body. Give the result to `createNodeServer`, `toNodeListener` or `listen`, which apply their checks
 * (Host, request-target, methods, declared body length) first; with a token verified before, a request costs no Web
 * object, promise or microtask until the handler runs.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6750.html#section-3 | RFC 6750 §3}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#access-token-usage | MCP: Access Token Usage}
 */
export const protectNode = (
  protectedResource: ProtectedResourceService,
  handler: ProtectedNodeHandler,
  options: ProtectNodeOptions = {},
): MarkedNodeHandler => {
  const scopes = options.scopes
  const limit = protectedResource.maxBodyBytes
  const metadataPaths = new Set(protectedResource.metadataPaths)

  const finish = (
    req: IncomingMessage,
    res: ServerResponse,
    inbound: NodeInbound,
    outcome: Outcome,
  ): void | Promise<void> => {
    if (!outcome.ok) {
      send(req, res, outcome.rejection)
      return
    }
    const origin = req.headers.origin
    if (origin !== undefined) {
      for (const [name, value] of Object.entries(protectedResource.corsHeaders(origin))) res.setHeader(name, value)
    }
    const { token, accessToken } = outcome
    const method = inbound.method
    if (!inbound.hasBody || method === "GET" || method === "HEAD") {
      return handler(req, res, { token, accessToken, body: undefined })
    }
    return inbound.bytes().then(
      (body) => handler(req, res, { token, accessToken, body }),
      (error: unknown) => {
        if (error instanceof PayloadTooLarge) {
          send(req, res, protectedResource.payloadTooLarge(req.headers.origin))
          return
        }
        incomplete(req, res)
      },
    )
  }

  return nodeHandler((req, res, target) => {
    const method = req.method ?? "GET"
    const q = target.indexOf("?")
    if (metadataPaths.has(q === -1 ? target : target.slice(0, q))) {
      const answered = answerPublic(protectedResource, req, res, target, method, false)
      if (answered !== undefined) return answered
    }
    if (method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined) {
      const answered = answerPublic(protectedResource, req, res, target, method, true)
      if (answered !== undefined) return answered
    }
    const inbound = new NodeInbound(req, target, method, authorizationOf(req.rawHeaders), limit, announcesBody(req))
    const outcome = protectedResource.checkNow(inbound, scopes)
    return outcome instanceof Promise
      ? outcome.then(
          (settled) => finish(req, res, inbound, settled),
          (error: unknown) => {
            // The check read the body (for per-operation scopes) and the read failed: the caller's doing.
            if (inbound.broken) incomplete(req, res)
            else throw error
          },
        )
      : finish(req, res, inbound, outcome)
  })
}
