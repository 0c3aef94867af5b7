import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createProtectedResource } from "../src/ProtectedResource.js"
import { custom } from "../src/TokenVerifier.js"
import * as Upstream from "../src/Upstream.js"
import { createUpstreamApiClient, TokenPassthroughRefused, UpstreamTokenError } from "../src/UpstreamApi.js"
import { type Running, startNodeServer, startWebServer } from "./helpers.js"

const ISSUER = "https://as.example.com"
const INBOUND = "inbound-token-for-mcp-server"

interface Seen {
  readonly raw: string
  readonly authorization: string | undefined
}

let upstream: Running
let tokenEndpoint: Running
const seen: Array<Seen> = []
let issued = 0
let rejectNext = false
let tokenError = false
// A body the token endpoint answers 200 with instead of a token, when set.
let tokenOverride: unknown

beforeAll(async () => {
  // The upstream API records every byte it receives: URL, all header lines and the body.
  upstream = await startNodeServer((req, res) => {
    let body = ""
    req.on("data", (d) => {
      body += d
    })
    req.on("end", () => {
      seen.push({
        raw: `${req.method} ${req.url}\n${req.rawHeaders.join("\n")}\n\n${body}`,
        authorization: req.headers.authorization,
      })
      if (rejectNext) {
        rejectNext = false
        // A body beside the challenge: with a clone of the response kept, its cancellation settles only when the
        // clone's does.
        res
          .writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"', "content-type": "application/json" })
          .end(JSON.stringify({ error: "invalid_token", detail: "x".repeat(512) }))
        return
      }
      res.writeHead(200, { "content-type": "application/json" }).end(`{"data":"upstream"}`)
    })
  })
  tokenEndpoint = await startNodeServer((req, res) => {
    let body = ""
    req.on("data", (d) => {
      body += d
    })
    req.on("end", () => {
      const form = new URLSearchParams(body)
      if (tokenError || req.headers.authorization !== `Basic ${btoa("mcp-server:secret")}`) {
        res
          .writeHead(401, { "content-type": "application/json" })
          .end(`{"error":"invalid_client","error_description":"bad secret"}`)
        return
      }
      if (form.get("grant_type") !== "client_credentials" || form.get("resource") !== "https://api.example.com") {
        res.writeHead(400, { "content-type": "application/json" }).end(`{"error":"invalid_request"}`)
        return
      }
      if (tokenOverride !== undefined) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(tokenOverride))
        return
      }
      issued++
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" }).end(
        JSON.stringify({
          access_token: `upstream-${issued}`,
          token_type: "Bearer",
          expires_in: 3600,
          scope: form.get("scope"),
        }),
      )
    })
  })
})

afterAll(async () => {
  await upstream.close()
  await tokenEndpoint.close()
})

const client = () =>
  createUpstreamApiClient({
    tokenEndpoint: `${tokenEndpoint.origin}/token`,
    clientId: "mcp-server",
    clientSecret: "secret",
    scopes: ["api:read"],
    resource: "https://api.example.com",
  })

