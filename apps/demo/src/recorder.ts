/**
 * A fetch that hands every request/response pair to an observer before the caller sees the response, so the
 * transcript shows what really went over the wire, in order.
 *
 * @module
 */

/** The subset of fetch the client and the scripted user need. */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

/** One HTTP exchange as observed. */
export interface Exchange {
  readonly method: string
  readonly url: URL
  readonly requestHeaders: Headers
  /** The request body as text; undefined when there is none. */
  readonly requestBody: string | undefined
  readonly status: number
  readonly statusText: string
  readonly responseHeaders: Headers
  /** The response body as text; undefined for streams (server-sent events) and empty bodies. */
  readonly responseBody: string | undefined
}

const STATUS_TEXT: Readonly<Record<number, string>> = {
  200: "OK",
  201: "Created",
  202: "Accepted",
  204: "No Content",
  302: "Found",
  303: "See Other",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
}

/** The reason phrase of a status (undici leaves statusText empty for HTTP/1.1 responses without one). */
export const statusText = (status: number, given = ""): string => given || STATUS_TEXT[status] || ""

const isStream = (headers: Headers): boolean => (headers.get("content-type") ?? "").includes("text/event-stream")

/** Wraps a fetch; `observe` runs once the response headers and (non-stream) body are in. */
export const recordingFetch =
  (inner: FetchLike, observe: (exchange: Exchange) => void): FetchLike =>
  async (input, init) => {
    // A probe to read the body from, so the real request keeps its own (streams are not read: they go once).
    const probe = input instanceof Request ? new Request(input.clone(), init) : new Request(input, init)
    const requestBody = probe.body === null || init?.body instanceof ReadableStream ? undefined : await probe.text()
    const response = await inner(input, init)
    let responseBody: string | undefined
    if (!isStream(response.headers) && response.body !== null) {
      const text = await response.clone().text()
      responseBody = text === "" ? undefined : text
    }
    observe({
      method: probe.method,
      url: new URL(probe.url),
      requestHeaders: probe.headers,
      requestBody,
      status: response.status,
      statusText: statusText(response.status, response.statusText),
      responseHeaders: response.headers,
      responseBody,
    })
    return response
  }
