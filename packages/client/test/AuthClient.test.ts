import { Pkce } from "@keyway/core"
import { json, listen, rpc, startAuthorizationServer } from "@keyway/testing/peers"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { AuthClient, createAuthClient } from "../src/AuthClient.js"
import type { AuthError } from "../src/AuthError.js"
import { ClientConfig } from "../src/ClientConfig.js"
import { DiscoveryCache } from "../src/DiscoveryCache.js"
import { memory, TokenStore } from "../src/TokenStore.js"
import { headless, UserAgent } from "../src/UserAgent.js"
import { rejection, track, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })

describe("the flow, steps 1-8", () => {
  it("answers a 401 by discovering, registering, authorizing with PKCE and resource, and retrying with Bearer", async () => {
    const { as, rs, client } = await world()
    const response = await client.fetch(rs.url, post(rpc("initialize")))
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ result: { operation: "initialize" } })

    // Step 1: the first request went without a token and got a 401; the retry carried the Bearer token.
    expect(rs.requests.map((r) => r.status)).toEqual([401, 200])
    expect(rs.requests[0]?.authorization).toBeUndefined()
    const tokens = await client.tokens(rs.url)
    expect(rs.requests[1]?.authorization).toBe(`Bearer ${tokens?.access_token}`)
    // Step 2: the challenge's resource_metadata URL was used.
    expect(rs.metadataRequests).toEqual(["/.well-known/oauth-protected-resource/mcp"])
    // Step 3: the first RFC 8414 location answered.
    expect(as.metadataRequests).toEqual(["/.well-known/oauth-authorization-server"])
    // Step 4: dynamic registration with the fields MCP asks for.
    expect(as.registrations).toHaveLength(1)
    expect(as.registrations[0]).toMatchObject({
      application_type: "native",
      grant_types: ["authorization_code", "refresh_token"],
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
      client_name: "Keyway MCP client",
    })
    // Step 5: PKCE S256, state, resource exactly as published, scope from scopes_supported plus offline_access.
    const authorization = as.authorizations[0]!
    expect(authorization.get("code_challenge_method")).toBe("S256")
    expect(authorization.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(authorization.get("state")?.length).toBeGreaterThanOrEqual(43)
    expect(authorization.get("resource")).toBe(rs.url)
    expect(authorization.get("scope")).toBe("tools:read offline_access")
    // Step 7: the token request carried the verifier, redirect URI and the same resource.
    const token = as.tokenRequests[0]!
    expect(token.grant).toBe("authorization_code")
    expect(await Pkce.verifyS256(token.params.get("code_verifier")!, authorization.get("code_challenge")!)).toBe(true)
    expect(token.params.get("resource")).toBe(rs.url)
    expect(token.params.get("redirect_uri")).toBe("http://127.0.0.1/callback")
    // Storage: absolute expiry, granted scope, issuer and resource.
    expect(tokens).toMatchObject({ token_type: "Bearer", scope: "tools:read offline_access", issuer: as.issuer })
    expect(tokens?.resource).toBe(rs.url)
    expect(tokens?.expires_at).toBeGreaterThan(Date.now() + 3500_000)
  })

  it("runs one authorization for concurrent requests that all need one", async () => {
    const { as, rs, client } = await world()
    const responses = await Promise.all(
      Array.from({ length: 5 }, (_, i) => client.fetch(rs.url, post(rpc("tools/list", {}, i)))),
    )
    expect(responses.map((r) => r.status)).toEqual(Array(5).fill(200))
    expect(as.authorizations).toHaveLength(1)
    expect(as.registrations).toHaveLength(1)
  })

  it("reuses the stored token and registration for later requests without a new authorization", async () => {
    const { as, rs, client } = await world()
    await client.fetch(rs.url, post(rpc("initialize")))
    const second = await client.fetch(rs.url, post(rpc("tools/list")))
    expect(second.status).toBe(200)
    expect(as.authorizations).toHaveLength(1)
    expect(as.registrations).toHaveLength(1)
    expect(rs.requests.map((r) => r.status)).toEqual([401, 200, 200])
  })

  it("uses the challenge scope before scopes_supported", async () => {
    const { as, rs, client } = await world({ rs: { challengeScope: "tools:write" } })
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(as.authorizations[0]?.get("scope")).toBe("tools:write offline_access")
  })

  it("omits scope when neither the challenge nor the metadata name any, and then adds no offline_access", async () => {
    const { as, rs, client } = await world({ rs: { scopesSupported: undefined } })
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(as.authorizations[0]?.has("scope")).toBe(false)
  })

  it("adds offline_access only when the authorization server lists it", async () => {
    const { as, rs, client } = await world({
      as: { metadata: (m) => ({ ...m, scopes_supported: ["tools:read"] }) },
    })
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(as.authorizations[0]?.get("scope")).toBe("tools:read")
  })

  it("does not add offline_access when refresh is not wanted", async () => {
    const { as, rs, client } = await world({ client: { offlineAccess: false } })
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(as.authorizations[0]?.get("scope")).toBe("tools:read")
  })

  it("authorize(serverUrl) probes the path-specific then root well-known URLs without a challenge", async () => {
    const { rs, client } = await world({ rs: { metadataAt: ["root"] } })
    const tokens = await client.authorize(rs.url)
    expect(tokens.resource).toBe(rs.url)
    expect(rs.metadataRequests).toEqual(["/.well-known/oauth-protected-resource"])
  })

  it("logout forgets the tokens, so the next request authorizes again", async () => {
    const { as, rs, client } = await world()
    await client.fetch(rs.url, post(rpc("initialize")))
    await client.logout(rs.url)
    expect(await client.tokens(rs.url)).toBeUndefined()
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(as.authorizations).toHaveLength(2)
  })
})

