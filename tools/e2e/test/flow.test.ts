import { createAuthClient, isAuthError, UserAgent } from "@keyway/client/node"
import { type HeadlessChromium, launchChromium } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Stack, startStack, USER } from "../src/stack.js"

/** What the person saw on each consent page, in order. */
interface Visit {
  readonly client: string | null
  readonly redirectHost: string | null
  readonly scopes: ReadonlyArray<string>
}

describe("client + resource server + authorization server", () => {
  let stack: Stack
  let chromium: HeadlessChromium
  const visits: Array<Visit> = []
  let decision: "Approve" | "Deny" = "Approve"

  // The system-browser user agent, with headless Chromium as the person's browser: it signs in when asked and
  // answers the consent page.
  const openBrowser = async (url: string) => {
    const page = await chromium.browser.newPage()
    try {
      await page.goto(url)
      if (await page.getByLabel("Username").isVisible()) {
        await page.getByLabel("Username").fill(USER.username)
        await page.getByLabel("Password").fill(USER.password)
        await page.getByRole("button", { name: "Sign in" }).click()
      }
      await page.getByRole("button", { name: decision }).waitFor()
      visits.push({
        client: await page.locator("h1").textContent(),
        redirectHost: await page.locator("[data-redirect-host]").textContent(),
        scopes: await page.locator("[data-scope]").allTextContents(),
      })
      await Promise.all([
        page.waitForURL("http://127.0.0.1:*/callback?**"),
        page.getByRole("button", { name: decision }).click(),
      ])
    } finally {
      await page.close()
    }
  }

  const call = (client: ReturnType<typeof createAuthClient>, url: string, method: string, params: object = {}) =>
    client.fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    })

  beforeAll(async () => {
    chromium = await launchChromium()
    stack = await startStack(2)
  })
  afterAll(async () => {
    await stack?.close()
    await chromium?.close()
  })

  it("discovers, registers, authorizes with PKCE and resource, calls, steps up on 403 and binds tokens to one server", async () => {
    const client = createAuthClient({ clientName: "E2E notes client", userAgent: UserAgent.browser({ openBrowser }) })
    const [first, second] = stack.mcp as [string, string]

    // 401 -> discovery -> dynamic registration -> login + consent -> code -> token -> retried request.
    const listed = await call(client, first, "tools/list")
    expect(listed.status).toBe(200)
    expect(await listed.json()).toMatchObject({ result: { subject: USER.username, scopes: ["notes:read"] } })
    expect(visits[0]).toMatchObject({
      redirectHost: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
      scopes: [expect.stringContaining("notes:read")],
    })
    expect(visits[0]?.client).toContain("E2E notes client")

    const tokens = await client.tokens(first)
    expect(tokens?.scope).toBe("notes:read")

    // write_note needs notes:write: 403 insufficient_scope, step-up with the union of scopes, retry.
    const written = await call(client, first, "tools/call", { name: "write_note", arguments: { text: "hi" } })
    expect(written.status).toBe(200)
    const result = (await written.json()) as { result: { scopes: Array<string> } }
    expect([...result.result.scopes].sort()).toEqual(["notes:read", "notes:write"])
    expect(visits).toHaveLength(2)

    // A token issued for the first server is refused by the second (audience binding), even presented by hand.
    const stolen = (await client.tokens(first))!.access_token
    const direct = await fetch(second, {
      method: "POST",
      headers: { authorization: `Bearer ${stolen}`, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    })
    expect(direct.status).toBe(401)
    expect(direct.headers.get("www-authenticate")).toContain('error="invalid_token"')

    // The client never sends the first server's token to the second: it authorizes anew for that resource.
    const other = await call(client, second, "tools/list")
    expect(other.status).toBe(200)
    expect(visits).toHaveLength(3)
    expect((await client.tokens(second))!.access_token).not.toBe(stolen)
    await client.dispose()
  })

  it("surfaces the person's refusal as access_denied", async () => {
    decision = "Deny"
    try {
      const client = createAuthClient({
        clientName: "E2E refused client",
        userAgent: UserAgent.browser({ openBrowser }),
      })
      const error = await call(client, stack.mcp[0]!, "tools/list").catch((e: unknown) => e)
      expect(isAuthError(error)).toBe(true)
      expect(error).toMatchObject({ step: "authorization", error: "access_denied" })
      await client.dispose()
    } finally {
      decision = "Approve"
    }
  })
})
