/**
 * The one bridge between `node:http` and Web-standard handlers `(request: Request) => Promise<Response>`, used by
 * every Keyway server on Node. Whatever arrives, the process keeps serving: a bad `Host` or request-target is a 400,
 * a method a Web `Request` cannot carry a 405, an unknown method a 501, a body over the limit a 413 (before more of
 * it is read), and a handler's exception a 500 without detail, reported once through `onError`.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch Standard (Request, Response)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-3 | RFC 9112 §3}
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { DEFAULT_MAX_BODY_BYTES, PayloadTooLarge } from "./Body.js"
import { classifyMethod, isValidHost, parseTarget } from "./RequestLine.js"

/**
 * A Web-standard request handler.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch Standard (Request)}
 */
export type WebHandler = (request: Request) => Response | Promise<Response>

/**
 * A node:http handler the bridge runs after its checks (header count, Host, request-target, method, a declared body
 * over the limit), with no Web objects in between: `target` is the validated request-target in origin form (path and
 * query). It reads the body itself, if it wants it, and answers on `res`: a body without a declared length is not
 * limited by the bridge, so the handler reads it within a limit of its own (`Body.readIterable`). An exception it
 * throws or a promise it rejects is a 500 without detail, reported through `onError`. Mark it with
 * {@link nodeHandler} to give it to {@link createNodeServer}, {@link toNodeListener} or {@link listen} in place of a
 * Web handler.
 *
 * @see {@link https://nodejs.org/api/http.html#event-request | node:http request event}
 */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse, target: string) => void | Promise<void>

declare const nodeHandlerBrand: unique symbol

/** A {@link NodeHandler} marked by {@link nodeHandler}. */
export type MarkedNodeHandler = NodeHandler & { readonly [nodeHandlerBrand]: true }

/** What the bridge serves: a Web handler, or a node:http handler marked by {@link nodeHandler}. */
export type Handler = WebHandler | MarkedNodeHandler

const nodeHandlers = new WeakSet<object>()

/**
 * Marks a node:http handler for the bridge, which then runs it with its checks and without building a Web `Request`
 * or reading a Web `Response`: the fastest way to serve on node:http when the handler has no use for Web objects.
 *
 * @see {@link https://nodejs.org/api/http.html#event-request | node:http request event}
 */
export const nodeHandler = (handler: NodeHandler): MarkedNodeHandler => {
  nodeHandlers.add(handler)
  return handler as MarkedNodeHandler
}

/**
 * Options of the bridge.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-3.2 | RFC 9112 §3.2 (Host)}
 */
export interface BridgeOptions {
  /**
   * The server's public origin (`https://mcp.example.com`; a path is ignored), or a function returning it once it is
   * known. When set, request URLs are built from it and never from the `Host` header, so nothing a caller sends in
   * `Host` can reach a URL the server builds. Without it, `http://` + the (validated) Host header.
   */
  readonly publicUrl?: string | URL | (() => string | URL)
  /** Largest request body, in bytes; 413 beyond. Default 4 MiB (`DEFAULT_MAX_BODY_BYTES` of `@keyway/http`). */
  readonly maxBodyBytes?: number
  /** Most header fields a request may have; 431 beyond. Default 200. */
  readonly maxHeaders?: number
  /**
   * The `Allow` value for a path, used in the 405 answer to a method no Web handler can serve (TRACE, TRACK,
   * CONNECT); `undefined` answers 404 (no such resource). Default: `GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`.
   */
  readonly allow?: (pathname: string) => string | undefined
  /** Called once for each exception a handler throws (or each failure writing its response). Default: stderr. */
  readonly onError?: (error: unknown) => void
}

/**
 * Options of {@link createNodeServer}: the bridge's, and how long a request may take to arrive.
 *
 * @see {@link https://nodejs.org/api/http.html#httpcreateserveroptions-requestlistener | node:http createServer}
 */
export interface ServerOptions extends BridgeOptions {
  /**
   * Milliseconds a client has to send a whole request (headers and body) before it is answered 408 and closed, so a
   * slow or stalled sender cannot hold a connection. Default 30 000; the headers alone get at most 20 000.
   */
  readonly requestTimeout?: number
}

/**
 * Where to listen, and the server options.
 *
 * @see {@link https://nodejs.org/api/http.html#serverlisten | node:http server.listen}
 */
export interface ListenOptions extends ServerOptions {
  /** 0 (the default) picks a free port. */
  readonly port?: number
  /** `127.0.0.1` by default. */
  readonly host?: string
}

/**
 * A running server.
 *
 * @see {@link https://nodejs.org/api/http.html#class-httpserver | node:http Server}
 */
