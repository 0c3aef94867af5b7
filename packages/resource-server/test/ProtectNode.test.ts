import type { IncomingMessage, ServerResponse } from "node:http"
import { hostileRequests, rawRequest, unauthenticated } from "@keyway/testing/raw"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Descriptions } from "../src/internal/bearer.js"
import { type NodeAuthenticated, protectNode } from "../src/node/index.js"
import { listen, type RunningServer } from "../src/node/Node.js"
import {
  type Authenticated,
  createProtectedResource,
  type ProtectedResourceOptions,
  type ProtectedResourceService,
} from "../src/ProtectedResource.js"
import { jwt } from "../src/TokenVerifier.js"
import { accessToken, makeKey, now, type SigningKey, startJwks } from "./helpers.js"

const ISSUER = "https://as.example.com"
const RESOURCE = "https://mcp.example.com/mcp"
const METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
const LIMIT = 2048

type Jwks = Awaited<ReturnType<typeof startJwks>>

let jwks: Jwks
let key: SigningKey
const running: Array<RunningServer> = []
// The Web form and the node form of one configuration, each on its own server.
let web: RunningServer
let node: RunningServer
let seen: Array<NodeAuthenticated> = []

const options = (): ProtectedResourceOptions => ({
  resource: RESOURCE,
  authorizationServers: [ISSUER],
  verifier: jwt({ jwksUri: jwks.url, jwksCooldownMs: 60_000 }),
  scopesSupported: ["mcp:tools", "notes:write"],
  requiredScopes: ["mcp:tools"],
  toolScopes: { write_note: ["notes:write"] },
  cors: { origins: ["https://app.example.com"] },
  maxBodyBytes: LIMIT,
})

const describeAuth = (auth: Authenticated, body: string | null) =>
  JSON.stringify({ subject: auth.token.subject, scopes: auth.token.scopes, body })

const nodeEcho = (_req: IncomingMessage, res: ServerResponse, auth: NodeAuthenticated): void => {
  seen.push(auth)
  const text = describeAuth(auth, auth.body === undefined ? null : new TextDecoder().decode(auth.body))
  res.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) })
  res.end(text)
}

const webEcho = async (request: Request, auth: Authenticated): Promise<Response> =>
  new Response(describeAuth(auth, request.body === null ? null : await request.text()), {
    headers: { "content-type": "application/json" },
  })

const serve = async (protectedResource: ProtectedResourceService, form: "web" | "node") => {
  const server = await listen(
    form === "web" ? protectedResource.protect(webEcho) : protectNode(protectedResource, nodeEcho),
    { publicUrl: "https://mcp.example.com" },
  )
  running.push(server)
  return server
}

const token = (scope = "mcp:tools", extra: Record<string, unknown> = {}) =>
  accessToken(key, ISSUER, RESOURCE, scope, extra)

beforeAll(async () => {
  key = await makeKey("k1")
  jwks = await startJwks([key])
  web = await serve(createProtectedResource(options()), "web")
  node = await serve(createProtectedResource(options()), "node")
})

afterAll(async () => {
  for (const r of running.splice(0)) await r.close()
  await jwks.close()
})

interface Case {
  readonly name: string
  readonly path?: string
  readonly init: () => Promise<RequestInit>
}

const rpc = (method: string, params: Record<string, unknown> = {}) =>
  JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })

const post = (body: string, headers: Record<string, string> = {}): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body,
})