describe("refresh", () => {
  it("refreshes proactively shortly before expiry, with the same resource, and saves the rotated token", async () => {
    const { as, rs, client } = await world({ as: { expiresIn: 30, refreshExpiresIn: 3600 } })
    const before = await client.authorize(rs.url)
    expect(before.expires_at).toBeLessThan(Date.now() + 31_000)
    const response = await client.fetch(rs.url, post(rpc("tools/list")))
    expect(response.status).toBe(200)
    expect(as.refreshes).toBe(1)
    const refresh = as.tokenRequests.find((r) => r.grant === "refresh_token")!
    expect(refresh.params.get("refresh_token")).toBe(before.refresh_token)
    expect(refresh.params.get("resource")).toBe(rs.url)
    const after = await client.tokens(rs.url)
    expect(after?.refresh_token).not.toBe(before.refresh_token)
    expect(after?.access_token).not.toBe(before.access_token)
    // The only request went out with the refreshed token; the stale one was never sent.
    expect(rs.requests.map((r) => [r.status, r.authorization])).toEqual([[200, `Bearer ${after?.access_token}`]])
  })

  it("after a restart, refreshes with the token endpoint kept with the tokens: no discovery, one token request", async () => {
    const store = memory()
    const { as, rs, client } = await world({ as: { expiresIn: 30, refreshExpiresIn: 3600 }, client: { store } })
    const before = await client.authorize(rs.url)
    expect(before.token_endpoint).toBe(`${as.issuer}/token`)
    const asSeen = as.paths.length
    const rsSeen = rs.requests.length
    const restarted = createAuthClient({ userAgent: headless(), store })
    track(restarted.dispose)
    const response = await restarted.fetch(rs.url, post(rpc("tools/list")))
    expect(response.status).toBe(200)
    expect(as.paths.slice(asSeen)).toEqual(["/token"])
    expect(rs.requests.slice(rsSeen).map((r) => r.status)).toEqual([200])
    expect(await restarted.tokens(rs.url)).toMatchObject({ token_endpoint: `${as.issuer}/token` })
  })

  it("refreshes tokens stored without a token endpoint (earlier versions) after discovering it", async () => {
    const store = memory()
    const { as, rs, client } = await world({ as: { expiresIn: 30, refreshExpiresIn: 3600 }, client: { store } })
    const { token_endpoint: _, ...older } = await client.authorize(rs.url)
    await store.set(`tokens:${rs.url}`, older)
    const asSeen = as.paths.length
    const restarted = createAuthClient({ userAgent: headless(), store })
    track(restarted.dispose)
    expect((await restarted.fetch(rs.url, post(rpc("tools/list")))).status).toBe(200)
    expect(as.paths.slice(asSeen)).toEqual(["/.well-known/oauth-authorization-server", "/token"])
  })

  it("keeps using a still-valid token when an early refresh fails for another reason than invalid_grant", async () => {
    const { as, rs, client } = await world({
      as: {
        expiresIn: 30,
        tokenReply: (grant) =>
          grant === "refresh_token" ? json(503, { error: "temporarily_unavailable" }) : undefined,
      },
    })
    const tokens = await client.authorize(rs.url)
    const response = await client.fetch(rs.url, post(rpc("tools/list")))
    expect(response.status).toBe(200)
    expect(as.refreshes).toBe(1)
    expect(rs.requests.map((r) => r.authorization)).toEqual([`Bearer ${tokens.access_token}`])
  })

  it("refreshes reactively on 401 invalid_token and retries", async () => {
    const { as, rs, client } = await world()
    await client.fetch(rs.url, post(rpc("initialize")))
    const before = await client.tokens(rs.url)
    as.tokens.get(before!.access_token)!.revoked = true
    const response = await client.fetch(rs.url, post(rpc("tools/list")))
    expect(response.status).toBe(200)
    expect(as.refreshes).toBe(1)
    expect(as.authorizations).toHaveLength(1)
    expect(rs.requests.map((r) => r.status)).toEqual([401, 200, 401, 200])
  })

  it("shares one refresh among concurrent requests (proactive)", async () => {
    const { as, rs, client } = await world({ as: { expiresIn: 30, refreshExpiresIn: 3600 } })
    await client.authorize(rs.url)
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => client.fetch(rs.url, post(rpc("tools/list", {}, i)))),
    )
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(200))
    expect(as.refreshes).toBe(1)
    expect(as.authorizations).toHaveLength(1)
    expect(new Set(rs.requests.map((r) => r.authorization)).size).toBe(1)
  })

  it("shares one refresh among concurrent requests rejected with invalid_token (rotation never spent twice)", async () => {
    const { as, rs, client } = await world()
    await client.fetch(rs.url, post(rpc("initialize")))
    const before = await client.tokens(rs.url)
    as.tokens.get(before!.access_token)!.revoked = true
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => client.fetch(rs.url, post(rpc("tools/list", {}, i)))),
    )
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(200))
    expect(as.refreshes).toBe(1)
    expect(as.authorizations).toHaveLength(1)
  })

  it("authorizes afresh when the refresh token is refused with invalid_grant", async () => {
    const { as, rs, client } = await world({
      as: {
        tokenReply: (grant) =>
          grant === "refresh_token" ? json(400, { error: "invalid_grant", error_description: "revoked" }) : undefined,
      },
    })
    await client.fetch(rs.url, post(rpc("initialize")))
    const before = await client.tokens(rs.url)
    as.tokens.get(before!.access_token)!.revoked = true
    const response = await client.fetch(rs.url, post(rpc("tools/list")))
    expect(response.status).toBe(200)
    expect(as.refreshes).toBe(1)
    expect(as.authorizations).toHaveLength(2)
  })

  it("authorizes afresh when no refresh token was issued and the token is rejected", async () => {
    const { as, rs, client } = await world({ as: { refreshTokens: false } })
    await client.fetch(rs.url, post(rpc("initialize")))
    const before = await client.tokens(rs.url)
    expect(before?.refresh_token).toBeUndefined()
    as.tokens.get(before!.access_token)!.revoked = true
    expect((await client.fetch(rs.url, post(rpc("tools/list")))).status).toBe(200)
    expect(as.authorizations).toHaveLength(2)
  })

  it("fails with a typed error when even a fresh token is rejected", async () => {
    const { rs, client } = await world({ rs: { lookup: () => undefined } })
    const error = await rejection(client.fetch(rs.url, post(rpc("initialize"))))
    expect(error).toMatchObject({ step: "request", reason: "unauthorized", url: rs.url, status: 401 })
    expect((error as AuthError).message).toBe(
      `${rs.url} rejected the token obtained by a fresh authorization; the server and its authorization server disagree about the token (audience, issuer or scope)`,
    )
  })
})

