/**
 * Interop: the official MCP SDK 2.4.0 `Client`, with no Keyway client code, completes the connect flow against an MCP
 * server with connections. Its own `elicitation/create` handler opens the URL with a plain cookie-keeping HTTP client
 * (the user's browser: the connect page, the provider's login and consent, the callback) and answers `accept`. On
 * 2025-11-25 the application runs that handler for the -32042 error's elicitation, waits for
 * `notifications/elicitation/complete` and retries; on 2026-07-28 the SDK's multi-round-trip driver calls it and
 * retries by itself.
 */
import {
  Client,
  type ElicitRequestURLParams,
  type ElicitResult,
  StreamableHTTPClientTransport,
  UrlElicitationRequiredError,
} from "@modelcontextprotocol/client"
import { afterEach, describe, expect, it } from "vitest"
import { browser } from "./support/browser.js"
import { startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const TOOL = { name: "whoami_at_codehost", arguments: {} }
const CONNECTED = [{ type: "text", text: '200 {"login":"alice"}' }]

/** The application's side: an SDK client whose elicitation handler opens URLs in a cookie-keeping HTTP client. */
const sdkClient = async (resource: string, pin?: "2026-07-28") => {
  const client = new Client(
    { name: "plain-sdk-client", version: "1.0.0" },
    {
      capabilities: { elicitation: { url: {} } },
      ...(pin === undefined ? {} : { versionNegotiation: { mode: { pin } } }),
    },
  )
  const pages: Array<{ url: string; html: string }> = []
  const user = browser()
  const open = async (params: {
    readonly mode?: string | undefined
    readonly url?: string | undefined
  }): Promise<ElicitResult> => {
    if (params.mode !== "url" || params.url === undefined) return { action: "decline" }
    const page = await user.connect(params.url)
    pages.push({ url: params.url, html: page.html })
    return { action: page.status === 200 ? "accept" : "cancel" }
  }
  client.setRequestHandler("elicitation/create", (request) => open(request.params))
  const completed: Array<string> = []
  const waiters: Array<() => void> = []
  client.setNotificationHandler("notifications/elicitation/complete", (notification) => {
    completed.push(notification.params.elicitationId)
    for (const wake of waiters.splice(0)) wake()
  })
  const completion = (id: string) =>
    new Promise<void>((resolve) => {
      if (completed.includes(id)) resolve()
      else waiters.push(() => (completed.includes(id) ? resolve() : undefined))
    })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(resource), {
      requestInit: { headers: { authorization: "Bearer user.alice" } },
    }),
  )
  cleanups.push(() => client.close())
  return { client, open, pages, completion, completed }
}

describe("the official MCP SDK client, without Keyway's client, completes the connect flow", () => {
  it("on 2025-11-25: -32042, its handler opens the URL, the completion notification, the retry succeeds", async () => {
    const stack = await startStack(cleanups)
    const app = await sdkClient(stack.resource)
    const error = await app.client.callTool(TOOL).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(UrlElicitationRequiredError)
    const [elicitation] = (error as UrlElicitationRequiredError).elicitations as Array<ElicitRequestURLParams>
    if (elicitation === undefined) throw new Error("no elicitation")
    expect(elicitation.url).toMatch(new RegExp(`^${stack.site.url}/connect/codehost\\?ref=[A-Za-z0-9_-]{43}$`, "u"))
    expect(await app.open(elicitation)).toEqual({ action: "accept" })
    expect(app.pages[0]?.html).toContain("Your Code Host account is connected")
    await app.completion(elicitation.elicitationId)
    expect(app.completed).toEqual([elicitation.elicitationId])
    expect((await app.client.callTool(TOOL)).content).toEqual(CONNECTED)
    expect((await app.client.callTool(TOOL)).content).toEqual(CONNECTED)
    expect(app.pages).toHaveLength(1)
  })

  it("on 2026-07-28: the SDK calls its handler for the input request and retries with accept by itself", async () => {
    const stack = await startStack(cleanups)
    const app = await sdkClient(stack.resource, "2026-07-28")
    const result = await app.client.callTool(TOOL)
    expect(result.content).toEqual(CONNECTED)
    expect(app.pages).toHaveLength(1)
    expect(app.pages[0]?.url).toMatch(new RegExp(`^${stack.site.url}/connect/codehost\\?ref=[A-Za-z0-9_-]{43}$`, "u"))
    expect(app.pages[0]?.html).toContain("Your Code Host account is connected")
    expect((await app.client.callTool(TOOL)).content).toEqual(CONNECTED)
    expect(app.pages).toHaveLength(1)
    // 2026-07-28 has no completion notification: the retry is the signal.
    expect(app.completed).toEqual([])
  })
})
