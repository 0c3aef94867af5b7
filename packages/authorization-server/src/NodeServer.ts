/**
 * A one-call Node server around a Web-standard handler: node:http requests become `Request`s and `Response`s are
 * written back, streaming.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch Standard (Request, Response)}
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Readable } from "node:stream"

/** A Web-standard request handler. */
export type Handler = (request: Request) => Promise<Response>

/**
 * Where to listen.
 *
 * @see {@link https://nodejs.org/api/http.html#serverlisten | node:http server.listen}
 */
export interface ListenOptions {
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
  /** Stops accepting connections, closes idle ones and resolves when the server is closed. */
  readonly close: () => Promise<void>
}

/**
 * Turns a node:http request into a Web `Request`.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch Standard (Request)}
 */
export const toRequest = (req: IncomingMessage, origin: string): Request => {
  const headers = new Headers()
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!)
  const method = req.method ?? "GET"
  const controller = new AbortController()
  req.once("close", () => {
    if (!req.complete) controller.abort()
  })
  // Express strips its mount path from req.url and keeps the full one in originalUrl.
  const path = (req as IncomingMessage & { readonly originalUrl?: string }).originalUrl ?? req.url ?? "/"
  return new Request(new URL(path, origin), {
    method,
    headers,
    signal: controller.signal,
    ...(method === "GET" || method === "HEAD"
      ? {}
      : { body: Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>, duplex: "half" }),
  })
}

/**
 * Writes a Web `Response` to a node:http response.
 *
 * @see {@link https://fetch.spec.whatwg.org/#response-class | Fetch Standard (Response)}
 */
export const writeResponse = async (response: Response, res: ServerResponse): Promise<void> => {
  const headers: Record<string, string | Array<string>> = {}
  response.headers.forEach((value, key) => {
    if (key !== "set-cookie") headers[key] = value
  })
  const cookies = response.headers.getSetCookie()
  if (cookies.length > 0) headers["set-cookie"] = cookies
  res.writeHead(response.status, headers)
  if (response.body === null) {
    res.end()
    return
  }
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk)
  res.end()
}

/**
 * Node `(req, res)` listener that runs a Web handler.
 *
 * @see {@link https://nodejs.org/api/http.html#event-request | node:http request event}
 */
export const toNodeListener =
  (handler: Handler, origin?: string) =>
  (req: IncomingMessage, res: ServerResponse): void => {
    const base = origin ?? `http://${req.headers.host ?? "localhost"}`
    handler(toRequest(req, base))
      .then((response) => writeResponse(response, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" })
        res.end("Internal Server Error")
      })
  }

/**
 * Serves a Web handler with node:http.
 *
 * @param origin - the public origin used to build `Request.url` (the issuer's); the Host header otherwise.
 *
 * @see {@link https://nodejs.org/api/http.html#httpcreateserveroptions-requestlistener | node:http createServer}
 */
export const listen = (handler: Handler, options: ListenOptions = {}, origin?: string): Promise<RunningServer> =>
  new Promise((resolve, reject) => {
    const server = createServer(toNodeListener(handler, origin))
    server.once("error", reject)
    const host = options.host ?? "127.0.0.1"
    server.listen(options.port ?? 0, host, () => {
      const { port } = server.address() as AddressInfo
      const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`
      resolve({
        url,
        port,
        server,
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()))
            server.closeAllConnections()
          }),
      })
    })
  })
