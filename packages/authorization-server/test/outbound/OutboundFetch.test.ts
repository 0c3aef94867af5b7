import { createServer as createHttpServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Layer, Logger, Result } from "effect"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { OutboundFetch, Resolver } from "../../src/outbound/index.js"
import { certificate, DOMAIN, sendJson, startServer, type TestServer } from "./support/https.js"

type Table = Record<string, ReadonlyArray<string>>

/** A resolver from a table that counts look-ups per name. */
const countingResolver = (table: Table) => {
  const inner = Resolver.Resolver.fromMap(table)
  const lookups: Array<string> = []
  const layer = Layer.succeed(
    Resolver.Resolver,
    Resolver.Resolver.of({
      lookup: (hostname) => {
        lookups.push(hostname)
        return inner.lookup(hostname)
      },
    }),
  )
  return { layer, lookups }
}

const run = (
  layer: Layer.Layer<OutboundFetch.OutboundFetch>,
  url: string,
  options?: OutboundFetch.RequestOptions,
): Promise<Result.Result<OutboundFetch.JsonResponse, OutboundFetch.OutboundRefused>> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const outbound = yield* OutboundFetch.OutboundFetch
      return yield* outbound.fetchJson(url, options)
    }).pipe(Effect.provide(layer), Effect.result),
  )

const refusal = (result: Result.Result<unknown, OutboundFetch.OutboundRefused>) => {
  if (Result.isSuccess(result)) throw new Error(`expected a refusal, got ${JSON.stringify(result.success)}`)
  const { reason, url, message } = result.failure
  return { tag: result.failure._tag, reason, url, message }
}

const name = (label: string) => `${label}.${DOMAIN}`

let server: TestServer
afterEach(async () => {
  await server?.close()
})

