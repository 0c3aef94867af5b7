/**
 * Runs a Web-standard handler on `node:http`, so a plain Node server needs no framework.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch: Request}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-5.3 | RFC 9110 §5.3 (repeated fields)}
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Readable } from "node:stream"

/**
 * A Web-standard request handler.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch: Request}
 */
export type WebHandler = (request: Request) => Response | Promise<Response>

/**
 * Options of {@link toNodeListener}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-7.2 | RFC 9110 §7.2 (Host)}
 */
export interface NodeListenerOptions {
  /** The origin used to build request URLs, e.g. `https://mcp.example.com`; by default from the Host header. */
  readonly origin?: string
}

/**
 * Builds a Web `Request` from a Node request. Every header line is kept, so several `Authorization` lines stay
 * visible (Node's `headers` object would keep only the first).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-5.3 | RFC 9110 §5.3}
 */
export const toWebRequest = (req: IncomingMessage, options: NodeListenerOptions = {}): Request => {
  const raw = req.rawHeaders
  const headers = new Headers()
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!)
  const origin = options.origin ?? `http://${req.headers.host ?? "localhost"}`
  const method = req.method ?? "GET"
  const hasBody = method !== "GET" && method !== "HEAD"
  const init: RequestInit & { duplex?: "half" } = { method, headers }
  if (hasBody) {
    init.body = Readable.toWeb(req) as ReadableStream<Uint8Array>
    init.duplex = "half"
  }
  return new Request(`${origin}${req.url ?? "/"}`, init)
}

/**
 * Writes a Web `Response` to a Node response.
 *
 * @see {@link https://fetch.spec.whatwg.org/#response-class | Fetch: Response}
 */
export const writeWebResponse = async (response: Response, res: ServerResponse): Promise<void> => {
  const headers: Record<string, string | Array<string>> = {}
  for (const [name, value] of response.headers) {
    if (name === "set-cookie") continue
    headers[name] = value
  }
  const cookies = response.headers.getSetCookie()
  if (cookies.length > 0) headers["set-cookie"] = cookies
  res.writeHead(response.status, response.statusText, headers)
  if (response.body === null) {
    res.end()
    return
  }
  const reader = response.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    if (!res.write(value)) await new Promise<void>((resolve) => res.once("drain", resolve))
  }
  res.end()
}

/**
 * A `node:http` request listener that serves a Web handler.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch: Request}
 */
export const toNodeListener =
  (handler: WebHandler, options: NodeListenerOptions = {}) =>
  (req: IncomingMessage, res: ServerResponse): void => {
    Promise.resolve()
      .then(() => handler(toWebRequest(req, options)))
      .then((response) => writeWebResponse(response, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" })
        res.end()
      })
  }