describe("step-up", () => {
  it("re-authorizes with the union of granted and challenged scopes on 403 insufficient_scope, then retries", async () => {
    const { as, rs, client } = await world({ rs: { required: { "tools/call write": "tools:write" } } })
    await client.fetch(rs.url, post(rpc("initialize")))
    const response = await client.fetch(rs.url, post(rpc("tools/call", { name: "write" })))
    expect(response.status).toBe(200)
    expect(as.authorizations).toHaveLength(2)
    expect(as.authorizations[1]?.get("scope")).toBe("tools:read offline_access tools:write")
    expect((await client.tokens(rs.url))?.scope).toBe("tools:read offline_access tools:write")
    expect(rs.requests.map((r) => r.status)).toEqual([401, 200, 403, 200])
  })

  it("makes at most 3 authorizations in total for an operation that triggered the first one itself", async () => {
    const { as, rs, client } = await world({ rs: { alwaysForbidden: ["tools/call admin"] } })
    const error = await rejection(client.fetch(rs.url, post(rpc("tools/call", { name: "admin" }))))
    expect(error).toMatchObject({ step: "step-up", reason: "step-up-limit", url: rs.url, status: 403 })
    expect((error as AuthError).message).toBe(
      `${rs.url} still answers 403 insufficient_scope for tools/call admin after 3 authorization attempts for this operation (limit 3); giving up (the server may not grant the scopes it asks for)`,
    )
    // The first authorization (answering the 401) and two step-ups.
    expect(as.authorizations).toHaveLength(3)
    expect(rs.requests.map((r) => r.status)).toEqual([401, 403, 403, 403])
  })

  it("allows 3 step-ups for an operation whose token another operation obtained, then fails permanently", async () => {
    const { as, rs, client } = await world({ rs: { alwaysForbidden: ["tools/call admin"] } })
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(as.authorizations).toHaveLength(1)
    const error = await rejection(client.fetch(rs.url, post(rpc("tools/call", { name: "admin" }))))
    expect(error).toMatchObject({ step: "step-up", reason: "step-up-limit", url: rs.url, status: 403 })
    expect((error as AuthError).message).toBe(
      `${rs.url} still answers 403 insufficient_scope for tools/call admin after 3 authorization attempts for this operation (limit 3); giving up (the server may not grant the scopes it asks for)`,
    )
    expect(as.authorizations).toHaveLength(4)
    // The limit is remembered per resource and operation: no further authorizations for the same call.
    await rejection(client.fetch(rs.url, post(rpc("tools/call", { name: "admin" }))))
    expect(as.authorizations).toHaveLength(4)
    // Other operations are unaffected.
    expect((await client.fetch(rs.url, post(rpc("tools/list")))).status).toBe(200)
  })

  it("honours a configured limit, counting the authorization the operation triggered", async () => {
    const { as, rs, client } = await world({
      rs: { alwaysForbidden: ["tools/call admin"] },
      client: { maxStepUpAttempts: 1 },
    })
    const first = await rejection(client.fetch(rs.url, post(rpc("tools/call", { name: "admin" }))))
    expect(first).toMatchObject({ step: "step-up", reason: "step-up-limit", url: rs.url, status: 403 })
    expect((first as AuthError).message).toBe(
      `${rs.url} still answers 403 insufficient_scope for tools/call admin after 1 authorization attempt for this operation (limit 1); giving up (the server may not grant the scopes it asks for)`,
    )
    expect(as.authorizations).toHaveLength(1)
  })

  it("honours a configured limit for an operation that reuses another operation's token", async () => {
    const { as, rs, client } = await world({
      rs: { alwaysForbidden: ["tools/call admin"] },
      client: { maxStepUpAttempts: 5 },
    })
    await client.fetch(rs.url, post(rpc("initialize")))
    const error = await rejection(client.fetch(rs.url, post(rpc("tools/call", { name: "admin" }))))
    expect((error as AuthError).message).toBe(
      `${rs.url} still answers 403 insufficient_scope for tools/call admin after 5 authorization attempts for this operation (limit 5); giving up (the server may not grant the scopes it asks for)`,
    )
    expect(as.authorizations).toHaveLength(6)
  })

  it("restarts the count once the operation succeeds", async () => {
    const { as, rs, client } = await world({ rs: { required: { "tools/call write": "tools:write" } } })
    const response = await client.fetch(rs.url, post(rpc("tools/call", { name: "write" })))
    expect(response.status).toBe(200)
    // 401 -> authorization with tools:read, 403 -> step-up with tools:write: two of the three allowed.
    expect(as.authorizations).toHaveLength(2)
    await client.logout(rs.url)
    expect((await client.fetch(rs.url, post(rpc("tools/call", { name: "write" })))).status).toBe(200)
    expect(as.authorizations).toHaveLength(4)
  })

  it("passes a 403 without insufficient_scope through untouched", async () => {
    const { as, rs, client } = await world({ rs: { plainForbidden: ["tools/call nope"] } })
    await client.fetch(rs.url, post(rpc("initialize")))
    const response = await client.fetch(rs.url, post(rpc("tools/call", { name: "nope" })))
    expect(response.status).toBe(403)
    expect(await response.text()).toBe("forbidden")
    expect(as.authorizations).toHaveLength(1)
  })
})

