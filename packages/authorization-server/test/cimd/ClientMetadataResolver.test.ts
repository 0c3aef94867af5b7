import { createServer as createHttpServer } from "node:http"
import type { AddressInfo } from "node:net"
import { deferred } from "@keyway/testing"
import { Effect, Fiber, Layer, Logger, ManagedRuntime, Result } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { ClientMetadataResolver, TrustPolicy } from "../../src/cimd/index.js"
import { isLoopbackOnly } from "../../src/cimd/internal/document.js"
import { OutboundFetch, Resolver } from "../../src/outbound/index.js"
import { certificate, DOMAIN, type Handler, sendJson, startServer, type TestServer } from "../outbound/support/https.js"

const NOW = 1_800_000_000
const name = (label: string) => `${label}.${DOMAIN}`
// Names that stand for internet hosts in these tests; they resolve to the loopback test server.
const PUBLIC = new Set([name("client"), name("other"), name("bad")])
const TABLE = {
  [name("client")]: ["127.0.0.1"],
  [name("other")]: ["127.0.0.1"],
  [name("bad")]: ["127.0.0.1"],
  [name("private")]: ["127.0.0.1"],
  [name("loopback")]: ["127.0.0.1"],
  [name("ten")]: ["10.0.0.1"],
  [name("metadata")]: ["169.254.169.254"],
  [name("v6-loopback")]: ["::1"],
  [name("unique-local")]: ["fd00::1"],
  [name("mapped")]: ["::ffff:127.0.0.1"],
}

type Resolver_ = ClientMetadataResolver.ClientMetadataResolver
type Runtime = ManagedRuntime.ManagedRuntime<Resolver_, never>

const runtimes: Array<Runtime> = []
let server: TestServer | undefined

afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.dispose()
  await server?.close()
  server = undefined
})

interface Setup {
  readonly outbound?: OutboundFetch.Options
  readonly resolver?: ClientMetadataResolver.ResolverOptions
  readonly policy?: Layer.Layer<TrustPolicy.ClientTrustPolicy>
  /** Use the production guard (no test allowance). */
  readonly production?: boolean
}

const makeRuntime = (setup: Setup = {}): Runtime => {
  const guard = setup.production
    ? OutboundFetch.OutboundFetch.layer(setup.outbound)
    : OutboundFetch.OutboundFetch.layerTest({
        ca: certificate().cert,
        ...setup.outbound,
        allow: ({ hostname }) => PUBLIC.has(hostname),
      })
  const layer = ClientMetadataResolver.ClientMetadataResolver.layer(setup.resolver).pipe(
    Layer.provide(guard.pipe(Layer.provide(Resolver.Resolver.layerMap(TABLE)))),
    Layer.provide(setup.policy ?? TrustPolicy.ClientTrustPolicy.layerAcceptAny),
  )
  const runtime = ManagedRuntime.make(layer)
  runtimes.push(runtime)
  return runtime
}

const resolveWith = (runtime: Runtime, clientId: string, now = NOW) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const resolver = yield* ClientMetadataResolver.ClientMetadataResolver
      return yield* resolver.resolve(clientId, now)
    }).pipe(Effect.result),
  )

