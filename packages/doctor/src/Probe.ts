/**
 * The doctor's HTTP: every request it makes goes through one recorder, which follows no redirect (a redirect is a
 * finding, not a detour), bounds the time and the body, and keeps each exchange for the report.
 *
 * @module
 */
import type { Exchange } from "./Finding.js"

/** A response as the doctor saw it: its exchange, and the body read in full (within the limit). */
export interface Seen {
  readonly exchange: Exchange
  /** The response, undefined when none came. */
  readonly status?: number
  readonly headers: Headers
  /** The body as text (within `maxBodyBytes`), empty when none. */
  readonly text: string
  /** The body parsed as JSON, undefined when it is not JSON. */
  readonly json: unknown
}

/** Options of {@link createProbe}. */
export interface ProbeOptions {
  /** The fetch to use; the global one by default. */
  readonly fetch?: typeof globalThis.fetch
  /** Per request, in milliseconds; 10,000 by default. */
  readonly timeoutMs?: number
  /** The most bytes of a body read; 1 MiB by default. */
  readonly maxBodyBytes?: number
}

/** The recorder: `send` makes one request and returns what was seen; `exchanges` lists them all, in order. */
export interface Probe {
  readonly send: (url: string | URL, init?: RequestInit) => Promise<Seen>
  readonly exchanges: ReadonlyArray<Exchange>
}

// Headers worth showing in a report; anything else (cookies, authorization) is left out.
const SHOWN = [
  "content-type",
  "location",
  "www-authenticate",
  "access-control-allow-origin",
  "access-control-allow-methods",
  "access-control-allow-headers",
  "access-control-expose-headers",
  "cache-control",
  "date",
]
const SHOWN_REQUEST = [
  "accept",
  "content-type",
  "origin",
  "access-control-request-method",
  "access-control-request-headers",
  "mcp-protocol-version",
]
const BODY_SHOWN = 2_000

const readLimited = async (response: Response, limit: number): Promise<string | Error> => {
  if (response.body === null) return ""
  const reader = response.body.getReader()
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      await reader.cancel()
      return new Error(`the body is larger than ${limit} bytes`)
    }
    chunks.push(value)
  }
  const all = new Uint8Array(size)
  let at = 0
  for (const chunk of chunks) {
    all.set(chunk, at)
    at += chunk.byteLength
  }
  return new TextDecoder().decode(all)
}

/**
 * A recorder over `fetch`. Redirects are not followed (`redirect: "manual"`); a request that gets no answer is
 * recorded with its error and returned without a status.
 */
export const createProbe = (options: ProbeOptions = {}): Probe => {
  const doFetch = options.fetch ?? globalThis.fetch
  const timeoutMs = options.timeoutMs ?? 10_000
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024
  const exchanges: Array<Exchange> = []
  const send = async (url: string | URL, init: RequestInit = {}): Promise<Seen> => {
    const method = (init.method ?? "GET").toUpperCase()
    const requestHeaders = new Headers(init.headers)
    const shownRequest: Record<string, string> = {}
    for (const name of SHOWN_REQUEST) {
      const value = requestHeaders.get(name)
      if (value !== null) shownRequest[name] = value
    }
    const base = {
      method,
      url: String(url),
      ...(Object.keys(shownRequest).length === 0 ? {} : { requestHeaders: shownRequest }),
    }
    let response: Response
    try {
      response = await doFetch(url, { ...init, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) })
    } catch (e) {
      const cause = e instanceof Error ? ((e.cause as Error | undefined)?.message ?? e.message) : String(e)
      const exchange: Exchange = { ...base, error: cause }
      exchanges.push(exchange)
      return { exchange, headers: new Headers(), text: "", json: undefined }
    }
    const shown: Record<string, string> = {}
    for (const name of SHOWN) {
      const value = response.headers.get(name)
      if (value !== null) shown[name] = value
    }
    const body = await readLimited(response, maxBodyBytes).catch((e: unknown) =>
      e instanceof Error ? e : new Error(String(e)),
    )
    const text = body instanceof Error ? "" : body
    let json: unknown
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = undefined
    }
    const exchange: Exchange = {
      ...base,
      status: response.status,
      headers: shown,
      ...(text === "" ? {} : { body: text.slice(0, BODY_SHOWN) }),
      ...(body instanceof Error ? { error: body.message } : {}),
    }
    exchanges.push(exchange)
    return { exchange, status: response.status, headers: response.headers, text, json }
  }
  return { send, exchanges }
}