describe("tokens never leave their resource", () => {
  it("never sends a token in the URL and never to another server", async () => {
    const { as, rs, client } = await world()
    await client.fetch(rs.url, post(rpc("initialize")))
    const second = await world()
    await client.fetch(second.rs.url, post(rpc("initialize")))
    expect(second.rs.requests[0]?.authorization).toBeUndefined()
    const first = await client.tokens(rs.url)
    const other = await client.tokens(second.rs.url)
    expect(first?.access_token).not.toBe(other?.access_token)
    expect(as.tokens.has(other!.access_token)).toBe(false)
  })
})

describe("pending authorizations", () => {
  it("stay out of the store when the agent brings the redirect back to this process", async () => {
    const inner = memory()
    const writes: Array<string> = []
    const store = {
      get: inner.get,
      set: (key: string, value: unknown) => {
        writes.push(`set ${key.split(":")[0]}`)
        return inner.set(key, value)
      },
      delete: (key: string) => {
        writes.push(`delete ${key.split(":")[0]}`)
        return inner.delete(key)
      },
    }
    const { rs, client } = await world({ client: { store } })
    expect((await client.fetch(rs.url, post(rpc("initialize")))).status).toBe(200)
    expect(writes).toEqual(["set client", "set tokens"])
  })

  it("are stored when such an agent meets a page that needs a person, so that complete() can finish", async () => {
    let person = true
    const { rs, client } = await world({
      as: {
        authorizeReply: () =>
          person ? { status: 200, headers: { "content-type": "text/html" }, body: "<form>" } : undefined,
      },
    })
    const error = await rejection(client.fetch(rs.url, post(rpc("initialize"))))
    expect(error).toMatchObject({ step: "authorization", reason: "interaction-required", status: 200 })
    // The person signs in elsewhere; the authorization server then redirects back with a code.
    person = false
    const callback = (await fetch((error as AuthError).url, { redirect: "manual" })).headers.get("location") ?? ""
    expect((await client.complete(callback)).resource).toBe(rs.url)
    // Completed once: the same callback again finds nothing pending.
    expect(await rejection(client.complete(callback))).toMatchObject({ step: "callback", reason: "state-mismatch" })
  })
})