describe("OutboundFetch: refusals before any connection (production layer)", () => {
  const table: Table = {
    [name("loopback")]: ["127.0.0.1"],
    [name("private")]: ["10.0.0.1"],
    [name("metadata")]: ["169.254.169.254"],
    [name("v6-loopback")]: ["::1"],
    [name("unique-local")]: ["fd00::1"],
    [name("mapped")]: ["::ffff:127.0.0.1"],
    [name("nat64")]: ["64:ff9b::7f00:1"],
    [name("cgnat")]: ["100.64.0.1"],
    [name("mixed")]: ["93.184.215.14", "10.0.0.1"],
  }

  beforeEach(async () => {
    server = await startServer((_req, res) => sendJson(res, { ok: true }))
  })

  const cases: ReadonlyArray<readonly [string, string, string]> = [
    ["loopback", "127.0.0.1", "loopback (127.0.0.0/8)"],
    ["private", "10.0.0.1", "private (10.0.0.0/8)"],
    ["metadata", "169.254.169.254", "link-local (169.254.0.0/16)"],
    ["v6-loopback", "::1", "loopback (::1/128)"],
    ["unique-local", "fd00::1", "unique-local (fc00::/7)"],
    [
      "mapped",
      "::ffff:127.0.0.1",
      "loopback (127.0.0.0/8) embedded as 127.0.0.1 in an IPv4-mapped address (::ffff:0:0/96)",
    ],
    ["nat64", "64:ff9b::7f00:1", "loopback (127.0.0.0/8) embedded as 127.0.0.1 in a NAT64 address (64:ff9b::/96)"],
    ["cgnat", "100.64.0.1", "shared-address-space (100.64.0.0/10)"],
    ["mixed", "10.0.0.1", "private (10.0.0.0/8)"],
  ]

  it.each(cases)("refuses %s.keyway.test resolving to %s", async (label, address, description) => {
    const { layer, lookups } = countingResolver(table)
    const url = `${server.origin(label)}/client.json`
    const result = await run(OutboundFetch.OutboundFetch.layer().pipe(Layer.provide(layer)), url)
    expect(refusal(result)).toEqual({
      tag: "OutboundRefused",
      reason: "address",
      url,
      message: `refused ${url}: address ${address} of ${name(label)} is ${description}`,
    })
    expect(lookups).toEqual([name(label)])
    expect(server.connections()).toBe(0)
  })

  it.each([
    ["https://127.0.0.1:PORT/x", "https://127.0.0.1:PORT/x", "127.0.0.1", "loopback (127.0.0.0/8)"],
    ["https://0x7f.1:PORT/x", "https://127.0.0.1:PORT/x", "127.0.0.1", "loopback (127.0.0.0/8)"],
    ["https://2130706433:PORT/x", "https://127.0.0.1:PORT/x", "127.0.0.1", "loopback (127.0.0.0/8)"],
    ["https://[::1]:PORT/x", "https://[::1]:PORT/x", "::1", "loopback (::1/128)"],
    [
      "https://[::ffff:127.0.0.1]:PORT/x",
      "https://[::ffff:7f00:1]:PORT/x",
      "::ffff:7f00:1",
      "loopback (127.0.0.0/8) embedded as 127.0.0.1 in an IPv4-mapped address (::ffff:0:0/96)",
    ],
    [
      "https://169.254.169.254/latest/meta-data",
      "https://169.254.169.254/latest/meta-data",
      "169.254.169.254",
      "link-local (169.254.0.0/16)",
    ],
  ])("refuses the IP literal %s (host %s) without resolving it", async (input, _host, address, description) => {
    const { layer, lookups } = countingResolver({})
    const url = input.replace("PORT", String(server.port))
    const result = await run(OutboundFetch.OutboundFetch.layer().pipe(Layer.provide(layer)), url)
    expect(refusal(result)).toEqual({
      tag: "OutboundRefused",
      reason: "address",
      url,
      message: `refused ${url}: address ${address} is ${description}`,
    })
    expect(lookups).toEqual([])
    expect(server.connections()).toBe(0)
  })

  it.each(["http://public.keyway.test/client.json", "ftp://public.keyway.test/client.json", "file:///etc/passwd"])(
    "refuses the scheme of %s",
    async (url) => {
      const { layer, lookups } = countingResolver({ [name("public")]: ["93.184.215.14"] })
      const result = await run(OutboundFetch.OutboundFetch.layer().pipe(Layer.provide(layer)), url)
      expect(refusal(result)).toEqual({
        tag: "OutboundRefused",
        reason: "scheme",
        url,
        message: `refused ${url}: only https URLs are fetched`,
      })
      expect(lookups).toEqual([])
    },
  )

  it("refuses URLs with credentials and strings that are not URLs", async () => {
    const { layer } = countingResolver({})
    const outbound = OutboundFetch.OutboundFetch.layer().pipe(Layer.provide(layer))
    expect(refusal(await run(outbound, "https://user:pw@public.keyway.test/x"))).toEqual({
      tag: "OutboundRefused",
      reason: "url",
      url: "https://user:pw@public.keyway.test/x",
      message: "refused https://user:pw@public.keyway.test/x: URLs with credentials are not fetched",
    })
    expect(refusal(await run(outbound, "not a url"))).toEqual({
      tag: "OutboundRefused",
      reason: "url",
      url: "not a url",
      message: "not a url is not a valid URL",
    })
  })

  it("reports a name that does not resolve as a network failure", async () => {
    const { layer } = countingResolver({})
    const url = "https://nowhere.keyway.test/x"
    expect(refusal(await run(OutboundFetch.OutboundFetch.layer().pipe(Layer.provide(layer)), url))).toEqual({
      tag: "OutboundRefused",
      reason: "network",
      url,
      message: `could not fetch ${url}: could not resolve nowhere.keyway.test: ENOTFOUND`,
    })
  })
})

