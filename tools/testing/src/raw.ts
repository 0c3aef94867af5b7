import { connect } from "node:net"

/** What came back on a raw connection: the status line's code (0 when nothing parseable came) and the whole text. */
export interface RawAnswer {
  readonly status: number
  /** Lower-case names; the last line wins when a field repeats. */
  readonly headers: Readonly<Record<string, string>>
  /** The body, de-chunked when it came chunked. */
  readonly body: string
  /** Everything received, as text. */
  readonly raw: string
  /** True when the server closed the connection (rather than the timeout ending the wait). */
  readonly closed: boolean
}

/** Options of {@link rawRequest}. */
export interface RawOptions {
  readonly host?: string
  /** Half-close the connection after writing (the client sends FIN). */
  readonly endAfterWrite?: boolean
  /** Stop waiting after this many milliseconds (default 5000), or once a full response has arrived. */
  readonly timeoutMs?: number
}

// Decodes a chunked body as far as it has arrived.
const dechunk = (body: string): string => {
  let out = ""
  let at = 0
  for (;;) {
    const eol = body.indexOf("\r\n", at)
    if (eol === -1) return out
    const size = Number.parseInt(body.slice(at, eol), 16)
    if (!(size > 0)) return out
    out += body.slice(eol + 2, eol + 2 + size)
    at = eol + 2 + size + 2
  }
}

const parse = (raw: string, closed: boolean): RawAnswer => {
  const end = raw.indexOf("\r\n\r\n")
  const head = end === -1 ? raw : raw.slice(0, end)
  const lines = head.split("\r\n")
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? 0)
  const headers: Record<string, string> = {}
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":")
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const body = end === -1 ? "" : raw.slice(end + 4)
  return { status, headers, body: headers["transfer-encoding"] === "chunked" ? dechunk(body) : body, raw, closed }
}

const complete = (raw: string): boolean => {
  const answer = parse(raw, false)
  if (answer.status === 0 || !raw.includes("\r\n\r\n")) return false
  const length = answer.headers["content-length"]
  if (length !== undefined) return Buffer.byteLength(answer.body) >= Number(length)
  if (answer.headers["transfer-encoding"] === "chunked") return raw.endsWith("\r\n0\r\n\r\n")
  return answer.status === 204 || answer.status === 304 || answer.status < 200
}

/**
 * Writes bytes exactly as given to a TCP connection and reads the first answer: for requests no HTTP client library
 * would send (bad Host headers, forbidden methods, broken chunked bodies, oversized header sections).
 */
export const rawRequest = (port: number, data: string | Buffer, options: RawOptions = {}): Promise<RawAnswer> =>
  new Promise((resolve) => {
    const socket = connect(port, options.host ?? "127.0.0.1")
    let received = ""
    let done = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resolve(parse(received, closed))
    }
    const timer = setTimeout(() => finish(false), options.timeoutMs ?? 5000)
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1")
      if (complete(received)) finish(false)
    })
    socket.on("error", () => finish(true))
    socket.on("close", () => finish(true))
    socket.write(data, () => {
      if (options.endAfterWrite === true) socket.end()
    })
  })

/** One hostile request and the status a Keyway server must answer it with. */
export interface HostileCase {
  readonly name: string
  readonly request: string
  readonly status: number
  /** Write it, then half-close the connection. */
  readonly endAfterWrite?: boolean
}

/**
 * Requests no well-behaved client sends, each with the answer every Keyway server on node:http gives: bad Host
 * headers and request-targets, methods a Web handler cannot serve, broken or oversized bodies and header sections.
 * `path` is a path the server serves (TRACE on it is a 405).
 */
export const hostileRequests = (path: string): ReadonlyArray<HostileCase> => {
  const get = (host: string) => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`
  const post = (headers: string, body = "") => `POST ${path} HTTP/1.1\r\nHost: a\r\n${headers}\r\n${body}`
  return [
    { name: "TRACE", request: `TRACE ${path} HTTP/1.1\r\nHost: a\r\n\r\n`, status: 405 },
    {
      name: "TRACK (unknown to node:http's parser)",
      request: `TRACK ${path} HTTP/1.1\r\nHost: a\r\n\r\n`,
      status: 400,
    },
    { name: "CONNECT", request: "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", status: 405 },
    { name: "PROPFIND (not implemented)", request: `PROPFIND ${path} HTTP/1.1\r\nHost: a\r\n\r\n`, status: 501 },
    ...["", " ", "a b", "[", "%", "#", "?", "::1", "x:99999", "evil@127.0.0.1"].map((host) => ({
      name: `Host ${JSON.stringify(host)}`,
      request: get(host),
      status: 400,
    })),
    { name: "no Host (HTTP/1.0)", request: `GET ${path} HTTP/1.0\r\n\r\n`, status: 400 },
    { name: "two Host headers", request: `GET ${path} HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n`, status: 400 },
    { name: "request-target http://[", request: "GET http://[ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400 },
    { name: "request-target without a slash", request: "GET mcp HTTP/1.1\r\nHost: a\r\n\r\n", status: 400 },
    {
      name: "a 50 MB Content-Length",
      request: post("Content-Type: application/json\r\nContent-Length: 50000000\r\n", "{"),
      status: 413,
    },
    {
      name: "an incomplete chunked body, then the client half-closes",
      request: post("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", "5\r\n{"),
      status: 400,
      endAfterWrite: true,
    },
    {
      name: "a malformed chunk size",
      request: post("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", "zz\r\n{}\r\n"),
      status: 400,
    },
    {
      name: "1,500 header fields",
      request: `GET ${path} HTTP/1.1\r\nHost: a\r\n${Array.from({ length: 1500 }, (_, i) => `h${i}: v\r\n`).join("")}\r\n`,
      status: 431,
    },
    {
      name: "a 64 KiB header line",
      request: `GET ${path} HTTP/1.1\r\nHost: a\r\nX-Long: ${"a".repeat(64 * 1024)}\r\n\r\n`,
      status: 431,
    },
  ]
}

/**
 * A case as a protected endpoint answers it to a caller without a token: the 401 comes before any of the body is
 * read, so a broken body never gets that far.
 */
export const unauthenticated = (c: HostileCase): HostileCase =>
  c.name.startsWith("an incomplete") ? { ...c, status: 401 } : c