export interface RunningServer {
  /** `http://host:port` the server is reachable at. */
  readonly url: string
  readonly port: number
  readonly server: Server
  /** Stops accepting connections, closes open ones and resolves when the server is closed. */
  readonly close: () => Promise<void>
}

const DEFAULT_ALLOW = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

interface Resolved {
  readonly publicOrigin: (() => string) | undefined
  readonly maxBodyBytes: number
  readonly maxHeaders: number
  readonly allow: (pathname: string) => string | undefined
  readonly onError: (error: unknown) => void
}

const defaultOnError = (error: unknown): void => {
  const detail = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error)
  process.stderr.write(`keyway: a request handler failed: ${detail}\n`)
}

const originOf = (value: string | URL): string => {
  const url = new URL(value)
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`publicUrl must be an http or https URL, got ${JSON.stringify(String(value))}`)
  }
  return url.origin
}

const resolveOptions = (options: BridgeOptions): Resolved => {
  const publicUrl = options.publicUrl
  let publicOrigin: (() => string) | undefined
  if (typeof publicUrl === "function") {
    let cached: { readonly from: string | URL; readonly origin: string } | undefined
    publicOrigin = () => {
      const value = publicUrl()
      if (cached?.from !== value) cached = { from: value, origin: originOf(value) }
      return cached.origin
    }
  } else if (publicUrl !== undefined) {
    const origin = originOf(publicUrl)
    publicOrigin = () => origin
  }
  const positive = (name: string, value: number | undefined, fallback: number): number => {
    if (value === undefined) return fallback
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer`)
    return value
  }
  return {
    publicOrigin,
    maxBodyBytes: positive("maxBodyBytes", options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES),
    maxHeaders: positive("maxHeaders", options.maxHeaders, 200),
    allow: options.allow ?? (() => DEFAULT_ALLOW),
    onError: options.onError ?? defaultOnError,
  }
}

const REASONS: Readonly<Record<number, string>> = {
  400: "Bad Request",
  404: "Not Found",
  405: "Method Not Allowed",
  413: "Content Too Large",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  501: "Not Implemented",
}

/** A short plain-text refusal; the connection closes when the request body was not read. */
const refuse = (
  res: ServerResponse,
  status: number,
  detail: string,
  options: { readonly headers?: Record<string, string>; readonly close?: boolean } = {},
): void => {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = `${REASONS[status] ?? "Error"}: ${detail}\n`
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": String(Buffer.byteLength(body)),
    "cache-control": "no-store",
    ...(options.close === true ? { connection: "close" } : {}),
    ...options.headers,
  })
  res.end(body)
}

// Hosts seen valid before: the check is skipped for them (almost every request repeats its server's Host).
const validHosts = new Set<string>()

const hostProblem = (req: IncomingMessage): string | undefined => {
  const raw = req.rawHeaders
  let host: string | undefined
  let count = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length === 4 && name.toLowerCase() === "host") {
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

/** A body given whole ends within this many microtask turns after its first chunk (a string, bytes, JSON: one). */
const SETTLE_TURNS = 4

/** Bytes of a body gathered for one write at most; a longer body that is ready at once is streamed from there. */
const MAX_GATHERED_BYTES = 64 * 1024

// Statuses whose responses have no content (RFC 9110 §8.6, §15.3.5, §15.4.5): no Content-Length is added to them.
const noContent = (status: number): boolean => status < 200 || status === 204 || status === 304

/**
 * Writes a Web `Response` to a node:http response. A body that is complete as soon as it is read (made from a string,
 * bytes or JSON, or a stream whose producer has closed it) is written with its headers and a `Content-Length` in one
 * write; any other body (an event stream, whose producer waits for events) is streamed with back-pressure as it
 * comes, and a client that goes away cancels it (an event stream's producer learns it through the cancellation).
 *
 * @see {@link https://fetch.spec.whatwg.org/#response-class | Fetch Standard (Response)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-6.3 | RFC 9112 §6.3 (message body length)}
 */
export const writeResponse = async (response: Response, res: ServerResponse, head = false): Promise<void> => {
  const headers: Record<string, string | Array<string>> = {}
  for (const [name, value] of response.headers) {
    if (name !== "set-cookie") headers[name] = value
  }
  const cookies = response.headers.getSetCookie()
  if (cookies.length > 0) headers["set-cookie"] = cookies
  const writeHead = () => {
    if (response.statusText === "") res.writeHead(response.status, headers)
    else res.writeHead(response.status, response.statusText, headers)
  }
  const body = response.body
  if (body === null || head) {
    if (body !== null) await body.cancel().catch(() => undefined)
    writeHead()
    res.end()
    return
  }
  const reader = body.getReader()
  const onClose = () => {
    if (!res.writableFinished) void reader.cancel().catch(() => undefined)
  }
  let watching = false
  try {
    // Gather what is ready at once: each chunk the producer has queued or makes within a few microtask turns (no
    // timer: a body given whole ends in one).
    const gathered: Array<Uint8Array> = []
    let size = 0
    let complete = false
    let next = reader.read()
    for (;;) {
      let settled: ReadableStreamReadResult<Uint8Array> | undefined
      let rejected = false
      next.then(
        (result) => {
          settled = result
        },
        () => {
          rejected = true
        },
      )
      for (let turn = 0; turn < SETTLE_TURNS && settled === undefined && !rejected; turn++) await undefined
      if (rejected) await next
      if (settled === undefined) break
      const result: ReadableStreamReadResult<Uint8Array> = settled
      if (result.done) {
        complete = true
        break
      }
      gathered.push(result.value)
      size += result.value.byteLength
      next = reader.read()
      if (size > MAX_GATHERED_BYTES) break
    }
    if (complete) {
      if (res.destroyed) return
      if (!noContent(response.status) && !("content-length" in headers) && !("transfer-encoding" in headers)) {
        headers["content-length"] = String(size)
      }
      writeHead()
      // As a latin1 string, byte for byte: node:http sends a string body in one write with the head, a Buffer in a
      // second buffer of a writev, which costs several times the write on loopback (docs/benchmarks.md).
      const whole = gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, size)
      res.end(Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength).toString("latin1"), "latin1")
      return
    }
    // A stream: what is gathered goes out now, the rest as it comes, until the client goes away.
    res.once("close", onClose)
    watching = true
    if (res.destroyed) {
      onClose()
      return
    }
    writeHead()
    for (const chunk of gathered) res.write(chunk)
    for (;;) {
      const { done, value } = await next
      if (done) break
      if (res.destroyed) return
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off("drain", done)
            res.off("close", done)
            resolve()
          }
          res.on("drain", done)
          res.on("close", done)
        })
      }
      next = reader.read()
    }
    res.end()
  } finally {
    if (watching) res.off("close", onClose)
  }
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
interface Prepared {
  readonly url: string
  readonly init: RequestInit & { duplex?: "half"; body?: BodyInit }
  /** The declared length of a body to read whole first. */
  readonly buffer: number | undefined
}

/** Reads a body of the declared `length` whole; `undefined` when the request ends before it is complete. */
const readWhole = (req: IncomingMessage, length: number, done: (body: Uint8Array | undefined) => void): void => {
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
const admit = (req: IncomingMessage, res: ServerResponse, options: Resolved): string | undefined => {
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
  const kind = classifyMethod(method)
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
const prepare = (
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
const toRequest = (req: IncomingMessage, res: ServerResponse, prepared: Prepared): Request | undefined => {
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

/**
 * A node:http `(req, res)` listener that runs a Web handler (or a {@link nodeHandler}), applying every check of this
 * module.
 *
 * @see {@link https://nodejs.org/api/http.html#event-request | node:http request event}
 */
export const toNodeListener: {
  (handler: WebHandler, options?: BridgeOptions): (req: IncomingMessage, res: ServerResponse) => void
  (handler: MarkedNodeHandler, options?: BridgeOptions): (req: IncomingMessage, res: ServerResponse) => void
  (handler: Handler, options?: BridgeOptions): (req: IncomingMessage, res: ServerResponse) => void
} = (handler: Handler, options: BridgeOptions = {}) => listenerFor(handler, resolveOptions(options))

const listenerFor = (handler: Handler, resolved: Resolved): ((req: IncomingMessage, res: ServerResponse) => void) =>
  nodeHandlers.has(handler)
    ? nodeListenerFor(handler as NodeHandler, resolved)
    : webListenerFor(handler as WebHandler, resolved)

const nodeListenerFor =
  (handler: NodeHandler, resolved: Resolved) =>
  (req: IncomingMessage, res: ServerResponse): void => {
    const target = admit(req, res, resolved)
    if (target === undefined) return
    if (announcesBody(req)) {
      const method = req.method
      if (method === "GET" || method === "HEAD") res.shouldKeepAlive = false
      const declared = req.headers["content-length"]
      if (declared !== undefined && Number(declared) > resolved.maxBodyBytes) {
        refuse(res, 413, `the request body exceeds the limit of ${resolved.maxBodyBytes} bytes`, { close: true })
        return
      }
    }
    const failed = (error: unknown) => {
      resolved.onError(error)
      if (res.headersSent) res.destroy()
      else refuse(res, 500, "the server could not answer this request", { close: true })
    }
    try {
      const done = handler(req, res, target)
      if (done !== undefined) done.then(undefined, failed)
    } catch (error) {
      failed(error)
    }
  }

const webListenerFor =
  (handler: WebHandler, resolved: Resolved) =>
  (req: IncomingMessage, res: ServerResponse): void => {
    let bodyFailure: "too-large" | "incomplete" | undefined
    const prepared = prepare(req, res, resolved, (kind) => {
      bodyFailure ??= kind
    })
    if (prepared === undefined) return
    const failed = (error: unknown) => {
      if (bodyFailure === "too-large") {
        refuse(res, 413, `the request body exceeds the limit of ${resolved.maxBodyBytes} bytes`, { close: true })
      } else if (bodyFailure === "incomplete") {
        refuse(res, 400, "the request body ended before it was complete", { close: true })
      } else {
        resolved.onError(error)
        if (res.headersSent) res.destroy()
        else refuse(res, 500, "the server could not answer this request", { close: true })
      }
    }
    const run = (request: Request): void => {
      let answer: Response | Promise<Response>
      try {
        answer = handler(request)
      } catch (error) {
        failed(error)
        return
      }
      Promise.resolve(answer).then((response) => {
        // A handler that answered as if the body were fine although reading it failed gets the specified answer
        // (its own 413 is kept: it may say more, in the handler's format).
        if (
          bodyFailure !== undefined &&
          !res.headersSent &&
          !(bodyFailure === "too-large" && response.status === 413)
        ) {
          void response.body?.cancel().catch(() => undefined)
          failed(undefined)
          return
        }
        // A body nobody read to its end is not drained for the next request: the connection closes instead.
        if (!req.complete) res.shouldKeepAlive = false
        return writeResponse(response, res, req.method === "HEAD").catch(failed)
      }, failed)
    }
    if (prepared.buffer === undefined) {
      const request = toRequest(req, res, prepared)
      if (request !== undefined) run(request)
      return
    }
    readWhole(req, prepared.buffer, (body) => {
      if (body === undefined) {
        bodyFailure ??= "incomplete"
        failed(undefined)
        return
      }
      prepared.init.body = body as Uint8Array<ArrayBuffer>
      const request = toRequest(req, res, prepared)
      if (request !== undefined) run(request)
    })
  }

/**
 * A node:http server around a Web handler (or a {@link nodeHandler}): the listener of {@link toNodeListener}, plus
 * answers node:http gives outside it — 405 to CONNECT (which never reaches a request listener) and 413 instead of
 * `100 Continue` for a body announced larger than the limit.
 *
 * @see {@link https://nodejs.org/api/http.html#httpcreateserveroptions-requestlistener | node:http createServer}
 */
export const createNodeServer: {
  (handler: WebHandler, options?: ServerOptions): Server
  (handler: MarkedNodeHandler, options?: ServerOptions): Server
  (handler: Handler, options?: ServerOptions): Server
} = (handler: Handler, options: ServerOptions = {}): Server => {
  const resolved = resolveOptions(options)
  const listener = listenerFor(handler, resolved)
  const requestTimeout = options.requestTimeout ?? 30_000
  const server = createServer(
    {
      requestTimeout,
      headersTimeout: Math.min(requestTimeout, 20_000),
      connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(requestTimeout / 4))),
    },
    listener,
  )
  server.on("connect", (_req: IncomingMessage, socket: Socket) => {
    const allow = resolved.allow("/") ?? DEFAULT_ALLOW
    socket.on("error", () => undefined)
    socket.end(`HTTP/1.1 405 Method Not Allowed\r\nAllow: ${allow}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)
  })
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    const declared = req.headers["content-length"]
    if (declared !== undefined && Number(declared) > resolved.maxBodyBytes) {
      refuse(res, 413, `the request body exceeds the limit of ${resolved.maxBodyBytes} bytes`, { close: true })
      return
    }
    res.writeContinue()
    listener(req, res)
  })
  return server
}

/**
 * Serves a Web handler (or a {@link nodeHandler}) with node:http on `host:port` (127.0.0.1 and a free port by default).
 *
 * @see {@link https://nodejs.org/api/http.html#serverlisten | node:http server.listen}
 */
export const listen: {
  (handler: WebHandler, options?: ListenOptions): Promise<RunningServer>
  (handler: MarkedNodeHandler, options?: ListenOptions): Promise<RunningServer>
  (handler: Handler, options?: ListenOptions): Promise<RunningServer>
} = (handler: Handler, options: ListenOptions = {}): Promise<RunningServer> =>
  new Promise((resolve, reject) => {
    const server = createNodeServer(handler, options)
    server.once("error", reject)
    const host = options.host ?? "127.0.0.1"
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject)
      const { port } = server.address() as AddressInfo
      const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`
      let closing: Promise<void> | undefined
      resolve({
        url,
        port,
        server,
        close: () => {
          closing ??= new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()))
            server.closeAllConnections()
          })
          return closing
        },
      })
    })
  })