describe("no token passthrough", () => {
  it("a protected handler calling upstream sends its own token; the inbound token never reaches upstream", async () => {
    const upstreamClient = client()
    const server = await startWebServer()
    try {
      const resource = `${server.origin}/mcp`
      const protectedResource = createProtectedResource({
        resource,
        authorizationServers: [ISSUER],
        verifier: custom((t) => (t === INBOUND ? { scopes: [], audience: [resource], claims: {} } : null)),
      })
      server.setHandler(
        protectedResource.protect(async (_request, auth) => {
          const response = await upstreamClient.fetch(
            `${upstream.origin}/data?q=1`,
            { method: "POST", headers: { "x-trace": "abc" }, body: "payload" },
            auth,
          )
          return new Response(await response.text())
        }),
      )
      seen.length = 0
      for (let i = 0; i < 2; i++) {
        const response = await fetch(resource, { headers: { authorization: `Bearer ${INBOUND}` } })
        expect(await response.text()).toBe(`{"data":"upstream"}`)
      }
      expect(seen).toHaveLength(2)
      for (const request of seen) {
        expect(request.raw).not.toContain(INBOUND)
        expect(request.authorization).toMatch(/^Bearer upstream-\d+$/)
      }
      expect(seen[0]?.authorization).toBe(seen[1]?.authorization)
    } finally {
      await server.close()
    }
  })

  it.each([
    ["as the Authorization header", { headers: { authorization: `Bearer ${INBOUND}` } }, "", "authorization"],
    ["in another header", { headers: { "x-forwarded-token": INBOUND } }, "", "header"],
    ["in the URL", {}, `?token=${INBOUND}`, "url"],
    ["in the body", { method: "POST", body: `{"token":"${INBOUND}"}` }, "", "body"],
    ["in a form body", { method: "POST", body: new URLSearchParams({ t: INBOUND }) }, "", "body"],
  ] as const)("refuses to send the inbound token %s", async (_name, init, query, where) => {
    seen.length = 0
    const error = await client()
      .fetch(`${upstream.origin}/data${query}`, init as RequestInit, INBOUND)
      .catch((e: unknown) => e)
    expect(error).toEqual(new TokenPassthroughRefused({ where }))
    expect(seen).toHaveLength(0)
  })

  it("refuses any caller-supplied Authorization header even without knowing the inbound token", async () => {
    const error = await client()
      .fetch(`${upstream.origin}/data`, { headers: { Authorization: "Bearer something" } })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TokenPassthroughRefused)
    expect((error as Error).message).toBe(
      "Refusing to send a caller-supplied Authorization header upstream: the upstream client uses its own token",
    )
  })

  it("gets a new upstream token once when the upstream answers 401", async () => {
    const c = client()
    await c.fetch(`${upstream.origin}/data`)
    const before = issued
    rejectNext = true
    const response = await c.fetch(`${upstream.origin}/data`)
    expect(response.status).toBe(200)
    expect(issued).toBe(before + 1)
  })

  it("answers the 401 retry when the caller's fetch keeps a clone of every response it never reads (a logging wrapper)", async () => {
    const kept: Array<Response> = []
    const keeping = async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init)
      kept.push(response.clone())
      return response
    }
    const c = createUpstreamApiClient({
      tokenEndpoint: `${tokenEndpoint.origin}/token`,
      clientId: "mcp-server",
      clientSecret: "secret",
      scopes: ["api:read"],
      resource: "https://api.example.com",
      fetch: keeping,
    })
    await c.fetch(`${upstream.origin}/data`)
    rejectNext = true
    const response = await c.fetch(`${upstream.origin}/data`)
    expect(response.status).toBe(200)
    expect(kept.map((k) => `${k.status} ${new URL(k.url).pathname}`)).toEqual([
      "200 /token",
      "200 /data",
      "401 /data",
      "200 /token",
      "200 /data",
    ])
  })

  it("concurrent callers share one token request, and the token is reused until its renewal time", async () => {
    const c = client()
    const before = issued
    const tokens = await Promise.all([c.token(), c.token(), c.token()])
    expect(new Set(tokens).size).toBe(1)
    expect(await c.token()).toBe(tokens[0])
    expect(issued).toBe(before + 1)
  })

  it("refuses a token response it cannot use: no access token, a token type other than Bearer", async () => {
    const endpoint = `${tokenEndpoint.origin}/token`
    try {
      tokenOverride = { token_type: "Bearer" }
      expect(
        await client()
          .token()
          .catch((e: unknown) => e),
      ).toEqual(
        new UpstreamTokenError({
          status: 200,
          error: "invalid_response",
          description: `the token response from ${endpoint} has no access_token; the authorization server must return one (RFC 6749 §5.1)`,
        }),
      )
      tokenOverride = { access_token: "t", token_type: "mac" }
      expect(
        await client()
          .token()
          .catch((e: unknown) => e),
      ).toEqual(
        new UpstreamTokenError({
          status: 200,
          error: "invalid_response",
          description: `the token response from ${endpoint} has token_type "mac"; only Bearer tokens can be used`,
        }),
      )
    } finally {
      tokenOverride = undefined
    }
  })

  it("reports token endpoint errors", async () => {
    tokenError = true
    try {
      const error = await client()
        .token()
        .catch((e: unknown) => e)
      expect(error).toEqual(new UpstreamTokenError({ status: 401, error: "invalid_client", description: "bad secret" }))
    } finally {
      tokenError = false
    }
  })

  it("the deprecated Upstream names are the same client and errors", () => {
    expect(Upstream.createUpstreamClient).toBe(createUpstreamApiClient)
    expect(Upstream.TokenPassthroughRefused).toBe(TokenPassthroughRefused)
    expect(Upstream.UpstreamTokenError).toBe(UpstreamTokenError)
  })
})