describe("OutboundFetch against real HTTPS servers on loopback", () => {
  // Test-only allowance: these names stand for internet hosts and their loopback address counts as public.
  const publicNames = new Set([name("public"), name("other")])
  const table: Table = {
    [name("public")]: ["127.0.0.1"],
    [name("other")]: ["127.0.0.1"],
    [name("private")]: ["127.0.0.1"],
  }
  const guard = (options: OutboundFetch.Options = {}, resolverTable: Table = table) => {
    const resolver = countingResolver(resolverTable)
    const layer = OutboundFetch.OutboundFetch.layerTest({
      ca: certificate().cert,
      ...options,
      allow: ({ hostname }) => publicNames.has(hostname),
    }).pipe(Layer.provide(resolver.layer))
    return { layer, lookups: resolver.lookups }
  }

  it("fetches a JSON document, resolving once and connecting to the vetted address with SNI and Host = the name", async () => {
    server = await startServer((_req, res) => sendJson(res, { hello: "world" }, { "cache-control": "max-age=60" }))
    const { layer, lookups } = guard()
    const url = `${server.origin("public")}/client.json`
    const result = await run(layer, url)
    expect(Result.isSuccess(result)).toBe(true)
    const response = Result.getOrThrow(result)
    expect(response.json).toEqual({ hello: "world" })
    expect(response.status).toBe(200)
    expect(response.url).toBe(url)
    expect(response.headers.get("cache-control")).toBe("max-age=60")
    expect(lookups).toEqual([name("public")])
    expect(server.requests).toEqual([
      { host: `${name("public")}:${server.port}`, path: "/client.json", servername: name("public") },
    ])
  })

  it("accepts application/*+json content types with parameters", async () => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/vnd.example+json; charset=utf-8" })
      res.end('{"a":1}')
    })
    const result = await run(guard().layer, `${server.origin("public")}/doc`)
    expect(Result.getOrThrow(result).json).toEqual({ a: 1 })
  })

  it("verifies the server certificate: without the test CA the self-signed certificate is refused", async () => {
    server = await startServer((_req, res) => sendJson(res, {}))
    const resolver = countingResolver(table)
    const layer = OutboundFetch.OutboundFetch.layerTest({ allow: ({ hostname }) => publicNames.has(hostname) }).pipe(
      Layer.provide(resolver.layer),
    )
    const url = `${server.origin("public")}/doc`
    expect(refusal(await run(layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "network",
      url,
      message: `could not fetch ${url}: self-signed certificate; if the root CA is installed locally, try running Node.js with --use-system-ca`,
    })
    expect(server.requests).toEqual([])
  })

  it("refuses a redirect from a public address to a private one, before connecting to it", async () => {
    server = await startServer((req, res) => {
      res.writeHead(302, { location: `${server.origin("private")}/latest/meta-data` })
      res.end()
      void req
    })
    const { layer, lookups } = guard()
    const url = `${server.origin("public")}/client.json`
    const target = `${server.origin("private")}/latest/meta-data`
    expect(refusal(await run(layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "address",
      url: target,
      message: `refused ${target}: address 127.0.0.1 of ${name("private")} is loopback (127.0.0.0/8)`,
    })
    expect(lookups).toEqual([name("public"), name("private")])
    expect(server.requests.map((r) => r.path)).toEqual(["/client.json"])
  })

  it("follows redirects between public hosts, re-resolving each hop", async () => {
    server = await startServer((req, res) => {
      if (req.url === "/a") res.writeHead(301, { location: `${server.origin("other")}/b` }).end()
      else if (req.url === "/b") res.writeHead(307, { location: "/c" }).end()
      else sendJson(res, { final: req.url })
    })
    const { layer, lookups } = guard()
    const response = Result.getOrThrow(await run(layer, `${server.origin("public")}/a`))
    expect(response.json).toEqual({ final: "/c" })
    expect(response.url).toBe(`${server.origin("other")}/c`)
    expect(lookups).toEqual([name("public"), name("other"), name("other")])
    expect(server.requests.map((r) => [r.servername, r.path])).toEqual([
      [name("public"), "/a"],
      [name("other"), "/b"],
      [name("other"), "/c"],
    ])
  })

  it("refuses the fourth redirect when at most three are allowed", async () => {
    server = await startServer((req, res) => {
      const n = Number(req.url?.slice(2))
      res.writeHead(302, { location: `/r${n + 1}` }).end()
    })
    const url = `${server.origin("public")}/r0`
    const last = `${server.origin("public")}/r3`
    expect(refusal(await run(guard().layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "too-many-redirects",
      url: last,
      message: `refused ${last}: more than 3 redirects`,
    })
    expect(server.requests.map((r) => r.path)).toEqual(["/r0", "/r1", "/r2", "/r3"])
  })

  it("refuses any redirect when redirects are off for the request", async () => {
    server = await startServer((_req, res) => res.writeHead(308, { location: "/elsewhere" }).end())
    const url = `${server.origin("public")}/client.json`
    expect(refusal(await run(guard().layer, url, { maxRedirects: 0 }))).toEqual({
      tag: "OutboundRefused",
      reason: "redirect",
      url,
      message: `refused ${url}: redirects are not followed (HTTP 308 to ${server.origin("public")}/elsewhere)`,
    })
    expect(server.requests).toHaveLength(1)
  })

  it("re-checks the scheme of every hop: a redirect to http is refused", async () => {
    server = await startServer((_req, res) => res.writeHead(302, { location: `http://${name("public")}/doc` }).end())
    const target = `http://${name("public")}/doc`
    expect(refusal(await run(guard().layer, `${server.origin("public")}/start`))).toEqual({
      tag: "OutboundRefused",
      reason: "scheme",
      url: target,
      message: `refused ${target}: only https URLs are fetched`,
    })
  })

  it("refuses a redirect without a Location header", async () => {
    server = await startServer((_req, res) => res.writeHead(302).end())
    const url = `${server.origin("public")}/x`
    expect(refusal(await run(guard().layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "redirect",
      url,
      message: `refused ${url}: HTTP 302 redirect without a Location header`,
    })
  })

  it("refuses a 10 MB document announced by Content-Length", async () => {
    const size = 10 * 1024 * 1024
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": size })
      res.end(Buffer.alloc(size, 0x20))
    })
    const url = `${server.origin("public")}/big.json`
    expect(refusal(await run(guard().layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "too-large",
      url,
      message: `${url} sent more than 65536 bytes`,
    })
  })

  it("stops reading a streamed 10 MB document as soon as the cap is exceeded", async () => {
    let written = 0
    let closed = false
    let onClosed: () => void = () => undefined
    const hungUp = new Promise<void>((resolve) => {
      onClosed = resolve
    })
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.on("close", () => {
        closed = true
        onClosed()
      })
      const chunk = Buffer.alloc(16 * 1024, 0x20)
      const pump = () => {
        while (written < 10 * 1024 * 1024 && !closed) {
          written += chunk.length
          if (!res.write(chunk)) return void res.once("drain", pump)
        }
        if (!closed) res.end()
      }
      pump()
    })
    const url = `${server.origin("public")}/big.json`
    expect(refusal(await run(guard().layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "too-large",
      url,
      message: `${url} sent more than 65536 bytes`,
    })
    await hungUp
    expect(written).toBeLessThan(10 * 1024 * 1024)
  })

  it("gives up on a document that trickles in slower than the time cap", async () => {
    const timers: Array<NodeJS.Timeout> = []
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.write("[")
      timers.push(setInterval(() => res.write("0,"), 20))
      res.on("close", () => timers.forEach(clearInterval))
    })
    const url = `${server.origin("public")}/slow.json`
    expect(refusal(await run(guard({ timeoutMs: 300 }).layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "timeout",
      url,
      message: `${url} did not answer within 300 ms`,
    })
    timers.forEach(clearInterval)
  })

  it("gives up on a server that never answers, across redirects", async () => {
    server = await startServer((req, res) => {
      if (req.url === "/start") res.writeHead(302, { location: "/hang" }).end()
    })
    const url = `${server.origin("public")}/start`
    expect(refusal(await run(guard({ timeoutMs: 300 }).layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "timeout",
      url,
      message: `${url} did not answer within 300 ms`,
    })
  })

  it.each([
    ["text/html", 'content type "text/html"'],
    ["application/jsonx", 'content type "application/jsonx"'],
    ["text/json", 'content type "text/json"'],
  ])("refuses the content type %s", async (type, described) => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": type })
      res.end("{}")
    })
    const url = `${server.origin("public")}/doc`
    expect(refusal(await run(guard().layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "content-type",
      url,
      message: `${url} answered with ${described}, expected application/json or an application/*+json type`,
    })
  })

  it("refuses a response without a content type", async () => {
    server = await startServer((_req, res) => {
      res.removeHeader("content-type")
      res.writeHead(200)
      res.end("{}")
    })
    const url = `${server.origin("public")}/doc`
    expect(refusal(await run(guard().layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "content-type",
      url,
      message: `${url} answered with no content type, expected application/json or an application/*+json type`,
    })
  })

  it.each([404, 500, 204])("refuses HTTP %i", async (status) => {
    server = await startServer((_req, res) => sendJson(res, { error: "x" }, {}, status))
    const url = `${server.origin("public")}/doc`
    expect(refusal(await run(guard().layer, url))).toEqual({
      tag: "OutboundRefused",
      reason: "status",
      url,
      message: `${url} answered HTTP ${status}, expected 200`,
    })
  })

  it("refuses a body that is not JSON", async () => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{nope")
    })
    const url = `${server.origin("public")}/doc`
    const error = refusal(await run(guard().layer, url))
    expect(error.reason).toBe("json")
    expect(error.message).toBe(`${url} did not send valid JSON: ${jsonError("{nope")}`)
  })
})

