// Request admission: the checks every request passes before a handler runs (header count, Host, request-target,
// method, body length), and the Web `Request` made of a request that passed them.
import type { IncomingMessage, ServerResponse } from "node:http"
import { PayloadTooLarge } from "../Body.js"
import { classifyMethod, isValidHost, parseTarget } from "../RequestLine.js"
import { DEFAULT_ALLOW, type Resolved } from "./options.js"
import { refuse } from "./respond.js"

const validHosts = new Set<string>()

const hostProblem = (req: IncomingMessage): string | undefined => {
  const raw = req.rawHeaders
  let host: string | undefined
  let count = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length === 4 && (name === "Host" || name.toLowerCase() === "host")) {
      count++
      host = raw[i + 1]!
    }
  }
  if (count === 0) return "the Host header is missing"
  if (count > 1) return "the request has more than one Host header"
  if (validHosts.has(host!)) return undefined
  if (!isValidHost(host!)) return "the Host header is not a valid host[:port]"
  if (validHosts.size < 64) validHosts.add(host!)
  return undefined
}

/**
 * A readable Web stream over a node:http request body that stops at `limit` bytes: the first byte past it errors
 * the stream with {@link PayloadTooLarge}, reports it through `onFailure` and stops reading from the socket.
 */
const bodyStream = (
  req: IncomingMessage,
  limit: number,
  onFailure: (kind: "too-large" | "incomplete") => void,
): ReadableStream<Uint8Array> => {
  let received = 0
  let settled = false
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        req.on("data", (chunk: Buffer) => {
          if (settled) return
          received += chunk.byteLength
          if (received > limit) {
            settled = true
            req.pause()
            onFailure("too-large")
            controller.error(new PayloadTooLarge({ limit }))
            return
          }
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength))
          if ((controller.desiredSize ?? 0) <= 0) req.pause()
        })
        req.once("end", () => {
          if (settled) return
          settled = true
          controller.close()
        })
        // An aborted request emits "error" ("aborted") and then "close"; either way the body is incomplete.
        const incomplete = () => {
          if (settled || req.complete) return
          settled = true
          onFailure("incomplete")
          controller.error(new TypeError("the request body ended before it was complete"))
        }
        req.once("close", incomplete)
        req.once("error", incomplete)
      },
      pull() {
        req.resume()
      },
      cancel() {
        // The handler does not want the rest: stop reading; the connection closes after the response.
        settled = true
        req.pause()
      },
    },
    { highWaterMark: 64 * 1024, size: (chunk) => chunk.byteLength },
  )
}

/**
 * A Web `Request` whose `signal` aborts when the client goes away before the response is finished. The signal is
 * made on first use: a signal given to the `Request` constructor costs more than the rest of the request's
 * conversion, and most handlers never look at it.
 */
class NodeRequest extends Request {
  readonly #res: ServerResponse
  #signal: AbortSignal | undefined
  constructor(url: string, init: RequestInit, res: ServerResponse) {
    super(url, init)
    this.#res = res
  }
  static {
    Object.defineProperty(NodeRequest.prototype, "signal", {
      configurable: true,
      enumerable: true,
      get(this: NodeRequest) {
        return this.#abortSignal()
      },
    })
  }
  #abortSignal(): AbortSignal {
    if (this.#signal !== undefined) return this.#signal
    const controller = new AbortController()
    const res = this.#res
    if (res.destroyed && !res.writableFinished) controller.abort()
    else
      res.once("close", () => {
        if (!res.writableFinished) controller.abort()
      })
    this.#signal = controller.signal
    return this.#signal
  }
}

// The peer address of each request the bridge made, for clientAddress: a Web Request has no place for it, and a
// header would be something a caller could forge.
const addresses = new WeakMap<Request, string>()

/**
 * The address of the peer that sent `request` (the TCP socket's remote address, e.g. `127.0.0.1` or `::1`), for a
 * request made by this bridge; `undefined` for any other `Request` (one built by another runtime, or a clone). It never
 * reads a header: behind a reverse proxy it is the proxy's address, and taking the client's from `Forwarded` or
 * `X-Forwarded-For` is a decision for the deployment, which alone knows which proxies to trust.
 *
 * @see {@link https://nodejs.org/api/net.html#socketremoteaddress | node:net socket.remoteAddress}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7239.html#section-8.1 | RFC 7239 §8.1 (Forwarded can be forged)}
 */
export const clientAddress = (request: Request): string | undefined => addresses.get(request)

/**
 * Bodies declared (`Content-Length`) this long or shorter are read whole before the handler runs, and its `Request`
 * carries them as bytes: a Web stream over a small body costs more than the rest of the request's conversion. Longer
 * and chunked bodies reach the handler as a stream, read as it reads them.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-8.6 | RFC 9110 §8.6 (Content-Length)}
 */
export const BUFFERED_BODY_BYTES = 64 * 1024

/** A request that passed the checks of this module, to be made into a Web `Request`. */
export interface Prepared {
  readonly url: string
  readonly init: RequestInit & { duplex?: "half"; body?: BodyInit }
  /** The declared length of a body to read whole first. */
  readonly buffer: number | undefined
}

