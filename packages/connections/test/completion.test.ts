/**
 * On 2025-era requests the server waits for the connect flow's completion to notify the session: that wait (its
 * completion listener) ends when the flow completes, when it expires (flowTtl, on the TestClock) or when the session
 * closes, so elicitations never finished leak no listener.
 */
import { Client, StreamableHTTPClientTransport, UrlElicitationRequiredError } from "@modelcontextprotocol/client"
import { afterEach, describe, expect, it } from "vitest"
import { browser } from "./support/browser.js"
import { startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const TOOL = { name: "whoami_at_codehost", arguments: {} }

const session = async (resource: string) => {
  const client = new Client({ name: "test-client", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } })
  const transport = new StreamableHTTPClientTransport(new URL(resource), {
    requestInit: { headers: { authorization: "Bearer user.-carol" } },
  })
  await client.connect(transport)
  cleanups.push(() => client.close())
  /** Calls the tool, which asks for the connection: the -32042 error's elicitation URL. */
  const elicit = async () => {
    const error = await client.callTool(TOOL).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(UrlElicitationRequiredError)
    return (error as UrlElicitationRequiredError).elicitations[0]?.url ?? ""
  }
  return { client, transport, elicit }
}

/** Lets the server's pending work run (the removal of a listener follows an event) until `done`, a bounded number of turns. */
const settle = async (done: () => boolean) => {
  for (let turn = 0; turn < 200 && !done(); turn++) await new Promise((resolve) => setImmediate(resolve))
}

describe("completion listeners of 2025-era elicitations", () => {
  it("are removed when the flows expire (flowTtl), not before", async () => {
    const stack = await startStack(cleanups, { flowTtl: 120 })
    const { elicit } = await session(stack.resource)
    await elicit()
    await elicit()
    await elicit()
    expect(stack.connections.listenerCount()).toBe(3)
    await stack.adjust(119_000)
    await settle(() => false)
    expect(stack.connections.listenerCount()).toBe(3)
    await stack.adjust(1_000)
    await settle(() => stack.connections.listenerCount() === 0)
    expect(stack.connections.listenerCount()).toBe(0)
  })

  it("are removed when the session closes", async () => {
    const stack = await startStack(cleanups)
    const { elicit, transport } = await session(stack.resource)
    await elicit()
    await elicit()
    expect(stack.connections.listenerCount()).toBe(2)
    await transport.terminateSession()
    await settle(() => stack.connections.listenerCount() === 0)
    expect(stack.connections.listenerCount()).toBe(0)
  })

  it("is removed when its flow completes, after the notification", async () => {
    const stack = await startStack(cleanups)
    const { client, elicit } = await session(stack.resource)
    const completed: Array<string> = []
    client.setNotificationHandler("notifications/elicitation/complete", (notification) => {
      completed.push(notification.params.elicitationId)
    })
    const url = await elicit()
    expect(stack.connections.listenerCount()).toBe(1)
    const page = await browser().connect(url)
    expect(page.html).toContain("Your Code Host account is connected")
    await settle(() => completed.length === 1 && stack.connections.listenerCount() === 0)
    expect(completed).toHaveLength(1)
    expect(stack.connections.listenerCount()).toBe(0)
  })
})