describe("the drop-in fetch", () => {
  it("accepts a Request and replays its body after authorizing", async () => {
    const { rs, client } = await world()
    const response = await client.fetch(new Request(rs.url, post(rpc("tools/list", {}, 7))))
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ id: 7, result: { operation: "tools/list" } })
  })

  it("sends what a Request of the same arguments holds, whatever form they take", async () => {
    const sent: Array<{ method: string; url: string; headers: Array<[string, string]>; body: string }> = []
    const client = createAuthClient({
      // What the client hands to fetch, as given (a Request built here would add its own defaults).
      fetch: async (input, init) => {
        sent.push({
          method: init?.method ?? "GET",
          url: String(input),
          headers: [...new Headers(init?.headers)],
          body: init?.body === undefined || init.body === null ? "" : await new Response(init.body).text(),
        })
        return new Response("{}", { status: 200 })
      },
    })
    const url = "http://127.0.0.1:9/a/../mcp?x=1"
    const body = rpc("tools/call", { name: "é" })
    const cases: Array<[string | URL | Request, RequestInit | undefined]> = [
      [url, { method: "POST", headers: { "content-type": "application/json", "X-Trace": " a " }, body }],
      [new URL(url), { method: "POST", headers: [["accept", "application/json, text/event-stream"]], body }],
      // No content type: a string body gets the one a Request gives it.
      [url, { method: "POST", body }],
      [url, { method: "post", body }],
      [url, { method: "PUT", body: new TextEncoder().encode(body) }],
      [url, { method: "POST", body, cache: "no-store" }],
      [url, undefined],
      [url, { headers: new Headers({ accept: "text/event-stream" }) }],
      [new Request(url, { method: "POST", body, headers: { "content-type": "application/json" } }), undefined],
    ]
    for (const [input, init] of cases) {
      const expected = new Request(input instanceof Request ? input.clone() : input, init)
      await client.fetch(input, init)
      expect(sent.at(-1)).toEqual({
        method: expected.method,
        url: expected.url,
        headers: [...expected.headers],
        body: await expected.text(),
      })
    }
    expect(sent).toHaveLength(cases.length)
  })

  it("refuses what a Request refuses: credentials in the URL, a body on GET", async () => {
    const client = createAuthClient({ fetch: async () => new Response("{}", { status: 200 }) })
    await expect(client.fetch("http://user:secret@127.0.0.1:9/mcp", post("{}"))).rejects.toThrow(
      "Request cannot be constructed from a URL that includes credentials",
    )
    await expect(client.fetch("http://127.0.0.1:9/mcp", { method: "GET", body: "{}" })).rejects.toThrow(
      "Request with GET/HEAD method cannot have body.",
    )
  })

  it("passes a 401 with a challenge for another scheme through untouched", async () => {
    const { as, client } = await world()
    const server = await listen(() => ({ status: 401, headers: { "www-authenticate": 'Basic realm="x"' }, body: "" }))
    track(server.close)
    const response = await client.fetch(`${server.origin}/mcp`, post(rpc("initialize")))
    expect(response.status).toBe(401)
    expect(as.paths).toEqual([])
  })

  it("hands redirects back instead of following them with the token", async () => {
    const { rs, client } = await world({ rs: { redirectTo: "https://elsewhere.example/mcp" } })
    const response = await client.fetch(rs.url, post(rpc("initialize")))
    expect(response.status).toBe(307)
    expect(response.headers.get("location")).toBe("https://elsewhere.example/mcp")
  })

  it("names the URL when the server cannot be reached", async () => {
    const { client } = await world()
    const server = await listen(() => ({ status: 200 }))
    await server.close()
    const url = `${server.origin}/mcp`
    const error = await rejection(client.fetch(url, post(rpc("initialize"))))
    expect(error).toMatchObject({ step: "request", reason: "network-error", url })
    expect((error as AuthError).message).toMatch(
      new RegExp(`^could not reach ${url.replace(/[.]/g, "\\.")}: .+; check the URL and that the server is running$`),
    )
  })

  it("refuses a server URL that is not absolute", async () => {
    const { client } = await world()
    const error = await rejection(client.tokens("mcp.example.com"))
    expect(error).toMatchObject({ step: "request", reason: "invalid-input", url: "mcp.example.com" })
  })

  it("answers when the caller's fetch keeps a clone of every response it never reads (a logging wrapper)", async () => {
    const as = await startAuthorizationServer()
    track(as.close)
    let origin = ""
    const challenge = (status: number, scope: string, error?: string) => ({
      status,
      headers: {
        "content-type": "application/json",
        "www-authenticate": `Bearer scope="${scope}"${error === undefined ? "" : `, error="${error}"`}`,
      },
      // A body the client never reads: with a clone kept, its cancellation settles only when the clone's does.
      body: JSON.stringify({ error: error ?? "unauthorized", detail: "x".repeat(512) }),
    })
    const server = await listen((request, url, body) => {
      // Only the root location: the path-specific one answers 404 with a body the client lets go of too.
      if (url.pathname === "/.well-known/oauth-protected-resource") {
        return json(200, { resource: `${origin}/mcp`, authorization_servers: [as.issuer] })
      }
      if (url.pathname !== "/mcp") return { status: 404, headers: { "content-type": "text/plain" }, body: "Not Found" }
      const header = request.headers.authorization ?? ""
      const issued = as.lookup(header.replace(/^Bearer /u, ""))
      if (issued === undefined) return challenge(401, "tools:read")
      const needed = body.includes('"name":"write"') ? "tools:read tools:write" : "tools:read"
      if (!needed.split(" ").every((scope) => issued.scope.split(" ").includes(scope))) {
        return challenge(403, needed, "insufficient_scope")
      }
      return json(200, { jsonrpc: "2.0", id: 1, result: {} })
    })
    track(server.close)
    origin = server.origin
    const kept: Array<Response> = []
    const keeping = async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init)
      kept.push(response.clone())
      return response
    }
    const client = createAuthClient({ fetch: keeping, userAgent: headless({ fetch: keeping }) })
    track(client.dispose)
    const listed = await client.fetch(`${origin}/mcp`, post(rpc("tools/list")))
    expect(listed.status).toBe(200)
    const written = await client.fetch(`${origin}/mcp`, post(rpc("tools/call", { name: "write" })))
    expect(written.status).toBe(200)
    expect(as.authorizations.map((params) => params.get("scope"))).toEqual([
      "tools:read offline_access",
      "tools:read offline_access tools:write",
    ])
    // Every response went through the caller's fetch, which still holds an unread clone of each.
    expect(kept.map((response) => `${response.status} ${new URL(response.url).pathname}`)).toEqual([
      "401 /mcp",
      "404 /.well-known/oauth-protected-resource/mcp",
      "200 /.well-known/oauth-protected-resource",
      "200 /.well-known/oauth-authorization-server",
      "201 /register",
      "302 /authorize",
      "200 /token",
      "200 /mcp",
      "403 /mcp",
      "404 /.well-known/oauth-protected-resource/mcp",
      "302 /authorize",
      "200 /token",
      "200 /mcp",
    ])
  })

  it("accessToken returns the held token without authorizing; unauthorized authorizes from a 401", async () => {
    const { as, rs, client } = await world()
    expect(await client.accessToken(rs.url)).toBeUndefined()
    expect(as.authorizations).toHaveLength(0)
    const challenge = await fetch(rs.url, post(rpc("initialize")))
    await client.unauthorized(rs.url, challenge)
    expect(as.authorizations).toHaveLength(1)
    expect(await client.accessToken(rs.url)).toBe((await client.tokens(rs.url))?.access_token)
  })
})

describe("the Effect face", () => {
  it("runs the flow from layers", async () => {
    const { as, rs } = await world()
    const layer = AuthClient.layer.pipe(
      Layer.provide(
        Layer.mergeAll(
          ClientConfig.layer({ clientName: "effect face" }),
          TokenStore.layerMemory,
          DiscoveryCache.layerMemory,
          UserAgent.layerHeadless(),
        ),
      ),
    )
    const program = Effect.gen(function* () {
      const client = yield* AuthClient
      const response = yield* client.fetch(rs.url, post(rpc("initialize")))
      return response.status
    })
    expect(await Effect.runPromise(program.pipe(Effect.provide(layer)))).toBe(200)
    expect(as.registrations[0]).toMatchObject({ client_name: "effect face" })
  })
})
