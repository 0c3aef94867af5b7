// Response writing: a Web `Response` onto a node:http response, and the bridge's own short refusals.
import type { ServerResponse } from "node:http"
import { wholeResponses } from "./whole.js"

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
export const refuse = (
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
  // A body known whole (`Body.wholeResponse`) that nobody has read: its text, without reading the stream.
  const whole = wholeResponses.get(response)
  if (whole !== undefined && !response.bodyUsed && !response.body?.locked) {
    if (res.destroyed) return
    if (head) {
      writeHead()
      res.end()
      return
    }
    if (!noContent(response.status) && !("content-length" in headers) && !("transfer-encoding" in headers)) {
      headers["content-length"] = String(Buffer.byteLength(whole, "utf8"))
    }
    writeHead()
    res.end(whole, "utf8")
    return
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