const failure = (result: Result.Result<unknown, ClientMetadataResolver.ClientMetadataError>) => {
  if (Result.isSuccess(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.success)}`)
  const { _tag, error, reason, client_id, message, fetch, path } = result.failure
  return {
    _tag,
    error,
    reason,
    client_id,
    message,
    ...(fetch === undefined ? {} : { fetch }),
    ...(path === undefined ? {} : { path }),
  }
}

const doc = (clientId: string, extra: Record<string, unknown> = {}) => ({
  client_id: clientId,
  client_name: "Example MCP Client",
  redirect_uris: ["https://app.example.com/callback"],
  ...extra,
})

/** Serves `body(clientId)` at /client.json with the given headers. */
const serveDocument = async (
  body: (clientId: string) => unknown,
  headers: Record<string, string> = {},
): Promise<{ server: TestServer; clientId: string }> => {
  let clientId = ""
  const handler: Handler = (req, res) => {
    if (req.url === "/client.json") sendJson(res, body(clientId), headers)
    else sendJson(res, { error: "not found" }, {}, 404)
  }
  server = await startServer(handler)
  clientId = `${server.origin("client")}/client.json`
  return { server, clientId }
}

describe("ClientMetadataResolver: a good document over real HTTPS", () => {
  it("resolves, validates and maps the document to a client record of its RFC 7591 members", async () => {
    const { server, clientId } = await serveDocument(
      (id) =>
        doc(id, {
          client_uri: "https://app.example.com",
          logo_uri: "https://app.example.com/logo.png",
          grant_types: ["authorization_code", "refresh_token"],
          response_types: ["code"],
          token_endpoint_auth_method: "none",
          scope: "mcp:read",
          contacts: ["ops@example.com"],
          software_id: "example-client",
          software_version: "1.2.3",
          application_type: "web",
          dpop_bound_access_tokens: true,
          unknown_extension: true,
        }),
      { "cache-control": "max-age=600" },
    )
    const runtime = makeRuntime()
    const resolved = Result.getOrThrow(await resolveWith(runtime, clientId))
    expect(resolved.client).toEqual({
      client_id: clientId,
      client_id_issued_at: NOW,
      client_secret_expires_at: 0,
      redirect_uris: ["https://app.example.com/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      client_name: "Example MCP Client",
      client_uri: "https://app.example.com",
      logo_uri: "https://app.example.com/logo.png",
      contacts: ["ops@example.com"],
      scope: "mcp:read",
      application_type: "web",
      software_id: "example-client",
      software_version: "1.2.3",
      origin: "metadata-document",
      expires_at: NOW + 600,
    })
    expect(resolved.document.client_id).toBe(clientId)
    expect(resolved.trust).toEqual({ allowed: true, verified: false, host: name("client") })
    expect(resolved.loopbackOnly).toBe(false)
    expect(server.requests).toEqual([
      { host: `${name("client")}:${server.port}`, path: "/client.json", servername: name("client") },
    ])
  })

  it("fills the defaults (authorization_code, code, none) and accepts private_key_jwt with jwks_uri or public jwks", async () => {
    const jwk = {
      kty: "EC",
      crv: "P-256",
      x: "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
      y: "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
    }
    let variant = 0
    const { clientId } = await serveDocument((id) =>
      variant === 0
        ? doc(id)
        : variant === 1
          ? doc(id, { token_endpoint_auth_method: "private_key_jwt", jwks_uri: "https://app.example.com/jwks.json" })
          : doc(id, { token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [jwk] } }),
    )
    const runtime = makeRuntime()
    const plain = Result.getOrThrow(await resolveWith(runtime, clientId)).client
    expect([plain.grant_types, plain.response_types, plain.token_endpoint_auth_method]).toEqual([
      ["authorization_code"],
      ["code"],
      "none",
    ])
    variant = 1
    const withUri = Result.getOrThrow(await resolveWith(makeRuntime(), clientId)).client
    expect([withUri.token_endpoint_auth_method, withUri.jwks_uri]).toEqual([
      "private_key_jwt",
      "https://app.example.com/jwks.json",
    ])
    variant = 2
    const withKeys = Result.getOrThrow(await resolveWith(makeRuntime(), clientId)).client
    expect(withKeys.jwks).toEqual({ keys: [jwk] })
  })

  it("marks clients on the allow-list as verified", async () => {
    const { clientId } = await serveDocument((id) => doc(id))
    const runtime = makeRuntime({ policy: TrustPolicy.ClientTrustPolicy.layer({ allow: [`*.${DOMAIN}`] }) })
    expect(Result.getOrThrow(await resolveWith(runtime, clientId)).trust).toEqual({
      allowed: true,
      verified: true,
      host: name("client"),
    })
  })

  it("flags a client whose redirect URIs are all on loopback", async () => {
    const { clientId } = await serveDocument((id) =>
      doc(id, { redirect_uris: ["http://127.0.0.1:3000/callback", "http://localhost/cb", "http://[::1]:8080/cb"] }),
    )
    const resolved = Result.getOrThrow(await resolveWith(makeRuntime(), clientId))
    expect(resolved.loopbackOnly).toBe(true)
  })
})

describe("ClientMetadataResolver caching", () => {
  it("does not fetch a cached document again until its lifetime ends", async () => {
    const { server, clientId } = await serveDocument((id) => doc(id), { "cache-control": "max-age=600" })
    const runtime = makeRuntime()
    const first = Result.getOrThrow(await resolveWith(runtime, clientId, NOW))
    const second = Result.getOrThrow(await resolveWith(runtime, clientId, NOW + 599))
    expect(second.client).toEqual(first.client)
    expect(server.requests).toHaveLength(1)
    const third = Result.getOrThrow(await resolveWith(runtime, clientId, NOW + 600))
    expect(server.requests).toHaveLength(2)
    expect(third.client.client_id_issued_at).toBe(NOW + 600)
    expect(third.client.expires_at).toBe(NOW + 1200)
  })

  it.each([
    ["max-age=10", 300],
    ["max-age=99999999", 86_400],
    ["no-store", 300],
    ["no-cache", 300],
    ["private, max-age=1000", 1000],
  ])("Cache-Control %s gives a lifetime of %i s (bounds 300..86400)", async (cacheControl, seconds) => {
    const { clientId } = await serveDocument((id) => doc(id), { "cache-control": cacheControl })
    const resolved = Result.getOrThrow(await resolveWith(makeRuntime(), clientId))
    expect(resolved.client.expires_at).toBe(NOW + seconds)
  })

  it("honours Expires and configurable bounds", async () => {
    const { server, clientId } = await serveDocument((id) => doc(id), {
      expires: new Date((NOW + 90) * 1000).toUTCString(),
      date: new Date(NOW * 1000).toUTCString(),
    })
    const runtime = makeRuntime({ resolver: { minCacheSeconds: 60, maxCacheSeconds: 120 } })
    expect(Result.getOrThrow(await resolveWith(runtime, clientId)).client.expires_at).toBe(NOW + 90)
    await resolveWith(runtime, clientId, NOW + 89)
    expect(server.requests).toHaveLength(1)
  })

  it("shares one fetch among concurrent resolutions of the same client ID", async () => {
    let clientId = ""
    // The document is held back until the request has arrived: all five resolutions start before it can come.
    const arrived = deferred()
    const held = deferred()
    server = await startServer((_req, res) => {
      arrived.resolve()
      void held.promise.then(() => sendJson(res, doc(clientId)))
    })
    clientId = `${server.origin("client")}/client.json`
    const runtime = makeRuntime()
    const results = await runtime.runPromise(
      Effect.gen(function* () {
        const resolver = yield* ClientMetadataResolver.ClientMetadataResolver
        const all = yield* Effect.forkChild(
          Effect.all(
            Array.from({ length: 5 }, () => resolver.resolve(clientId, NOW)),
            { concurrency: "unbounded" },
          ),
        )
        yield* Effect.promise(() => arrived.promise)
        held.resolve()
        return yield* Fiber.join(all)
      }),
    )
    expect(results.map((r) => r.client.client_id)).toEqual(Array(5).fill(clientId))
    expect(server.requests).toHaveLength(1)
  })

  it("a caller giving up does not cancel the shared fetch for the others", async () => {
    let clientId = ""
    const arrived = deferred()
    const held = deferred()
    server = await startServer((_req, res) => {
      arrived.resolve()
      void held.promise.then(() => sendJson(res, doc(clientId)))
    })
    clientId = `${server.origin("client")}/client.json`
    const runtime = makeRuntime()
    const resolved = await runtime.runPromise(
      Effect.gen(function* () {
        const resolver = yield* ClientMetadataResolver.ClientMetadataResolver
        const first = yield* Effect.forkChild(resolver.resolve(clientId, NOW))
        yield* Effect.promise(() => arrived.promise)
        yield* Fiber.interrupt(first)
        const second = yield* Effect.forkChild(resolver.resolve(clientId, NOW))
        held.resolve()
        return yield* Fiber.join(second)
      }),
    )
    expect(resolved.client.client_id).toBe(clientId)
    expect(server.requests).toHaveLength(1)
  })

  it("backs off briefly after a failure instead of fetching again, then retries", async () => {
    let broken = true
    const { server, clientId } = await serveDocument((id) => (broken ? { client_id: id } : doc(id)))
    const runtime = makeRuntime()
    const first = failure(await resolveWith(runtime, clientId, NOW))
    expect(first.reason).toBe("document")
    broken = false
    expect(failure(await resolveWith(runtime, clientId, NOW + 4))).toEqual(first)
    expect(server.requests).toHaveLength(1)
    expect(Result.isSuccess(await resolveWith(runtime, clientId, NOW + 5))).toBe(true)
    expect(server.requests).toHaveLength(2)
  })

  it("forget drops the cached document", async () => {
    const { server, clientId } = await serveDocument((id) => doc(id), { "cache-control": "max-age=600" })
    const runtime = makeRuntime()
    await resolveWith(runtime, clientId)
    await runtime.runPromise(
      Effect.gen(function* () {
        const resolver = yield* ClientMetadataResolver.ClientMetadataResolver
        yield* resolver.forget(clientId)
      }),
    )
    await resolveWith(runtime, clientId)
    expect(server.requests).toHaveLength(2)
  })

  it("keeps at most maxEntries client IDs, dropping the oldest", async () => {
    server = await startServer((req, res) => sendJson(res, doc(`${server!.origin("client")}${req.url}`)))
    const runtime = makeRuntime({ resolver: { maxEntries: 2 } })
    const id = (n: number) => `${server!.origin("client")}/c${n}.json`
    for (const n of [1, 2, 3]) await resolveWith(runtime, id(n))
    await resolveWith(runtime, id(3))
    await resolveWith(runtime, id(2))
    expect(server.requests.map((r) => r.path)).toEqual(["/c1.json", "/c2.json", "/c3.json"])
    await resolveWith(runtime, id(1))
    expect(server.requests.map((r) => r.path)).toEqual(["/c1.json", "/c2.json", "/c3.json", "/c1.json"])
  })
})

describe("ClientMetadataResolver: bad input (issue 5)", () => {
  const addressCases = [
    ["loopback", "127.0.0.1", "loopback (127.0.0.0/8)"],
    ["ten", "10.0.0.1", "private (10.0.0.0/8)"],
    ["metadata", "169.254.169.254", "link-local (169.254.0.0/16)"],
    ["v6-loopback", "::1", "loopback (::1/128)"],
    ["unique-local", "fd00::1", "unique-local (fc00::/7)"],
    [
      "mapped",
      "::ffff:127.0.0.1",
      "loopback (127.0.0.0/8) embedded as 127.0.0.1 in an IPv4-mapped address (::ffff:0:0/96)",
    ],
  ] as const

  it.each(addressCases)(
    "refuses a client ID on %s.keyway.test (%s) without connecting",
    async (label, address, what) => {
      server = await startServer((_req, res) => sendJson(res, {}))
      const clientId = `${server.origin(label)}/client.json`
      expect(failure(await resolveWith(makeRuntime({ production: true }), clientId))).toEqual({
        _tag: "ClientMetadataError",
        error: "invalid_client",
        reason: "fetch",
        fetch: "address",
        client_id: clientId,
        message: `the client ID metadata document could not be fetched: refused ${clientId}: address ${address} of ${name(label)} is ${what}`,
      })
      expect(server.connections()).toBe(0)
    },
  )

  it("refuses a redirect from a public address to a private one (documents are never redirected)", async () => {
    server = await startServer((_req, res) =>
      res.writeHead(302, { location: `${server!.origin("private")}/client.json` }).end(),
    )
    const clientId = `${server.origin("client")}/client.json`
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "fetch",
      fetch: "redirect",
      client_id: clientId,
      message: `the client ID metadata document could not be fetched: refused ${clientId}: redirects are not followed (HTTP 302 to ${server.origin("private")}/client.json)`,
    })
    expect(server.requests.map((r) => r.servername)).toEqual([name("client")])
  })

  it("refuses a 10 MB document", async () => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(Buffer.alloc(10 * 1024 * 1024, 0x20))
    })
    const clientId = `${server.origin("client")}/client.json`
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "fetch",
      fetch: "too-large",
      client_id: clientId,
      message: `the client ID metadata document could not be fetched: ${clientId} sent more than 65536 bytes`,
    })
  })

  it("applies maxDocumentBytes (the draft recommends 5 KB) to the document", async () => {
    const { clientId } = await serveDocument((id) => doc(id, { client_name: "x".repeat(6000) }))
    expect(failure(await resolveWith(makeRuntime({ resolver: { maxDocumentBytes: 5120 } }), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "fetch",
      fetch: "too-large",
      client_id: clientId,
      message: `the client ID metadata document could not be fetched: ${clientId} sent more than 5120 bytes`,
    })
    expect(Result.isSuccess(await resolveWith(makeRuntime(), clientId))).toBe(true)
  })

  it("refuses a document that trickles in slower than the time cap", async () => {
    const timers: Array<NodeJS.Timeout> = []
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.write("{")
      timers.push(setInterval(() => res.write(" "), 20))
      res.on("close", () => timers.forEach(clearInterval))
    })
    const clientId = `${server.origin("client")}/client.json`
    expect(failure(await resolveWith(makeRuntime({ outbound: { timeoutMs: 300 } }), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "fetch",
      fetch: "timeout",
      client_id: clientId,
      message: `the client ID metadata document could not be fetched: ${clientId} did not answer within 300 ms`,
    })
    timers.forEach(clearInterval)
  })

  it("refuses a client_id mismatch", async () => {
    const { clientId } = await serveDocument(() => doc("https://impostor.example/client.json"))
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "document",
      path: "client_id",
      client_id: clientId,
      message: `client ID metadata document: "client_id" must equal the document URL exactly: expected "${clientId}", got "https://impostor.example/client.json"`,
    })
  })

  it("refuses a document without redirect_uris", async () => {
    const { clientId } = await serveDocument((id) => ({ client_id: id, client_name: "No Redirects" }))
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "document",
      path: "redirect_uris",
      client_id: clientId,
      message: 'client ID metadata document: "redirect_uris" is required',
    })
  })

  it("refuses a document without client_name", async () => {
    const { clientId } = await serveDocument((id) => ({ client_id: id, redirect_uris: ["https://a.example/cb"] }))
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "document",
      path: "client_name",
      client_id: clientId,
      message: 'client ID metadata document: "client_name" is required',
    })
  })

  it("refuses the wrong content type", async () => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" })
      res.end("<html></html>")
    })
    const clientId = `${server.origin("client")}/client.json`
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "fetch",
      fetch: "content-type",
      client_id: clientId,
      message: `the client ID metadata document could not be fetched: ${clientId} answered with content type "text/html", expected application/json or an application/*+json type`,
    })
  })

  it("refuses a body that is not JSON", async () => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end("not json")
    })
    const clientId = `${server.origin("client")}/client.json`
    const error = failure(await resolveWith(makeRuntime(), clientId))
    expect([error.error, error.reason, error.fetch]).toEqual(["invalid_client", "fetch", "json"])
  })

  it("refuses a status other than 200", async () => {
    const { clientId } = await serveDocument((id) => doc(id))
    const missing = clientId.replace("client.json", "missing.json")
    expect(failure(await resolveWith(makeRuntime(), missing))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "fetch",
      fetch: "status",
      client_id: missing,
      message: `the client ID metadata document could not be fetched: ${missing} answered HTTP 404, expected 200`,
    })
  })

  it.each([
    ["http://client.keyway.test/client.json", "must use the https scheme"],
    ["https://client.keyway.test", "must contain a path component"],
    ["https://client.keyway.test/", "must contain a path component"],
    ["https://client.keyway.test/a/../client.json", "must not contain dot path segments"],
    ["https://client.keyway.test/client.json#frag", "must not contain a fragment"],
    ["https://user:pw@client.keyway.test/client.json", "must not contain a username or password"],
    [`https://client.keyway.test/${"a".repeat(2100)}`, "must not be longer than 2048 characters"],
  ])("refuses the client_id %s as invalid_request without fetching", async (clientId, problem) => {
    const { server } = await serveDocument((id) => doc(id))
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_request",
      reason: "client-id",
      client_id: clientId,
      message: `client_id is not a valid client ID metadata document URL: ${problem}`,
    })
    expect(server.requests).toHaveLength(0)
  })

  it.each([
    [
      { client_secret: "s3cret" },
      "client_secret",
      "must not be present: a client identified by a metadata document has no shared secret",
    ],
    [
      { token_endpoint_auth_method: "client_secret_basic" },
      "token_endpoint_auth_method",
      'must be "none" or "private_key_jwt", got "client_secret_basic"',
    ],
    [
      { token_endpoint_auth_method: "private_key_jwt" },
      "jwks_uri",
      'is required when "token_endpoint_auth_method" is "private_key_jwt" (or give "jwks")',
    ],
    [
      {
        token_endpoint_auth_method: "private_key_jwt",
        jwks: { keys: [{ kty: "EC", crv: "P-256", x: "a", y: "b", d: "private" }] },
      },
      "jwks.keys.0.d",
      "must not be present: only public keys may be published",
    ],
    [
      { token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [{ kty: "oct", k: "GawgguFyGrWKav7AX4VKUg" }] } },
      "jwks.keys.0.k",
      "must not be present: only public keys may be published",
    ],
    [{ jwks: { keys: [{ use: "sig" }] } }, "jwks.keys.0.kty", "is required"],
    [
      { redirect_uris: ["javascript:alert(1)"] },
      "redirect_uris.0",
      "must use https, http on loopback, or a reverse-domain private-use scheme",
    ],
    [
      { redirect_uris: ["https://ok.example/cb", "http://app.example.com/cb"] },
      "redirect_uris.1",
      "must use https unless its host is loopback",
    ],
    [{ redirect_uris: ["https://app.example.com/cb#x"] }, "redirect_uris.0", "must not contain a fragment"],
    [{ application_type: "desktop" }, "application_type", 'must be "web" or "native", got "desktop"'],
  ])("refuses the document field %j", async (extra, path, problem) => {
    const { clientId } = await serveDocument((id) => doc(id, extra))
    expect(failure(await resolveWith(makeRuntime(), clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "document",
      path,
      client_id: clientId,
      message: `client ID metadata document: "${path}" ${problem}`,
    })
  })

  it("accepts a reverse-domain private-use redirect URI for native apps", async () => {
    const { clientId } = await serveDocument((id) => doc(id, { redirect_uris: ["com.example.app:/callback"] }))
    const resolved = Result.getOrThrow(await resolveWith(makeRuntime(), clientId))
    expect(resolved.client.redirect_uris).toEqual(["com.example.app:/callback"])
    // A private-use scheme reaches an application on the user's machine, as the consent page warns (RFC 8252 §8.6).
    expect(resolved.loopbackOnly).toBe(true)
  })

  it("refuses a host the trust policy denies, without fetching", async () => {
    const { server } = await serveDocument((id) => doc(id))
    const clientId = `${server.origin("bad")}/client.json`
    const runtime = makeRuntime({ policy: TrustPolicy.ClientTrustPolicy.layer({ deny: [name("bad")] }) })
    expect(failure(await resolveWith(runtime, clientId))).toEqual({
      _tag: "ClientMetadataError",
      error: "invalid_client",
      reason: "untrusted",
      client_id: clientId,
      message: `client_id host ${name("bad")} is not accepted by this authorization server`,
    })
    expect(server.requests).toHaveLength(0)
  })

  it("maps failures to OAuth errors for the user", async () => {
    const runtime = makeRuntime()
    const notUrl = await resolveWith(runtime, "http://client.keyway.test/c")
    if (Result.isSuccess(notUrl)) throw new Error("expected failure")
    const oauth = notUrl.failure.toOAuthError()
    expect([oauth.error, oauth.status, oauth.error_description]).toEqual([
      "invalid_request",
      400,
      "client_id is not a valid client ID metadata document URL: must use the https scheme",
    ])
    const { clientId } = await serveDocument(() => doc("https://impostor.example/client.json"))
    const mismatch = await resolveWith(runtime, clientId)
    if (Result.isSuccess(mismatch)) throw new Error("expected failure")
    const body = mismatch.failure.toOAuthError().body()
    expect(body).toEqual({
      error: "invalid_client",
      error_description: `client ID metadata document: 'client_id' must equal the document URL exactly: expected '${clientId}', got 'https://impostor.example/client.json'`,
    })
    expect(mismatch.failure.toOAuthError().status).toBe(401)
  })
})

describe("ClientMetadataResolver development option allowHttpLoopbackClientIds", () => {
  it("is off by default: an http://localhost client ID is invalid_request", async () => {
    const clientId = "http://localhost:3000/client.json"
    expect(failure(await resolveWith(makeRuntime(), clientId))).toMatchObject({
      error: "invalid_request",
      reason: "client-id",
      message: "client_id is not a valid client ID metadata document URL: must use the https scheme",
    })
  })

  it("when on (with the guard's insecure loopback), resolves an http loopback client ID and warns once", async () => {
    let clientId = ""
    const plain = createHttpServer((_req, res) => {
      const text = JSON.stringify(doc(clientId, { redirect_uris: ["http://localhost:3000/callback"] }))
      res.writeHead(200, { "content-type": "application/json" })
      res.end(text)
    })
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve))
    try {
      clientId = `http://localhost:${(plain.address() as AddressInfo).port}/client.json`
      const logs: Array<string> = []
      const capture = Logger.layer([
        Logger.make(({ logLevel, message }) => logs.push(`${logLevel}: ${String(message)}`)),
      ])
      const layer = ClientMetadataResolver.ClientMetadataResolver.layer({ allowHttpLoopbackClientIds: true }).pipe(
        Layer.provide(
          OutboundFetch.OutboundFetch.layer({ allowInsecureLoopback: true }).pipe(
            Layer.provide(Resolver.Resolver.layerMap({ localhost: ["127.0.0.1"] })),
          ),
        ),
        Layer.provide(TrustPolicy.ClientTrustPolicy.layerAcceptAny),
        Layer.provide(capture),
      )
      const [resolved, mismatch] = await Effect.runPromise(
        Effect.gen(function* () {
          const resolver = yield* ClientMetadataResolver.ClientMetadataResolver
          const ok = yield* resolver.resolve(clientId, NOW)
          const other = yield* Effect.result(resolver.resolve(clientId.replace("client.json", "other.json"), NOW))
          return [ok, other] as const
        }).pipe(Effect.provide(layer)),
      )
      expect(resolved.client.client_id).toBe(clientId)
      expect(resolved.document.client_id).toBe(clientId)
      expect(resolved.loopbackOnly).toBe(true)
      const otherId = clientId.replace("client.json", "other.json")
      expect(failure(mismatch)).toMatchObject({
        reason: "document",
        path: "client_id",
        message: `client ID metadata document: "client_id" must equal the document URL exactly: expected "${otherId}", got "${clientId}"`,
      })
      expect(logs.sort()).toEqual([
        "Warn: ClientMetadataResolver: allowHttpLoopbackClientIds is ON: http://localhost client IDs are accepted. Development only; never enable it in production.",
        "Warn: OutboundFetch: allowInsecureLoopback is ON: http and loopback addresses are fetched. Development only; never enable it in production.",
      ])
    } finally {
      plain.closeAllConnections()
      await new Promise<void>((resolve) => plain.close(() => resolve()))
    }
  })
})

describe("isLoopbackOnly", () => {
  it.each([
    [["http://127.0.0.1:3000/cb"], true],
    [["http://localhost/cb", "http://[::1]:1/cb"], true],
    [["http://app.localhost/cb"], true],
    [["http://127.0.0.1/cb", "https://app.example.com/cb"], false],
    [["com.example.app:/cb"], true],
    [["com.example.app:/cb", "https://app.example.com/cb"], false],
    [[], false],
  ])("%j -> %s", (uris, expected) => {
    expect(isLoopbackOnly(uris)).toBe(expected)
  })

  it("isClientIdUrl recognises URL client IDs", () => {
    expect(ClientMetadataResolver.isClientIdUrl("https://a.example/c")).toBe(true)
    expect(ClientMetadataResolver.isClientIdUrl("HTTP://a.example/c")).toBe(true)
    expect(ClientMetadataResolver.isClientIdUrl("s6BhdRkqt3")).toBe(false)
  })
})
