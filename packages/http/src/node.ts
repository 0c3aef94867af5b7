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
import { admit, announcesBody, prepare, readWhole, toRequest } from "./internal/admit.js"
import { DEFAULT_ALLOW, type Resolved, resolveOptions } from "./internal/options.js"
import { refuse, writeResponse } from "./internal/respond.js"
import { wholeRequests } from "./internal/whole.js"

export { announcesBody, BUFFERED_BODY_BYTES, clientAddress } from "./internal/admit.js"
export { writeResponse } from "./internal/respond.js"

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
    try {
      const done = handler(req, res, target)
      if (done !== undefined) done.then(undefined, (error: unknown) => handlerFailed(resolved, res, error))
    } catch (error) {
      handlerFailed(resolved, res, error)
    }
  }

// A node:http handler threw or rejected: reported once, and a 500 unless its answer had begun.
const handlerFailed = (resolved: Resolved, res: ServerResponse, error: unknown): void => {
  resolved.onError(error)
  if (res.headersSent) res.destroy()
  else refuse(res, 500, "the server could not answer this request", { close: true })
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
      if (request === undefined) return
      wholeRequests.set(request, body)
      run(request)
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
