import { Challenge, Pkce } from "@keyway/core"
import { afterEach, describe, expect, it } from "vitest"
import { rpc } from "../src/peers.js"
import { type Stack, startStack } from "../src/stack.js"

const stacks: Stack[] = []
afterEach(async () => {
  while (stacks.length > 0) await stacks.pop()?.close()
})

const start = async () => {
  const stack = await startStack()
  stacks.push(stack)
  return stack
}

const mcpPost = (stack: Stack, body: string, token?: string) =>
  fetch(stack.url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body,
  })

describe("startStack", () => {
  it("challenges an unauthenticated MCP request with the protected resource metadata URL and the scope", async () => {
    const stack = await start()
    const response = await mcpPost(stack, rpc("tools/list"))
    expect(response.status).toBe(401)
    const parsed = Challenge.parse(response.headers.get("www-authenticate"))
    const [challenge] = parsed._tag === "Success" ? parsed.success : []
    expect(challenge?.params).toMatchObject({
      resource_metadata: `${new URL(stack.url).origin}/.well-known/oauth-protected-resource/mcp`,
      scope: "tools:read",
    })
    const metadata = await (await fetch(`${new URL(stack.url).origin}/.well-known/oauth-protected-resource/mcp`)).json()
    expect(metadata).toEqual({
      resource: stack.url,
      authorization_servers: [stack.as.issuer],
      scopes_supported: ["tools:read", "notes:write"],
    })
    expect(stack.requests).toEqual([
      { method: "tools/list", status: 401, authorized: false, protocolVersion: undefined },
    ])
  })

  it("serves the MCP server to a token of the peer authorization server, and refuses a token for another resource", async () => {
    const stack = await start()
    const registered = await fetch(`${stack.as.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ redirect_uris: ["http://127.0.0.1/callback"], token_endpoint_auth_method: "none" }),
    })
    const { client_id } = (await registered.json()) as { client_id: string }
    const token = async (resource: string) => {
      const verifier = Pkce.generateVerifier()
      const authorize = new URL(`${stack.as.issuer}/authorize`)
      for (const [k, v] of Object.entries({
        response_type: "code",
        client_id,
        redirect_uri: "http://127.0.0.1/callback",
        code_challenge: await Pkce.challengeS256(verifier),
        code_challenge_method: "S256",
        resource,
        scope: "tools:read",
        state: "s",
      })) {
        authorize.searchParams.set(k, v)
      }
      const redirect = await fetch(authorize, { redirect: "manual" })
      const code = new URL(redirect.headers.get("location") ?? "").searchParams.get("code") ?? ""
      const response = await fetch(`${stack.as.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code,
          code_verifier: verifier,
          redirect_uri: "http://127.0.0.1/callback",
          client_id,
          resource,
        }),
      })
      return ((await response.json()) as { access_token: string }).access_token
    }
    const initialize = rpc("initialize", {
      protocolVersion: "2025-11-25",
      capabilities: {},
      clientInfo: { name: "stack-test", version: "1.0.0" },
    })
    const ok = await mcpPost(stack, initialize, await token(stack.url))
    expect(ok.status).toBe(200)
    const other = await mcpPost(stack, initialize, await token("https://other.example.com/mcp"))
    expect(other.status).toBe(401)
    expect(other.headers.get("www-authenticate")).toMatch(/error="invalid_token"/u)
  })
})
