import { Client, StreamableHTTPClientTransport, UnauthorizedError } from "@modelcontextprotocol/client"
import { afterEach, describe, expect, it } from "vitest"
import { FormDrivingProvider } from "./support/provider.js"
import { REDIRECT_URI, type Stack, startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const stack = async (): Promise<Stack> => {
  const s = await startStack()
  cleanups.push(s.close)
  return s
}

const text = (result: unknown): string =>
  (result as { content: ReadonlyArray<{ text?: string }> }).content.map((c) => c.text ?? "").join("\n")

const transportFor = (s: Stack, provider: FormDrivingProvider) =>
  new StreamableHTTPClientTransport(new URL(s.mcp.url), { authProvider: provider })

const newClient = () => new Client({ name: "sdk-interop", version: "1.0.0" })

describe("official MCP SDK v2 client with its own OAuth support", () => {
  it("registers, authorizes with PKCE and resource, lists tools, calls tools, and steps up for write_note", async () => {
    const s = await stack()
    const provider = new FormDrivingProvider()

    // 1. First connection: 401, the SDK discovers, registers and sends the "browser" to the authorization endpoint.
    const first = transportFor(s, provider)
    const refused = await newClient()
      .connect(first)
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(UnauthorizedError)
    expect(provider.client?.client_id).toEqual(expect.any(String))
    expect(provider.authorizationUrls).toHaveLength(1)
    const request = provider.authorizationUrls[0]!
    expect(`${request.origin}${request.pathname}`).toBe(`${s.as.issuer}/authorize`)
    expect(Object.fromEntries(request.searchParams)).toEqual({
      response_type: "code",
      client_id: provider.client?.client_id,
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      code_challenge_method: "S256",
      redirect_uri: REDIRECT_URI,
      state: provider.states[0],
      scope: "notes:read",
      resource: s.mcp.url,
    })
    const callback = provider.callbacks[0]!
    expect(callback.searchParams.get("state")).toBe(provider.states[0])
    expect(callback.searchParams.get("iss")).toBe(s.as.issuer)

    // 2. The callback goes back to the SDK, which redeems the code (PKCE verifier, resource) itself.
    await first.finishAuth(callback.searchParams)
    expect(provider.stored).toMatchObject({ token_type: "Bearer", scope: "notes:read" })

    // 3. Connected: tools are listed and the reading tools run.
    const transport = transportFor(s, provider)
    const client = newClient()
    await client.connect(transport)
    cleanups.push(() => client.close())
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(["list_notes", "read_note", "write_note", "delete_note"])
    expect(text(await client.callTool({ name: "list_notes", arguments: {} }))).toBe("No notes yet.")

    // 4. write_note with a notes:read token: 403 insufficient_scope; the SDK runs its own step-up (a new
    //    authorization request for the union of scopes) and, since that needs the user, surfaces UnauthorizedError.
    const stepUp = await client
      .callTool({ name: "write_note", arguments: { title: "Plan", text: "step up" } })
      .catch((e: unknown) => e)
    expect(stepUp).toBeInstanceOf(UnauthorizedError)
    expect(provider.authorizationUrls).toHaveLength(2)
    expect(provider.authorizationUrls[1]?.searchParams.get("scope")).toBe("notes:read notes:write")
    expect(provider.authorizationUrls[1]?.searchParams.get("resource")).toBe(s.mcp.url)
    // The same registration is reused.
    expect(provider.authorizationUrls[1]?.searchParams.get("client_id")).toBe(provider.client?.client_id)
    await transport.finishAuth(provider.callbacks[1]!.searchParams)
    expect(provider.stored?.scope).toBe("notes:read notes:write")

    // 5. The retried call succeeds with the wider token, on the same connection.
    expect(text(await client.callTool({ name: "write_note", arguments: { title: "Plan", text: "step up" } }))).toBe(
      "Saved note #1.",
    )
    expect(text(await client.callTool({ name: "read_note", arguments: { id: "1" } }))).toBe("#1 Plan\nstep up")

    // What the authorization server saw, readably.
    const events = s.asLog.filter((line) => /^(client registered|consent granted|token issued)/.test(line))
    const id = JSON.stringify(provider.client?.client_id)
    expect(events).toEqual([
      `client registered: ${id} ("MCP SDK interop test"), auth none, redirect URIs ${REDIRECT_URI}`,
      `consent granted: user "alice", client ${id}, scope "notes:read", resource ${s.mcp.url}`,
      `token issued: grant authorization_code, subject "alice", client ${id}, scope "notes:read", resource ${s.mcp.url}, expires in 300 s, with a refresh token`,
      `consent granted: user "alice", client ${id}, scope "notes:read notes:write", resource ${s.mcp.url}`,
      `token issued: grant authorization_code, subject "alice", client ${id}, scope "notes:read notes:write", resource ${s.mcp.url}, expires in 300 s, with a refresh token`,
    ])
  })
})