const cases: ReadonlyArray<Case> = [
  { name: "GET the path-specific metadata", path: "/.well-known/oauth-protected-resource/mcp", init: async () => ({}) },
  { name: "GET the root metadata", path: "/.well-known/oauth-protected-resource", init: async () => ({}) },
  {
    name: "HEAD the metadata",
    path: "/.well-known/oauth-protected-resource/mcp",
    init: async () => ({ method: "HEAD" }),
  },
  {
    name: "POST to the metadata",
    path: "/.well-known/oauth-protected-resource/mcp",
    init: async () => ({ method: "POST", body: "{}" }),
  },
  {
    name: "a CORS preflight from an allowed origin",
    init: async () => ({
      method: "OPTIONS",
      headers: {
        origin: "https://app.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    }),
  },
  {
    name: "a CORS preflight from another origin",
    init: async () => ({
      method: "OPTIONS",
      headers: { origin: "https://evil.example", "access-control-request-method": "POST" },
    }),
  },
  { name: "no token", init: async () => post(rpc("tools/list")) },
  {
    name: "no token, from an allowed origin",
    init: async () => post(rpc("tools/list"), { origin: "https://app.example.com" }),
  },
  { name: "a token that is not a JWT", init: async () => post(rpc("tools/list"), { authorization: "Bearer abc" }) },
  {
    name: "an expired token",
    init: async () =>
      post(rpc("tools/list"), { authorization: `Bearer ${await token("mcp:tools", { exp: now() - 3600 })}` }),
  },
  {
    name: "a token for another resource",
    init: async () =>
      post(rpc("tools/list"), {
        authorization: `Bearer ${await token("mcp:tools", { aud: "https://other.example/mcp" })}`,
      }),
  },
  {
    name: "a token without the required scope",
    init: async () => post(rpc("tools/list"), { authorization: `Bearer ${await token("profile")}` }),
  },
  {
    name: "a tool call the token's scopes do not cover",
    init: async () =>
      post(rpc("tools/call", { name: "write_note", arguments: {} }), { authorization: `Bearer ${await token()}` }),
  },
  {
    name: "a tool call the token's scopes cover",
    init: async () =>
      post(rpc("tools/call", { name: "write_note", arguments: {} }), {
        authorization: `Bearer ${await token("mcp:tools notes:write")}`,
      }),
  },
  {
    name: "a body that is not JSON, with per-tool scopes",
    init: async () => post("{not json", { authorization: `Bearer ${await token()}` }),
  },
  {
    name: "a token in the query",
    path: "/mcp?access_token=abc",
    init: async () => post(rpc("tools/list"), { authorization: `Bearer ${await token()}` }),
  },
  {
    name: "a token in a form body",
    init: async () => ({
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "access_token=abc",
    }),
  },
  { name: "GET with a valid token", init: async () => ({ headers: { authorization: `Bearer ${await token()}` } }) },
  {
    name: "POST with a valid token, from an allowed origin",
    init: async () =>
      post(rpc("tools/list"), { authorization: `Bearer ${await token()}`, origin: "https://app.example.com" }),
  },
  {
    name: "a chunked body over the limit, authenticated",
    init: async () =>
      ({
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${await token()}` },
        body: new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(`{"pad":"${"x".repeat(LIMIT)}"}`))
            controller.close()
          },
        }),
        duplex: "half",
      }) as RequestInit,
  },
]

const HEADERS = [
  "content-type",
  "www-authenticate",
  "cache-control",
  "allow",
  "access-control-allow-origin",
  "access-control-allow-methods",
  "access-control-allow-headers",
  "access-control-expose-headers",
  "access-control-max-age",
  "vary",
]

const answer = async (server: RunningServer, c: Case) => {
  const response = await fetch(`${server.url}${c.path ?? "/mcp"}`, await c.init())
  const headers = Object.fromEntries(HEADERS.map((name) => [name, response.headers.get(name)]))
  return { status: response.status, headers, body: await response.text() }
}

describe("protectNode answers every request as protect() does", () => {
  it.each(cases)("$name", async (c) => {
    const fromNode = await answer(node, c)
    const fromWeb = await answer(web, c)
    expect(fromNode).toEqual(fromWeb)
  })

  it("the answers the comparison rests on are the specified ones", async () => {
    const byName = (name: string) => cases.find((c) => c.name === name)!
    const none = await answer(node, byName("no token"))
    expect(none.status).toBe(401)
    expect(none.headers["www-authenticate"]).toBe(`Bearer resource_metadata="${METADATA_URL}", scope="mcp:tools"`)
    const expired = await answer(node, byName("an expired token"))
    expect(expired.status).toBe(401)
    expect(expired.headers["www-authenticate"]).toContain('error="invalid_token"')
    const tool = await answer(node, byName("a tool call the token's scopes do not cover"))
    expect(tool.status).toBe(403)
    expect(tool.headers["www-authenticate"]).toContain('error="insufficient_scope"')
    expect(tool.headers["www-authenticate"]).toContain('scope="mcp:tools notes:write"')
    const query = await answer(node, byName("a token in the query"))
    expect(query.status).toBe(400)
    expect(query.headers["www-authenticate"]).toContain('error="invalid_request"')
    const large = await answer(node, byName("a chunked body over the limit, authenticated"))
    expect(large.status).toBe(413)
    expect(JSON.parse(large.body)).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: `the request body exceeds the limit of ${LIMIT} bytes` },
    })
    const metadata = await answer(node, byName("GET the path-specific metadata"))
    expect(metadata.status).toBe(200)
    expect(JSON.parse(metadata.body).resource).toBe(RESOURCE)
    const cors = await answer(node, byName("POST with a valid token, from an allowed origin"))
    expect(cors.status).toBe(200)
    expect(cors.headers["access-control-allow-origin"]).toBe("https://app.example.com")
  })
})

describe("protectNode's handler", () => {
  it("gets the verified token and the body read whole; GET has no body", async () => {
    seen = []
    const body = rpc("tools/call", { name: "write_note", arguments: { text: "é" } })
    const access = await token("mcp:tools notes:write")
    const response = await fetch(`${node.url}/mcp`, post(body, { authorization: `Bearer ${access}` }))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ subject: "user-1", scopes: ["mcp:tools", "notes:write"], body })
    expect(seen[0]!.accessToken).toBe(access)
    expect(seen[0]!.token.clientId).toBe("client-1")
    const get = await fetch(`${node.url}/mcp`, { headers: { authorization: `Bearer ${access}` } })
    expect(await get.json()).toEqual({ subject: "user-1", scopes: ["mcp:tools", "notes:write"], body: null })
    expect(seen[1]!.body).toBeUndefined()
  })

  it("is not run for a refused request", async () => {
    seen = []
    const refused = await fetch(`${node.url}/mcp`, post(rpc("tools/list"), { authorization: "Bearer abc" }))
    expect(refused.status).toBe(401)
    expect(seen).toEqual([])
  })

  it("two Authorization lines are refused, neither used", async () => {
    seen = []
    const access = await token()
    const answer = await rawRequest(
      node.port,
      `GET /mcp HTTP/1.1\r\nHost: mcp.example.com\r\nAuthorization: Bearer ${access}\r\nAuthorization: Bearer ${access}\r\n\r\n`,
    )
    expect(answer.status).toBe(400)
    expect(answer.headers["www-authenticate"]).toBe(
      `Bearer resource_metadata="${METADATA_URL}", error="invalid_request", error_description="${Descriptions.multipleHeaders}"`,
    )
    expect(seen).toEqual([])
  })

  it("a body that stops before its declared end is answered 400, the handler never run, nothing reported as a server failure", async () => {
    seen = []
    const errors: Array<unknown> = []
    const server = await listen(protectNode(createProtectedResource(options()), nodeEcho), {
      onError: (error) => errors.push(error),
    })
    running.push(server)
    const access = await token()
    const answer = await rawRequest(
      server.port,
      `POST /mcp HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${access}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{`,
      { endAfterWrite: true },
    )
    expect(answer.status).toBe(400)
    expect(answer.closed).toBe(true)
    expect(seen).toEqual([])
    expect(errors).toEqual([])
    const after = await fetch(`${server.url}/mcp`, { headers: { authorization: `Bearer ${access}` } })
    expect(after.status).toBe(200)
  })

  it("a declared body over the bridge's limit is refused before anything is read or authenticated", async () => {
    seen = []
    const answer = await rawRequest(
      node.port,
      `POST /mcp HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${await token()}\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{`,
    )
    expect(answer.status).toBe(413)
    expect(answer.body).toBe("Content Too Large: the request body exceeds the limit of 4194304 bytes\n")
    expect(answer.headers.connection).toBe("close")
    expect(seen).toEqual([])
  })

  it("a handler that throws is a 500 without detail, reported once", async () => {
    const errors: Array<unknown> = []
    const protectedResource = createProtectedResource(options())
    const server = await listen(
      protectNode(protectedResource, () => {
        throw new Error("boom")
      }),
      { onError: (error) => errors.push(error) },
    )
    running.push(server)
    const response = await fetch(`${server.url}/mcp`, { headers: { authorization: `Bearer ${await token()}` } })
    expect(response.status).toBe(500)
    expect(await response.text()).toBe("Internal Server Error: the server could not answer this request\n")
    expect(errors).toHaveLength(1)
    expect((errors[0] as Error).message).toBe("boom")
  })

  it("scopes given to protectNode are required too", async () => {
    const protectedResource = createProtectedResource(options())
    const server = await listen(protectNode(protectedResource, nodeEcho, { scopes: ["notes:write"] }))
    running.push(server)
    const refused = await fetch(`${server.url}/mcp`, { headers: { authorization: `Bearer ${await token()}` } })
    expect(refused.status).toBe(403)
    expect(refused.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${METADATA_URL}", scope="mcp:tools notes:write", error="insufficient_scope", error_description="The access token does not grant the scopes this request needs"`,
    )
    const allowed = await fetch(`${server.url}/mcp`, {
      headers: { authorization: `Bearer ${await token("mcp:tools notes:write")}` },
    })
    expect(allowed.status).toBe(200)
  })
})

describe("protectNode on node:http under hostile requests", () => {
  it.each(hostileRequests("/mcp").map(unauthenticated))(
    "$name: $status",
    async ({ request, status, endAfterWrite }) => {
      const answer = await rawRequest(node.port, request, endAfterWrite === true ? { endAfterWrite } : {})
      expect(answer.status).toBe(status)
      if (status === 405 && !request.startsWith("CONNECT")) {
        expect(answer.headers.allow).toBe("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
      }
    },
  )
})
