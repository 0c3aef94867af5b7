import { request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http"
import { connect } from "node:net"
import { deferred } from "@keyway/testing"
import { rawRequest } from "@keyway/testing/raw"
import { afterEach, describe, expect, it } from "vitest"
import { Body } from "../src/index.js"
import {
  BUFFERED_BODY_BYTES,
  clientAddress,
  createNodeServer,
  listen,
  type MarkedNodeHandler,
  nodeHandler,
  type RunningServer,
  toNodeListener,
  type WebHandler,
} from "../src/node.js"

const running: Array<RunningServer> = []
afterEach(async () => {
  for (const r of running.splice(0)) await r.close()
})

const echo: WebHandler = async (request) => {
  const body = request.body === null ? "" : await request.text()
  return Response.json({ method: request.method, url: request.url, length: body.length })
}

const start = async (handler: WebHandler = echo, options: Parameters<typeof listen>[1] = {}) => {
  const server = await listen(handler, options)
  running.push(server)
  return server
}

const startNode = async (handler: MarkedNodeHandler, options: Parameters<typeof listen>[1] = {}) => {
  const server = await listen(handler, options)
  running.push(server)
  return server
}

const get = (host = "a") => `GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`

// Requests the bridge refuses before any handler runs, with their status and the detail of the answer.
const refusals: ReadonlyArray<readonly [string, string, number, string]> = [
  ["an empty Host", get(""), 400, "the Host header is not a valid host[:port]"],
  ["a blank Host", get(" "), 400, "the Host header is not a valid host[:port]"],
  ["Host a b", get("a b"), 400, "the Host header is not a valid host[:port]"],
  ["Host [", get("["), 400, "the Host header is not a valid host[:port]"],
  ["Host %", get("%"), 400, "the Host header is not a valid host[:port]"],
  ["Host #", get("#"), 400, "the Host header is not a valid host[:port]"],
  ["Host ?", get("?"), 400, "the Host header is not a valid host[:port]"],
  ["Host ::1", get("::1"), 400, "the Host header is not a valid host[:port]"],
  ["Host x:99999", get("x:99999"), 400, "the Host header is not a valid host[:port]"],
  ["Host with userinfo", get("evil@127.0.0.1"), 400, "the Host header is not a valid host[:port]"],
  ["no Host (HTTP/1.0)", "GET / HTTP/1.0\r\n\r\n", 400, "the Host header is missing"],
  ["two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "the request has more than one Host header"],
  [
    "request-target http://[",
    "GET http://[ HTTP/1.1\r\nHost: a\r\n\r\n",
    400,
    "the request-target is not a valid absolute URI",
  ],
  // node:http's parser refuses these itself (400, no detail) before the bridge sees them.
  ["a relative request-target", "GET mcp HTTP/1.1\r\nHost: a\r\n\r\n", 400, ""],
  ["* for GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400, "the request-target * is only for OPTIONS"],
  ["TRACE", "TRACE /token HTTP/1.1\r\nHost: a\r\n\r\n", 405, "the method TRACE is not allowed"],
  ["TRACK (unknown to node's parser)", "TRACK /token HTTP/1.1\r\nHost: a\r\n\r\n", 400, ""],
  ["PROPFIND", "PROPFIND / HTTP/1.1\r\nHost: a\r\n\r\n", 501, "the method PROPFIND is not implemented"],
  [
    "a declared body over the limit",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 50000000\r\n\r\nabc",
    413,
    "the request body exceeds the limit of 1024 bytes",
  ],
  [
    "a body over the limit announced with Expect: 100-continue",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n",
    413,
    "the request body exceeds the limit of 1024 bytes",
  ],
  [
    "a chunked body growing past the limit",
    `POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n${"x".repeat(1024)}\r\n1\r\ny\r\n0\r\n\r\n`,
    413,
    "the request body exceeds the limit of 1024 bytes",
  ],
  [
    "1,500 header fields",
    `GET / HTTP/1.1\r\nHost: a\r\n${Array.from({ length: 1500 }, (_, i) => `h${i}: v\r\n`).join("")}\r\n`,
    431,
    "",
  ],
  ["a 64 KiB header line", `GET / HTTP/1.1\r\nHost: a\r\nX: ${"a".repeat(65536)}\r\n\r\n`, 431, ""],
  ["a malformed chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n", 400, ""],
  ["an unparsable method", "FOO / HTTP/1.1\r\nHost: a\r\n\r\n", 400, ""],
]

describe("the node:http bridge", () => {
  it("passes method, URL, body and every header line; writes status, reason, headers, several cookies", async () => {
    const server = await start(async (request) => {
      const headers = new Headers({ "content-type": "application/json" })
      headers.append("set-cookie", "a=1")
      headers.append("set-cookie", "b=2")
      return new Response(
        JSON.stringify({ url: request.url, body: await request.text(), custom: request.headers.get("x-a") }),
        { status: 201, statusText: "Made", headers },
      )
    })
    const answer = await rawRequest(
      server.port,
      `POST /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nX-A: 1\r\nX-A: 2\r\nContent-Length: 5\r\n\r\nhello`,
    )
    expect(answer.raw.split("\r\n")[0]).toBe("HTTP/1.1 201 Made")
    expect(answer.raw).toContain("set-cookie: a=1\r\nset-cookie: b=2\r\n")
    expect(JSON.parse(answer.body)).toEqual({
      url: `http://127.0.0.1:${server.port}/path?q=1`,
      body: "hello",
      custom: "1, 2",
    })
  })

  describe("refuses what no handler should see, and keeps serving", () => {
    it.each(refusals)("%s", async (_, request, status, message) => {
      const server = await start(echo, { maxBodyBytes: 1024 })
      const answer = await rawRequest(server.port, request)
      expect(answer.status).toBe(status)
      if (message !== "") expect(answer.body).toContain(`: ${message}\n`)
      if (status === 405) expect(answer.headers.allow).toBe("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
      const after = await fetch(`${server.url}/after`)
      expect(after.status).toBe(200)
    })
  })

  it("answers CONNECT 405 with Allow from the allow option", async () => {
    const server = await start(echo, { allow: () => "GET, POST" })
    const answer = await rawRequest(server.port, "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n")
    expect(answer.status).toBe(405)
    expect(answer.headers.allow).toBe("GET, POST")
  })

  it("TRACE: Allow is the path's; 404 for a path that is no resource", async () => {
    const server = await start(echo, { allow: (path) => (path === "/token" ? "POST, OPTIONS" : undefined) })
    const token = await rawRequest(server.port, "TRACE /token?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    expect([token.status, token.headers.allow]).toEqual([405, "POST, OPTIONS"])
    const other = await rawRequest(server.port, "TRACE /other HTTP/1.1\r\nHost: a\r\n\r\n")
    expect([other.status, other.body]).toEqual([404, "Not Found: no such resource\n"])
  })

  it("OPTIONS * is answered for the server", async () => {
    const server = await start()
    const answer = await rawRequest(server.port, "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
    expect([answer.status, answer.headers.allow]).toEqual([204, "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"])
  })

  it("with publicUrl, never builds a URL from Host or an absolute-form target", async () => {
    const server = await start(echo, { publicUrl: "https://mcp.example.com/ignored/path" })
    for (const request of [
      "GET /mcp?x=1 HTTP/1.1\r\nHost: evil.example\r\n\r\n",
      "GET http://evil.example/mcp?x=1 HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    ]) {
      const answer = await rawRequest(server.port, request)
      expect(JSON.parse(answer.body).url).toBe("https://mcp.example.com/mcp?x=1")
    }
    const doubled = await rawRequest(server.port, "GET //evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n")
    expect(JSON.parse(doubled.body).url).toBe("https://mcp.example.com//evil.example/x")
  })

  it("publicUrl as a function is read per request", async () => {
    let origin = "https://one.example"
    const server = await start(echo, { publicUrl: () => origin })
    expect(((await (await fetch(`${server.url}/x`)).json()) as { url: string }).url).toBe("https://one.example/x")
    origin = "https://two.example"
    expect(((await (await fetch(`${server.url}/x`)).json()) as { url: string }).url).toBe("https://two.example/x")
  })

  it("refuses a publicUrl that is not http(s)", () => {
    expect(() => toNodeListener(echo, { publicUrl: "ftp://example.com" })).toThrow(
      'publicUrl must be an http or https URL, got "ftp://example.com"',
    )
  })

  it("a handler's exception is a 500 without detail, reported once, and the server keeps serving", async () => {
    const errors: Array<unknown> = []
    let calls = 0
    const server = await start(
      async (request) => {
        calls++
        if (new URL(request.url).pathname === "/boom") throw new Error("secret detail")
        return new Response("fine")
      },
      { onError: (error) => errors.push(error) },
    )
    const boom = await fetch(`${server.url}/boom`)
    expect(boom.status).toBe(500)
    expect(await boom.text()).toBe("Internal Server Error: the server could not answer this request\n")
    expect(errors).toHaveLength(1)
    expect((errors[0] as Error).message).toBe("secret detail")
    expect(await (await fetch(`${server.url}/fine`)).text()).toBe("fine")
    expect(calls).toBe(2)
  })

  it("a synchronous throw is handled the same way", async () => {
    const errors: Array<unknown> = []
    const server = await start(
      () => {
        throw new TypeError("sync")
      },
      { onError: (error) => errors.push(error) },
    )
    expect((await fetch(server.url)).status).toBe(500)
    expect(errors).toHaveLength(1)
  })

  it("a handler that swallows the 413 of a chunked body still answers 413", async () => {
    const server = await start(
      async (request) => {
        try {
          await request.text()
        } catch {
          return new Response("I pretend all is well")
        }
        return new Response("read")
      },
      { maxBodyBytes: 10 },
    )
    const answer = await rawRequest(
      server.port,
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n01234567890\r\n0\r\n\r\n",
    )
    expect(answer.status).toBe(413)
    expect(answer.headers.connection).toBe("close")
  })

  it("a handler's own 413 is kept; any other answer to an oversized body becomes the bridge's 413", async () => {
    const server = await start(
      async (request) => {
        if (new URL(request.url).pathname === "/ignores") return new Response("did not look")
        try {
          await request.text()
          return new Response("read")
        } catch (error) {
          return Response.json({ mine: (error as Error).message }, { status: 413 })
        }
      },
      { maxBodyBytes: 10 },
    )
    const own = await rawRequest(
      server.port,
      "POST /reads HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n01234567890",
    )
    expect([own.status, JSON.parse(own.body)]).toEqual([
      413,
      { mine: "the request body exceeds the limit of 10 bytes" },
    ])
    const ignored = await rawRequest(server.port, "POST /ignores HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n0123")
    expect([ignored.status, ignored.body]).toEqual([
      413,
      "Content Too Large: the request body exceeds the limit of 10 bytes\n",
    ])
  })

  it("a chunked body that ends early (client half-closes) is a 400", async () => {
    const server = await start()
    const answer = await rawRequest(
      server.port,
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
      { endAfterWrite: true },
    )
    // node:http's parser sees the early end of the chunked body and answers 400 itself.
    expect(answer.status).toBe(400)
    expect((await fetch(server.url)).status).toBe(200)
  })

  it("a client that drops the connection mid-body: a small body is read before the handler, which never runs", async () => {
    let called = 0
    const server = await start(async () => {
      called++
      return new Response("ok")
    })
    // The bridge's listener runs first: by this one, it is reading the body.
    const admitted = new Promise<IncomingMessage>((resolve) => server.server.once("request", resolve))
    const socket = connect(server.port, "127.0.0.1")
    socket.on("error", () => undefined)
    socket.write("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab")
    const req = await admitted
    // The request's "close" reaches the bridge's body reader before this listener, added after it.
    const abandoned = new Promise((resolve) => req.once("close", resolve))
    socket.destroy()
    await abandoned
    expect(called).toBe(0)
    expect((await fetch(server.url)).status).toBe(200)
    expect(called).toBe(1)
  })

  it("a client that drops the connection mid-body fails the handler's read of a long body, and the server keeps serving", async () => {
    const seen: Array<string> = []
    const reading = deferred()
    const answered = deferred()
    const server = await start(async (request) => {
      reading.resolve()
      try {
        await request.text()
        seen.push("read")
      } catch (error) {
        seen.push((error as Error).message)
      }
      answered.resolve()
      return new Response("ok")
    })
    const socket = connect(server.port, "127.0.0.1")
    socket.on("error", () => undefined)
    socket.write(`POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${BUFFERED_BODY_BYTES + 1}\r\n\r\nab`)
    await reading.promise
    socket.destroy()
    await answered.promise
    expect(seen).toEqual(["the request body ended before it was complete"])
    expect((await fetch(server.url)).status).toBe(200)
  })

  it.each([
    ["read whole before the handler", 1000],
    ["at the buffered size", BUFFERED_BODY_BYTES],
    ["streamed to the handler", BUFFERED_BODY_BYTES + 1],
  ])("a declared body %s reaches the handler whole (%i bytes)", async (_, length) => {
    const server = await start(async (request) => {
      const bytes = new Uint8Array(await request.arrayBuffer())
      return Response.json({ length: bytes.length, last: bytes[bytes.length - 1] })
    })
    const body = new Uint8Array(length).fill(97)
    body[length - 1] = 98
    const response = await fetch(server.url, { method: "POST", body })
    expect(await response.json()).toEqual({ length, last: 98 })
  })

  it("a request that stalls is answered 408 after requestTimeout", async () => {
    const server = await start(echo, { requestTimeout: 400 })
    const answer = await rawRequest(
      server.port,
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
      { timeoutMs: 5000 },
    )
    expect(answer.status).toBe(408)
  })

  it("a GET with a body is served and its connection closed instead of draining the body", async () => {
    const server = await start()
    const answer = await rawRequest(server.port, "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nab")
    expect(answer.status).toBe(200)
    expect(answer.headers.connection).toBe("close")
  })

  it("HEAD gets the headers without the body", async () => {
    const server = await start(async () => new Response("body", { headers: { "x-h": "1" } }))
    // Nothing delimits a HEAD answer's (absent) body: the server closing the connection ends the read.
    const answer = await rawRequest(server.port, "HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    expect([answer.status, answer.headers["x-h"], answer.body]).toEqual([200, "1", ""])
  })

  it("writes a whole response (Body.wholeResponse) as its text with its length, for GET and HEAD", async () => {
    const text = '{"é":"ü","n":1}'
    const server = await start(async () => Body.wholeResponse(text, { status: 201, headers: { "x-h": "1" } }))
    const answer = await rawRequest(server.port, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    expect([answer.status, answer.headers["x-h"], answer.headers["content-length"], answer.body]).toEqual([
      201,
      "1",
      String(Buffer.byteLength(text)),
      // The raw answer's body is read byte for byte (latin1): the UTF-8 bytes of the text.
      Buffer.from(text, "utf8").toString("latin1"),
    ])
    const head = await rawRequest(server.port, "HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    expect([head.status, head.headers["content-length"], head.body]).toEqual([201, undefined, ""])
  })

  it("a whole response whose body a handler already read, or replaced, is written from its stream as any other", async () => {
    const errors: Array<unknown> = []
    const server = await start(
      async (request) => {
        const response = Body.wholeResponse("original")
        if (new URL(request.url).pathname === "/read") {
          await response.text()
          return response
        }
        return new Response(response.body, { headers: { "x-wrapped": "1" } })
      },
      { onError: (error) => errors.push(error) },
    )
    const wrapped = await rawRequest(server.port, "GET /wrapped HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    expect([wrapped.status, wrapped.headers["x-wrapped"], wrapped.body]).toEqual([200, "1", "original"])
    const read = await rawRequest(server.port, "GET /read HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    // As for any response whose body was read: the stream cannot be read again, the answer is the bridge's 500.
    expect(read.status).toBe(500)
    expect(String(errors[0])).toBe("TypeError [ERR_INVALID_STATE]: Invalid state: ReadableStream is locked")
  })

  it("Body.readText gets a small body the bridge read whole, and the request's own stream still has it", async () => {
    const seen: Array<string> = []
    const server = await start(async (request) => {
      seen.push(await Body.readText(request, 100, { fatal: true }))
      seen.push(await request.text())
      return new Response(null, { status: 204 })
    })
    const body = "grant_type=x&é=1"
    const answer = await rawRequest(
      server.port,
      `POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
    expect(answer.status).toBe(204)
    expect(seen).toEqual([body, body])
  })

  it("Body.readBytes refuses a small body the bridge read whole when it is over the reader's own limit", async () => {
    const outcomes: Array<string> = []
    const server = await start(async (request) => {
      outcomes.push(await Body.readBytes(request, 3).then(String, (e: unknown) => (e as Error).message))
      return new Response(null, { status: 204 })
    })
    await rawRequest(server.port, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcde")
    expect(outcomes).toEqual(["the request body exceeds the limit of 3 bytes"])
  })

  it("streams a response with back-pressure, and a client that leaves cancels the stream and aborts the request", async () => {
    const cancelled = deferred()
    const aborted = deferred()
    // Pulls made while the response holds more than the socket takes (its write returned false and no "drain" came
    // since): a server with back-pressure reads the next chunk only after the drain.
    let pullsWithoutDrain = 0
    let most = 0
    // Resolved once the server waits for a drain that does not come within a turn of its event loop (the socket's
    // buffers are full), or once it has pulled three times without one.
    const stalled = deferred()
    const response = deferred<ServerResponse>()
    const server = await start(async (request) => {
      request.signal.addEventListener("abort", () => aborted.resolve())
      const res = await response.promise
      let drains = 0
      res.on("drain", () => {
        drains++
        pullsWithoutDrain = 0
      })
      res.on("newListener", (event: string | symbol) => {
        if (event !== "drain") return
        const at = drains
        setImmediate(() => {
          if (drains === at) stalled.resolve()
        })
      })
      return new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            if (res.writableNeedDrain) most = Math.max(most, ++pullsWithoutDrain)
            if (most >= 3) stalled.resolve()
            controller.enqueue(new Uint8Array(64 * 1024).fill(97))
          },
          cancel() {
            cancelled.resolve()
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      )
    })
    // The bridge's listener runs first and calls the handler, which waits for this one.
    server.server.once("request", (_: IncomingMessage, res: ServerResponse) => response.resolve(res))
    const socket = connect(server.port, "127.0.0.1")
    socket.write("GET /events HTTP/1.1\r\nHost: a\r\n\r\n")
    await new Promise<void>((resolve) => socket.once("data", () => resolve()))
    // Not reading: the server must stop pulling once the socket's buffers are full.
    socket.pause()
    await stalled.promise
    expect(most).toBeLessThan(3)
    socket.destroy()
    await Promise.all([cancelled.promise, aborted.promise])
  })

  describe("writes a body that is complete at once in one write, with its length, and streams the others", () => {
    const answerOf = async (handler: WebHandler, method = "GET") => {
      const server = await start(handler)
      return rawRequest(server.port, `${method} / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`)
    }

    it.each([
      ["a string", () => new Response("hello"), "hello"],
      ["bytes", () => new Response(new TextEncoder().encode("bytes!")), "bytes!"],
      ["JSON", () => Response.json({ a: 1 }), '{"a":1}'],
      ["an empty body", () => new Response(""), ""],
      [
        "a stream closed by its producer at once, in two chunks",
        () =>
          new Response(
            new ReadableStream<Uint8Array>({
              start(controller) {
                controller.enqueue(new TextEncoder().encode("two "))
                controller.enqueue(new TextEncoder().encode("chunks"))
                controller.close()
              },
            }),
          ),
        "two chunks",
      ],
    ])("%s", async (_, make, body) => {
      const answer = await answerOf(async () => make())
      expect([
        answer.status,
        answer.headers["content-length"],
        answer.headers["transfer-encoding"],
        answer.body,
      ]).toEqual([200, String(Buffer.byteLength(body)), undefined, body])
    })

    it("writes every byte value as it is, and UTF-8 text as UTF-8", async () => {
      const bytes = Uint8Array.from({ length: 512 }, (_, i) => i % 256)
      const server = await start(async (request) =>
        new URL(request.url).pathname === "/text" ? new Response("é ✓ 🙂") : new Response(bytes),
      )
      const binary = await fetch(`${server.url}/bytes`)
      expect(binary.headers.get("content-length")).toBe("512")
      expect(new Uint8Array(await binary.arrayBuffer())).toEqual(bytes)
      const text = await fetch(`${server.url}/text`)
      expect(text.headers.get("content-length")).toBe(String(Buffer.byteLength("é ✓ 🙂")))
      expect(await text.text()).toBe("é ✓ 🙂")
    })

    it("keeps a Content-Length the handler set, and adds none to a 204 or a 304", async () => {
      const own = await answerOf(async () => new Response("abc", { headers: { "content-length": "3" } }))
      expect([own.headers["content-length"], own.body]).toEqual(["3", "abc"])
      for (const status of [204, 304]) {
        const answer = await answerOf(async () => new Response(null, { status }))
        expect([answer.status, answer.headers["content-length"], answer.body]).toEqual([status, undefined, ""])
      }
    })

    it("a body longer than 64 KiB that is ready at once is streamed, whole", async () => {
      const answer = await answerOf(async () => new Response("x".repeat(200 * 1024)))
      expect([answer.headers["transfer-encoding"], answer.body.length]).toEqual(["chunked", 200 * 1024])
    })

    it("an event stream's first event arrives before the stream ends", async () => {
      let release: () => void = () => undefined
      const released = new Promise<void>((resolve) => {
        release = resolve
      })
      const encoder = new TextEncoder()
      const server = await start(
        async () =>
          new Response(
            new ReadableStream<Uint8Array>({
              async start(controller) {
                controller.enqueue(encoder.encode("data: first\n\n"))
                await released
                controller.enqueue(encoder.encode("data: last\n\n"))
                controller.close()
              },
            }),
            { headers: { "content-type": "text/event-stream" } },
          ),
      )
      const response = await fetch(`${server.url}/events`)
      expect(response.headers.get("content-type")).toBe("text/event-stream")
      expect(response.headers.get("content-length")).toBeNull()
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
      // Nothing has released the producer: this chunk can only be the first event, sent while the stream is open.
      expect((await reader.read()).value).toBe("data: first\n\n")
      release()
      let rest = ""
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        rest += value
      }
      expect(rest).toBe("data: last\n\n")
    })

    it("a client that leaves before the first event cancels the stream", async () => {
      let cancelled = false
      const cancel = deferred()
      // The stream asks its producer once when it starts, and again when the bridge reads it.
      let pulls = 0
      const read = deferred()
      const server = await start(
        async () =>
          new Response(
            new ReadableStream<Uint8Array>({
              pull() {
                if (++pulls === 2) read.resolve()
              },
              cancel() {
                cancelled = true
                cancel.resolve()
              },
            }),
            { headers: { "content-type": "text/event-stream" } },
          ),
      )
      const socket = connect(server.port, "127.0.0.1")
      socket.on("error", () => undefined)
      socket.write("GET /events HTTP/1.1\r\nHost: a\r\n\r\n")
      await read.promise
      expect(cancelled).toBe(false)
      socket.destroy()
      await cancel.promise
      expect(cancelled).toBe(true)
    })

    it("a stream that fails before its first chunk is a 500, reported once", async () => {
      const errors: Array<unknown> = []
      const server = await start(
        async () =>
          new Response(
            new ReadableStream<Uint8Array>({
              pull(controller) {
                controller.error(new Error("producer failed"))
              },
            }),
          ),
        { onError: (error) => errors.push(error) },
      )
      const answer = await rawRequest(server.port, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
      expect(answer.status).toBe(500)
      expect(errors.map((e) => (e as Error).message)).toEqual(["producer failed"])
    })
  })

  it("createNodeServer can be used with node's own listen", async () => {
    const server = createNodeServer(echo)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as { port: number }).port
    const answer = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ port, host: "127.0.0.1", method: "TRACE", path: "/" }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on("error", reject)
      req.end()
    })
    expect(answer).toBe(405)
    await new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  })

  it("tells the handler the peer's address (IPv4 and IPv6), never one taken from a header", async () => {
    const handler: WebHandler = (request) => Response.json({ address: clientAddress(request) ?? null })
    const v4 = await start(handler)
    const answer = await rawRequest(
      v4.port,
      "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 203.0.113.9\r\nForwarded: for=203.0.113.9\r\n\r\n",
    )
    expect(JSON.parse(answer.body)).toEqual({ address: "127.0.0.1" })
    const v6 = await start(handler, { host: "::1" })
    const fromV6 = await fetch(`http://[::1]:${v6.port}/`)
    expect(await fromV6.json()).toEqual({ address: "::1" })
  })

  it("knows no address for a Request it did not make", () => {
    expect(clientAddress(new Request("http://a/"))).toBeUndefined()
  })

  it("refuses bad options", () => {
    expect(() => toNodeListener(echo, { maxBodyBytes: -1 })).toThrow("maxBodyBytes must be a non-negative integer")
    expect(() => toNodeListener(echo, { maxHeaders: 1.5 })).toThrow("maxHeaders must be a non-negative integer")
  })
})

describe("node handlers on the bridge", () => {
  const nodeEcho = nodeHandler((req, res, target) => {
    const text = JSON.stringify({ method: req.method, target })
    res.writeHead(200, { "content-type": "application/json", "content-length": String(text.length) }).end(text)
  })

  it("run with the validated origin-form target, from an absolute-form one too, and no Web objects", async () => {
    const server = await startNode(nodeEcho)
    const origin = await rawRequest(server.port, "GET /a/b?q=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    expect(JSON.parse(origin.body)).toEqual({ method: "GET", target: "/a/b?q=1" })
    const absolute = await rawRequest(server.port, "POST http://a/x?y HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
    expect(JSON.parse(absolute.body)).toEqual({ method: "POST", target: "/x?y" })
  })

  it.each([
    // A node handler reads its body itself: a chunked body growing past the limit is its own to refuse.
    ...refusals.filter(([name, , , message]) => message !== "" && !name.startsWith("a chunked body")),
    [
      "31 header fields over a limit of 30",
      `GET / HTTP/1.1\r\nHost: a\r\n${Array.from({ length: 30 }, (_, k) => `h${k}: v\r\n`).join("")}\r\n`,
      431,
      "more than 30 header fields",
    ] as const,
  ])("are not run for %s", async (_, request, status, message) => {
    let calls = 0
    const server = await startNode(
      nodeHandler(() => {
        calls++
      }),
      { maxBodyBytes: 1024, maxHeaders: 30 },
    )
    const answer = await rawRequest(server.port, request)
    expect(answer.status).toBe(status)
    const reasons: Record<number, string> = {
      400: "Bad Request",
      405: "Method Not Allowed",
      413: "Content Too Large",
      431: "Request Header Fields Too Large",
      501: "Not Implemented",
    }
    expect(answer.body).toBe(`${reasons[status]}: ${message}\n`)
    expect(calls).toBe(0)
  })

  it("a throw, a rejected promise: 500 without detail, reported once each; after the head, the connection is cut", async () => {
    const errors: Array<unknown> = []
    const server = await startNode(
      nodeHandler(async (_req, res, target) => {
        if (target === "/sync") throw new Error("sync detail")
        if (target === "/late") {
          res.writeHead(200, { "content-type": "text/plain" })
          res.write("partial")
          throw new Error("late detail")
        }
        await Promise.resolve()
        throw new Error("async detail")
      }),
      { onError: (error) => errors.push(error) },
    )
    for (const path of ["/sync", "/async"]) {
      const answer = await fetch(`${server.url}${path}`)
      expect(answer.status).toBe(500)
      expect(await answer.text()).toBe("Internal Server Error: the server could not answer this request\n")
    }
    const late = await rawRequest(server.port, "GET /late HTTP/1.1\r\nHost: a\r\n\r\n")
    expect(late.status).toBe(200)
    expect(late.closed).toBe(true)
    expect(errors.map((e) => (e as Error).message)).toEqual(["sync detail", "async detail", "late detail"])
  })

  it("a node handler reads the body itself, and a GET with a body has its connection closed", async () => {
    const server = await startNode(
      nodeHandler(async (req, res) => {
        const chunks: Array<Buffer> = []
        for await (const chunk of req) chunks.push(chunk as Buffer)
        res.end(Buffer.concat(chunks).toString())
      }),
    )
    expect(await (await fetch(server.url, { method: "POST", body: "hello" })).text()).toBe("hello")
    const get = await rawRequest(server.port, "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
    expect(get.headers.connection).toBe("close")
  })

  it("toNodeListener and createNodeServer take them too", async () => {
    for (const make of [
      () => createNodeServer(nodeEcho),
      () => {
        const server = createNodeServer(echo)
        server.removeAllListeners("request")
        server.on("request", toNodeListener(nodeEcho))
        return server
      },
    ]) {
      const server = make()
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const { port } = server.address() as { port: number }
      const answer = await rawRequest(port, "GET /n HTTP/1.1\r\nHost: a\r\n\r\n")
      expect(JSON.parse(answer.body)).toEqual({ method: "GET", target: "/n" })
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
