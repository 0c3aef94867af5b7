import { createAuthClient, UserAgent } from "@keyway/client"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Stack, startStack, USER } from "../src/stack.js"

describe("the test user on Keyway's authorization server (no browser)", () => {
  let stack: Stack
  beforeAll(async () => {
    stack = await startStack(1)
  })
  afterAll(async () => {
    await stack?.close()
  })

  const call = (client: ReturnType<typeof createAuthClient>, method: string, params: object = {}) =>
    client.fetch(stack.mcp[0]!, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    })

  /** The user agent's requests to the authorization server, as "METHOD /path". */
  const recording = () => {
    const seen: Array<string> = []
    const fetch = (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input))
      seen.push(`${init?.method ?? "GET"} ${url.pathname}`)
      return globalThis.fetch(input, init)
    }
    return { seen, fetch }
  }

  it("signs in and approves; the step-up in the same process consents again but does not sign in again", async () => {
    const { seen, fetch } = recording()
    const client = createAuthClient({ clientName: "Test run", userAgent: UserAgent.testUser({ ...USER, fetch }) })
    try {
      const listed = await call(client, "tools/list")
      expect(listed.status).toBe(200)
      expect(await listed.json()).toMatchObject({ result: { subject: USER.username, scopes: ["notes:read"] } })
      expect(seen.filter((line) => line.startsWith("POST "))).toEqual([
        "POST /authorize/login",
        "POST /authorize/consent",
      ])

      const written = await call(client, "tools/call", { name: "write_note", arguments: { title: "t", text: "x" } })
      expect(written.status).toBe(200)
      expect(await written.json()).toMatchObject({ result: { scopes: ["notes:read", "notes:write"] } })
      expect(seen.filter((line) => line.startsWith("POST "))).toEqual([
        "POST /authorize/login",
        "POST /authorize/consent",
        "POST /authorize/consent",
      ])
    } finally {
      await client.dispose()
    }
  })

  it("denies when told to: the client fails with access_denied", async () => {
    const client = createAuthClient({ userAgent: UserAgent.testUser({ ...USER, decision: "deny" }) })
    try {
      await expect(call(client, "tools/list")).rejects.toMatchObject({
        step: "authorization",
        reason: "authorization-error",
        error: "access_denied",
      })
    } finally {
      await client.dispose()
    }
  })

  it("fails with the login page's message when the password is wrong", async () => {
    const client = createAuthClient({ userAgent: UserAgent.testUser({ username: USER.username, password: "nope" }) })
    try {
      const error = await call(client, "tools/list").catch((e: unknown) => e)
      expect(error).toMatchObject({
        step: "authorization",
        reason: "user-agent-failed",
        url: `${stack.issuer}/authorize/login`,
      })
      expect((error as Error).message).toBe('the test user could not sign in as "alice": Wrong username or password.')
    } finally {
      await client.dispose()
    }
  })
})