const jsonError = (text: string): string => {
  try {
    JSON.parse(text)
    return ""
  } catch (error) {
    return (error as Error).message
  }
}

describe("OutboundFetch development option allowInsecureLoopback", () => {
  const logs: Array<string> = []
  const capture = Logger.layer([Logger.make(({ logLevel, message }) => logs.push(`${logLevel}: ${String(message)}`))])

  it("is off by default: http loopback is refused", async () => {
    const { layer } = countingResolver({ localhost: ["127.0.0.1"] })
    const url = "http://localhost:1/client.json"
    expect(refusal(await run(OutboundFetch.OutboundFetch.layer().pipe(Layer.provide(layer)), url))).toEqual({
      tag: "OutboundRefused",
      reason: "scheme",
      url,
      message: `refused ${url}: only https URLs are fetched`,
    })
  })

  it("when on: fetches http from loopback, warns once, and still refuses other ranges and http elsewhere", async () => {
    const plain = createHttpServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end('{"dev":true}')
    })
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve))
    try {
      const port = (plain.address() as AddressInfo).port
      logs.length = 0
      const { layer } = countingResolver({
        localhost: ["127.0.0.1", "::1"],
        [name("private")]: ["10.0.0.1"],
        [name("public")]: ["93.184.215.14"],
      })
      const results = await Effect.runPromise(
        Effect.gen(function* () {
          const outbound = yield* OutboundFetch.OutboundFetch
          return [
            yield* Effect.result(outbound.fetchJson(`http://localhost:${port}/client.json`)),
            yield* Effect.result(outbound.fetchJson(`https://${name("private")}/client.json`)),
            yield* Effect.result(outbound.fetchJson(`http://${name("public")}/client.json`)),
          ] as const
        }).pipe(
          Effect.provide(OutboundFetch.OutboundFetch.layer({ allowInsecureLoopback: true }).pipe(Layer.provide(layer))),
          Effect.provide(capture),
        ),
      )
      expect(Result.getOrThrow(results[0]).json).toEqual({ dev: true })
      expect(refusal(results[1])).toEqual({
        tag: "OutboundRefused",
        reason: "address",
        url: `https://${name("private")}/client.json`,
        message: `refused https://${name("private")}/client.json: address 10.0.0.1 of ${name("private")} is private (10.0.0.0/8)`,
      })
      expect(refusal(results[2])).toEqual({
        tag: "OutboundRefused",
        reason: "scheme",
        url: `http://${name("public")}/client.json`,
        message: `refused http://${name("public")}/client.json: http is allowed only to loopback addresses (development option)`,
      })
      expect(logs).toEqual([
        "Warn: OutboundFetch: allowInsecureLoopback is ON: http and loopback addresses are fetched. Development only; never enable it in production.",
      ])
    } finally {
      plain.closeAllConnections()
      await new Promise<void>((resolve) => plain.close(() => resolve()))
    }
  })
})