/** Reads a body of the declared `length` whole; `undefined` when the request ends before it is complete. */
export const readWhole = (req: IncomingMessage, length: number, done: (body: Uint8Array | undefined) => void): void => {
  const chunks: Array<Buffer> = []
  let received = 0
  let settled = false
  const finish = (body: Uint8Array | undefined) => {
    if (settled) return
    settled = true
    req.off("data", onData)
    done(body)
  }
  const onData = (chunk: Buffer) => {
    chunks.push(chunk)
    received += chunk.byteLength
  }
  req.on("data", onData)
  req.once("end", () =>
    finish(received === length ? (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received)) : undefined),
  )
  // An aborted request emits "error" ("aborted") and then "close"; either way the body is incomplete.
  const incomplete = () => {
    if (!req.complete) finish(undefined)
  }
  req.once("close", incomplete)
  req.once("error", incomplete)
}

/**
 * The checks every request passes before any handler runs: header count, Host, request-target and method. Returns
 * the request-target in origin form (path and query), or `undefined` when it answered the request itself (a refusal).
 */
export const admit = (req: IncomingMessage, res: ServerResponse, options: Resolved): string | undefined => {
  if (req.rawHeaders.length > 2 * options.maxHeaders) {
    refuse(res, 431, `more than ${options.maxHeaders} header fields`, { close: true })
    return undefined
  }
  const host = hostProblem(req)
  if (host !== undefined) {
    refuse(res, 400, host, { close: true })
    return undefined
  }
  // Express strips its mount path from req.url and keeps the full one in originalUrl.
  const rawTarget = (req as IncomingMessage & { readonly originalUrl?: string }).originalUrl ?? req.url ?? ""
  const target = parseTarget(rawTarget)
  const method = req.method ?? "GET"
  if (target._tag === "Invalid") {
    refuse(res, 400, target.reason, { close: true })
    return undefined
  }
  if (target._tag === "Asterisk") {
    if (method === "OPTIONS") {
      res.writeHead(204, { allow: DEFAULT_ALLOW })
      res.end()
    } else refuse(res, 400, "the request-target * is only for OPTIONS", { close: true })
    return undefined
  }
  // The usual methods skip the classification's case folding and lookups.
  const kind = method === "GET" || method === "POST" ? "handled" : classifyMethod(method)
  if (kind !== "handled") {
    if (kind === "unknown") {
      refuse(res, 501, `the method ${method} is not implemented`, { close: true })
      return undefined
    }
    const q = target.path.indexOf("?")
    const allow = options.allow(q === -1 ? target.path : target.path.slice(0, q))
    if (allow === undefined) refuse(res, 404, "no such resource", { close: true })
    else refuse(res, 405, `the method ${method} is not allowed`, { headers: { allow }, close: true })
    return undefined
  }
  return target.path
}

/**
 * Whether the request announces a body (chunked, or a non-zero `Content-Length`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-6.3 | RFC 9112 §6.3 (message body length)}
 */
export const announcesBody = (req: IncomingMessage): boolean =>
  req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] ?? "0") !== "0"

/**
 * Checks a node:http request and prepares its Web `Request`; `undefined` when it answered the request itself (a
 * refusal).
 */
export const prepare = (
  req: IncomingMessage,
  res: ServerResponse,
  options: Resolved,
  onBodyFailure: (kind: "too-large" | "incomplete") => void,
): Prepared | undefined => {
  const path = admit(req, res, options)
  if (path === undefined) return undefined
  const method = req.method ?? "GET"
  const origin = options.publicOrigin?.() ?? `http://${req.headers.host}`
  const headers = new Headers()
  const raw = req.rawHeaders
  try {
    for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!)
  } catch {
    refuse(res, 400, "a header field is not valid", { close: true })
    return undefined
  }
  const init: Prepared["init"] = { method, headers }
  let buffer: number | undefined
  if (announcesBody(req)) {
    if (method === "GET" || method === "HEAD") {
      // A Web request cannot carry it and nobody reads it: close the connection instead of draining it.
      res.shouldKeepAlive = false
    } else {
      const declared = req.headers["content-length"]
      if (declared !== undefined && Number(declared) > options.maxBodyBytes) {
        // Nothing of it is read: the handler still answers (a 413 of its own, in its own format, is kept; anything
        // else becomes the bridge's 413) and the connection closes afterwards.
        onBodyFailure("too-large")
        const limit = options.maxBodyBytes
        init.body = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.error(new PayloadTooLarge({ limit }))
          },
        })
      } else if (declared !== undefined && Number(declared) <= BUFFERED_BODY_BYTES) {
        buffer = Number(declared)
      } else {
        init.body = bodyStream(req, options.maxBodyBytes, onBodyFailure)
      }
      if (buffer === undefined) init.duplex = "half"
    }
  }
  return { url: `${origin}${path}`, init, buffer }
}

/** The Web `Request` of a prepared request; `undefined` when its URL is not valid, answered 400. */
export const toRequest = (req: IncomingMessage, res: ServerResponse, prepared: Prepared): Request | undefined => {
  try {
    const request = new NodeRequest(prepared.url, prepared.init, res)
    const address = req.socket.remoteAddress
    if (address !== undefined) addresses.set(request, address)
    return request
  } catch {
    refuse(res, 400, "the request-target does not form a valid URL", { close: true })
    return undefined
  }
}
