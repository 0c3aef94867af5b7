/**
 * Request bodies read within a size limit, with Web streams only (any runtime with `fetch`). A server that reads a
 * stranger's body without a limit lets that stranger fill its memory; every Keyway server reads through these.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.5.14 | RFC 9110 §15.5.14 (413 Content Too Large)}
 * @module
 */
import { Schema } from "effect"
import { wholeRequests, wholeResponses } from "./internal/whole.js"

/** The default body limit of Keyway's servers: 4 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024

/**
 * The request body is larger than the server accepts; answer 413.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.5.14 | RFC 9110 §15.5.14}
 */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  /** The limit in bytes. */
  limit: Schema.Number,
}) {
  override get message(): string {
    return `the request body exceeds the limit of ${this.limit} bytes`
  }
}

/**
 * The declared `Content-Length` of a request, or `undefined` when there is none (or it is not a plain decimal, which
 * the HTTP layer refuses before a handler sees it).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-8.6 | RFC 9110 §8.6}
 */
export const declaredLength = (headers: Headers): number | undefined => {
  const value = headers.get("content-length")
  if (value === null || !/^\d+$/.test(value)) return undefined
  return Number(value)
}

/**
 * Wraps a body stream so that reading more than `limit` bytes fails with {@link PayloadTooLarge} (the source is
 * cancelled at that point, so nothing past the limit is buffered); `onExceeded` runs once when that happens.
 *
 * @see {@link https://streams.spec.whatwg.org/#ts-model | Streams Standard (TransformStream)}
 */
export const limitStream = (
  body: ReadableStream<Uint8Array>,
  limit: number,
  onExceeded?: () => void,
): ReadableStream<Uint8Array> => {
  let received = 0
  const reader = body.getReader()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: ReadableStreamReadResult<Uint8Array>
      try {
        chunk = await reader.read()
      } catch (error) {
        // A limit further upstream (the node:http bridge's) counts as this one being exceeded.
        if (error instanceof PayloadTooLarge) onExceeded?.()
        controller.error(error)
        return
      }
      const { done, value } = chunk
      if (done) {
        controller.close()
        return
      }
      received += value.byteLength
      if (received > limit) {
        onExceeded?.()
        controller.error(new PayloadTooLarge({ limit }))
        await reader.cancel().catch(() => undefined)
        return
      }
      controller.enqueue(value)
    },
    cancel(reason) {
      return reader.cancel(reason)
    },
  })
}

/**
 * The request with its body limited to `limit` bytes: fails with {@link PayloadTooLarge} at once when the declared
 * `Content-Length` is larger, and otherwise returns a request whose body fails when it grows past the limit (the
 * request itself when the declared length already proves it fits). `onExceeded` runs when that body fails.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.5.14 | RFC 9110 §15.5.14}
 */
export const limitRequest = (request: Request, limit: number, onExceeded?: () => void): Request => {
  if (request.body === null) return request
  const declared = declaredLength(request.headers)
  if (declared !== undefined) {
    if (declared > limit) throw new PayloadTooLarge({ limit })
    return request
  }
  return new Request(request.url, {
    method: request.method,
    headers: request.headers,
    signal: request.signal,
    body: limitStream(request.body, limit, onExceeded),
    duplex: "half",
  } as RequestInit)
}

/**
 * Reads the whole body as bytes, refusing more than `limit` bytes: the declared `Content-Length` is checked first,
 * then the bytes as they arrive, so a missing or lying length cannot push more through.
 *
 * @throws {@link PayloadTooLarge}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.5.14 | RFC 9110 §15.5.14}
 */
export const readBytes = async (request: Request, limit: number): Promise<Uint8Array> => {
  const declared = declaredLength(request.headers)
  if (declared !== undefined && declared > limit) throw new PayloadTooLarge({ limit })
  // A body the node:http bridge read whole before making the request (its length is the declared one, checked above):
  // the bytes themselves, once, rather than read back through the request's stream.
  const whole = wholeRequests.get(request)
  if (whole !== undefined) {
    wholeRequests.delete(request)
    if (!request.bodyUsed && whole.byteLength <= limit) return whole
  }
  if (request.body === null) return new Uint8Array(0)
  const reader = request.body.getReader()
  return collect(
    () => reader.read(),
    limit,
    () => reader.cancel(),
  )
}

/**
 * {@link readBytes} for a body that is an async iterable of chunks (a node:http request, for instance), with its
 * declared length when there is one. Past the limit it stops pulling and leaves the source as it is, so the server
 * can still answer 413 on the same connection (and close it).
 *
 * @throws {@link PayloadTooLarge}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9110.html#section-15.5.14 | RFC 9110 §15.5.14}
 */
export const readIterable = async (
  chunks: AsyncIterable<Uint8Array>,
  limit: number,
  declared?: number,
): Promise<Uint8Array> => {
  if (declared !== undefined && declared > limit) throw new PayloadTooLarge({ limit })
  const iterator = chunks[Symbol.asyncIterator]()
  return collect(
    () => iterator.next(),
    limit,
    () => undefined,
  )
}

const collect = async (
  next: () => Promise<IteratorResult<Uint8Array, unknown>>,
  limit: number,
  stop: () => unknown,
): Promise<Uint8Array> => {
  const parts: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await next()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      await Promise.resolve(stop()).catch(() => undefined)
      throw new PayloadTooLarge({ limit })
    }
    parts.push(value)
  }
  if (parts.length === 1) return parts[0]!
  const out = new Uint8Array(size)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.byteLength
  }
  return out
}

/**
 * Reads the whole body as UTF-8 text within `limit` bytes. With `fatal`, malformed UTF-8 fails with a `TypeError`
 * instead of becoming U+FFFD.
 *
 * @throws {@link PayloadTooLarge}
 * @see {@link https://encoding.spec.whatwg.org/#utf-8-decode | Encoding Standard (UTF-8 decode)}
 */
export const readText = async (request: Request, limit: number, options: { readonly fatal?: boolean } = {}) =>
  (options.fatal === true ? strictUtf8 : lenientUtf8).decode(await readBytes(request, limit))

// Decoders without `stream` keep no state between calls: one of each serves every body.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true })
const lenientUtf8 = new TextDecoder("utf-8")

/**
 * A `Response` whose body is `text` (UTF-8), which Keyway's node:http bridge writes as it is, in one write with the
 * head, without reading it back through the response's stream; any other consumer reads it as from `new
 * Response(text, init)`, which it is.
 *
 * @see {@link https://fetch.spec.whatwg.org/#response-class | Fetch Standard (Response)}
 */
export const wholeResponse = (text: string, init?: ResponseInit): Response => {
  const response = new Response(text, init)
  wholeResponses.set(response, text)
  return response
}
