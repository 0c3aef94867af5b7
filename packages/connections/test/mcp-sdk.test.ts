/**
 * `connectionTools(...).withConnection` over HTTP: the SDK 2.4.0 `Client` against an SDK 2.4.0 `McpServer` behind
 * `protectMcp`, on MCP 2025-11-25 (the -32042 error and the completion notification on a session) and 2026-07-28 (the
 * input-required round and its retry, driven by the SDK or by hand), with the user's browser scripted through the
 * connect page, the provider's login and the callback.
 */
import {
  Client,
  type ElicitRequestURLParams,
  type InputRequiredResult,
  StreamableHTTPClientTransport,
  UrlElicitationRequiredError,
} from "@modelcontextprotocol/client"
import { afterEach, describe, expect, it } from "vitest"
import { browser } from "./support/browser.js"
import { RETRY_WAIT, startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const TOOL = { name: "whoami_at_codehost", arguments: {} }
const MESSAGE = "Keyway notes needs access to your Code Host account. Open the link to connect it."
const CONNECTED = { content: [{ type: "text", text: '200 {"login":"alice"}' }] }
const UNSUPPORTED = {
  content: [
    {
      type: "text",
      text: "This tool needs your codehost account connected to this MCP server, which takes a step in your browser: this MCP client does not support URL-mode elicitation (MCP 2025-11-25), so use a client that does.",
    },
  ],
  isError: true,
}

/** What every 2026-07-28 result carries besides the tool's answer. */
const SERVER_META = { _meta: { "io.modelcontextprotocol/serverInfo": { name: "keyway-notes", version: "1.0.0" } } }

type Era = "2025-11-25" | "2026-07-28"

const connect = async (
  resource: string,
  era: Era,
  options: { readonly url?: boolean; readonly manual?: boolean } = {},
) => {
  const client = new Client(
    { name: "test-client", version: "1.0.0" },
    {
      capabilities: options.url === false ? {} : { elicitation: { url: {} } },
      ...(era === "2026-07-28" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {}),
      ...(options.manual === true ? { inputRequired: { autoFulfill: false } } : {}),
    },
  )
  const transport = new StreamableHTTPClientTransport(new URL(resource), {
    requestInit: { headers: { authorization: "Bearer user.-alice" } },
  })
  await client.connect(transport)
  cleanups.push(() => client.close())
  return client
}

const deferred = <T>() => {
  let resolve: (value: T) => void = () => undefined
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

describe("withConnection on MCP 2025-11-25 (sessionful streamable HTTP)", () => {
  it("answers -32042, notifies the completion when the callback finishes, and the retried call succeeds", async () => {
    const stack = await startStack(cleanups)
    const client = await connect(stack.resource, "2025-11-25")
    const completed = deferred<string>()
    client.setNotificationHandler("notifications/elicitation/complete", (notification) => {
      completed.resolve(notification.params.elicitationId)
    })
    const error = await client.callTool(TOOL).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(UrlElicitationRequiredError)
    const required = error as UrlElicitationRequiredError
    expect(required.code).toBe(-32042)
    const [elicitation] = (required.data as { elicitations: Array<ElicitRequestURLParams> }).elicitations
    expect(required.data).toEqual({
      elicitations: [
        {
          mode: "url",
          elicitationId: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/u),
          url: expect.stringMatching(new RegExp(`^${stack.site.url}/connect/codehost\\?ref=[A-Za-z0-9_-]{43}$`, "u")),
          message: MESSAGE,
        },
      ],
    })
    const page = await browser().connect(elicitation?.url ?? "")
    expect(page.html).toContain("Your Code Host account is connected")
    expect(await completed.promise).toBe(elicitation?.elicitationId)
    expect(await client.callTool(TOOL)).toEqual(CONNECTED)
    // The vault answers the next call silently.
    expect(await client.callTool(TOOL)).toEqual(CONNECTED)
  })

  it("answers a tool error to a client that declared no URL elicitation", async () => {
    const stack = await startStack(cleanups)
    const client = await connect(stack.resource, "2025-11-25", { url: false })
    expect(await client.callTool(TOOL)).toEqual(UNSUPPORTED)
  })
})

describe("withConnection on MCP 2026-07-28 (input-required rounds)", () => {
  it("asks with a URL elicitation; the SDK's driver retries with accept and gets the result once connected", async () => {
    const stack = await startStack(cleanups)
    const client = await connect(stack.resource, "2026-07-28")
    const asked: Array<unknown> = []
    const opened = deferred<string>()
    client.setRequestHandler("elicitation/create", async (request) => {
      asked.push(request.params)
      if (request.params.mode === "url") opened.resolve(request.params.url)
      return { action: "accept" }
    })
    const call = client.callTool(TOOL)
    const url = await opened.promise
    expect(asked).toEqual([
      {
        mode: "url",
        message: MESSAGE,
        url: expect.stringMatching(new RegExp(`^${stack.site.url}/connect/codehost\\?ref=[A-Za-z0-9_-]{43}$`, "u")),
      },
    ])
    // The retry waits on the server for the callback, which the user's browser now reaches.
    const page = await browser().connect(url)
    expect(page.html).toContain("Your Code Host account is connected")
    expect(await call).toEqual({ ...SERVER_META, ...CONNECTED })
    expect(await client.callTool(TOOL)).toEqual({ ...SERVER_META, ...CONNECTED })
    expect(asked).toHaveLength(1)
  })

  it("answers another input-required result when the flow does not complete within retryWait", async () => {
    const stack = await startStack(cleanups)
    const client = await connect(stack.resource, "2026-07-28", { manual: true })
    const first = (await client.callTool(TOOL, { allowInputRequired: true })) as unknown as InputRequiredResult
    expect(first).toEqual({
      ...SERVER_META,
      resultType: "input_required",
      inputRequests: {
        connect: {
          method: "elicitation/create",
          params: {
            mode: "url",
            message: MESSAGE,
            url: expect.stringMatching(new RegExp(`^${stack.site.url}/connect/codehost\\?ref=[A-Za-z0-9_-]{43}$`, "u")),
          },
        },
      },
      requestState: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/u),
    })
    const before = await stack.now()
    let settled = false
    // The retry's params of 2026-07-28 (MRTR), which the SDK's 2025-shaped CallToolRequest type does not name.
    const params = { ...TOOL, inputResponses: { connect: { action: "accept" } }, requestState: first.requestState }
    const retry = client.callTool(params as typeof TOOL, { allowInputRequired: true }).finally(() => {
      settled = true
    })
    // The server waits on the connections' TestClock: move it on until the retry is answered.
    while (!settled) {
      await stack.adjust(1_000)
      await new Promise((resolve) => setImmediate(resolve))
    }
    const second = (await retry) as unknown as InputRequiredResult
    expect(await stack.now()).toBeGreaterThanOrEqual(before + RETRY_WAIT)
    expect(second.resultType).toBe("input_required")
    expect(second.requestState).toMatch(/^[A-Za-z0-9_-]{22}$/u)
    expect(second.requestState).not.toBe(first.requestState)
  })

  it("answers a tool error, not another round, to a retry whose answer is decline", async () => {
    const stack = await startStack(cleanups)
    const client = await connect(stack.resource, "2026-07-28")
    let asked = 0
    client.setRequestHandler("elicitation/create", async () => {
      asked++
      return { action: "decline" }
    })
    expect(await client.callTool(TOOL)).toEqual({
      ...SERVER_META,
      content: [
        {
          type: "text",
          text: 'Your codehost account was not connected (the elicitation was answered "decline"), so this tool cannot run. Call it again to connect.',
        },
      ],
      isError: true,
    })
    expect(asked).toBe(1)
  })

  it("answers a tool error to a client that declared no URL elicitation", async () => {
    const stack = await startStack(cleanups)
    const client = await connect(stack.resource, "2026-07-28", { url: false })
    expect(await client.callTool(TOOL)).toEqual({ ...SERVER_META, ...UNSUPPORTED })
  })
})
