import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { UserAgent } from "@keyway/client"
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import {
  createMcpHandler,
  inputRequired,
  inputResponse,
  McpServer,
  UrlElicitationRequiredError,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server"
import { afterEach, describe, expect, it } from "vitest"
import { UrlElicitationFailed, type UrlElicitationOptions, urlElicitation } from "../src/index.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

/** The elicitation ID and reference used in the tests: edge values that begin with "-". */
const ID = "-elicitation-1"

interface Peer {
  readonly url: string
  readonly origin: string
  /** Elicitation IDs (2025-11-25) or references (2026-07-28) whose connect page was visited. */
  readonly connected: Set<string>
  readonly calls: Array<string>
  /** Asks again after the first connection (a misbehaving server). */
  askAgain: boolean
}

/** Serves one node:http server: /connect?id=… (the page the user is sent to) and /mcp (the MCP endpoint). */
const serve = async (
  mcp: (request: Request) => Promise<Response>,
  onConnect: (id: string) => Promise<void>,
  close: () => Promise<void>,
): Promise<Peer> => {
  const connected = new Set<string>()
  let origin = ""
  const node = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      void (async () => {
        const url = new URL(req.url ?? "/", origin)
        let response: Response
        if (url.pathname === "/connect") {
          const id = url.searchParams.get("id") ?? ""
          connected.add(id)
          await onConnect(id)
          response = new Response("<p>Connected</p>", { headers: { "content-type": "text/html" } })
        } else {
          const headers = new Headers()
          for (const [name, value] of Object.entries(req.headers))
            if (typeof value === "string") headers.set(name, value)
          const body = Buffer.concat(chunks).toString("utf8")
          response = await mcp(
            new Request(url, {
              method: req.method ?? "GET",
              headers,
              ...(req.method === "GET" || req.method === "DELETE" ? {} : { body }),
            }),
          )
        }
        res.writeHead(response.status, Object.fromEntries(response.headers))
        res.flushHeaders()
        const reader = response.body?.getReader()
        for (let part = await reader?.read(); part !== undefined && !part.done; part = await reader?.read()) {
          res.write(part.value)
        }
        res.end()
      })()
    })
  })
  await new Promise<void>((resolve) => node.listen(0, "127.0.0.1", resolve))
  origin = `http://127.0.0.1:${(node.address() as AddressInfo).port}`
  cleanups.push(async () => {
    await close()
    await new Promise<void>((resolve) => {
      node.close(() => resolve())
      node.closeAllConnections()
    })
  })
  return { url: `${origin}/mcp`, origin, connected, calls: [], askAgain: false }
}

/**
 * A 2025-11-25 server with sessions: `files` fails with -32042 until its connect page was visited, which sends
 * `notifications/elicitation/complete`; `connect-now` sends `elicitation/create` in URL mode and reports the answer.
 */
const start2025 = async (urlOf: (origin: string, id: string) => string = (o, id) => `${o}/connect?id=${id}`) => {
  const sessions = new Map<string, { transport: WebStandardStreamableHTTPServerTransport; server: McpServer }>()
  const peer: Peer = await serve(
    async (request) => {
      const existing = sessions.get(request.headers.get("mcp-session-id") ?? "")
      if (existing !== undefined) return existing.transport.handleRequest(request)
      const server = new McpServer({ name: "files-server", title: "Files", version: "1.0.0" })
      server.registerTool("files", { description: "Lists files" }, async () => {
        peer.calls.push("files")
        if (!peer.connected.has(ID) || peer.askAgain) {
          throw new UrlElicitationRequiredError([
            { mode: "url", elicitationId: ID, url: urlOf(peer.origin, ID), message: "Connect your drive" },
          ])
        }
        return { content: [{ type: "text", text: "a.txt b.txt" }] }
      })
      server.registerTool("capabilities", { description: "Shows the client's elicitation capability" }, async () => ({
        content: [{ type: "text", text: JSON.stringify(server.server.getClientCapabilities()?.elicitation) }],
      }))
      server.registerTool("connect-now", { description: "Asks to connect" }, async (ctx) => {
        const result = await ctx.mcpReq.elicitInput({
          mode: "url",
          elicitationId: "-now",
          url: urlOf(peer.origin, "-now"),
          message: "Connect now",
        })
        return { content: [{ type: "text", text: `${result.action} ${peer.connected.has("-now")}` }] }
      })
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
      })
      await server.connect(transport)
      return transport.handleRequest(request)
    },
    async (id) => {
      for (const { server } of sessions.values()) {
        await server.server
          .createElicitationCompletionNotifier(id)()
          .catch(() => undefined)
      }
    },
    async () => {
      for (const { server } of sessions.values()) await server.close()
    },
  )
  return peer
}

/** A 2026-07-28 server: `files` answers input_required with a URL-mode elicitation until its page was visited. */
const start2026 = async () => {
  let peerRef: Peer | undefined
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: "files-server", title: "Files", version: "1.0.0" })
    server.registerTool("files", { description: "Lists files" }, async (ctx) => {
      const peer = peerRef as Peer
      const answer = inputResponse(ctx.mcpReq.inputResponses, "connect")
      peer.calls.push(
        `files ${answer.kind === "elicit" ? answer.action : answer.kind} ${String(ctx.mcpReq.requestState() ?? "-")}`,
      )
      if (answer.kind === "elicit" && answer.action !== "accept") {
        return { isError: true, content: [{ type: "text", text: `the user answered ${answer.action}` }] }
      }
      if (answer.kind === "elicit" && peer.connected.has(ID))
        return { content: [{ type: "text", text: "a.txt b.txt" }] }
      return inputRequired({
        inputRequests: {
          connect: inputRequired.elicitUrl({ message: "Connect your drive", url: `${peer.origin}/connect?id=${ID}` }),
        },
        requestState: "-state",
      })
    })
    return server
  })
  const peer = await serve(
    (request) => handler.fetch(request),
    async () => undefined,
    () => handler.close(),
  )
  peerRef = peer
  return peer
}

const connect = async (
  peer: Peer,
  options: Partial<UrlElicitationOptions> & { readonly modern?: boolean } = {},
): Promise<{ client: Client; elicit: ReturnType<typeof urlElicitation>; prompts: Array<string> }> => {
  const { modern, ...rest } = options
  const client = new Client(
    { name: "keyway-elicitation-test", version: "1.0.0" },
    modern === true ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
  )
  const prompts: Array<string> = []
  const elicit = urlElicitation(client, {
    userAgent: UserAgent.headless(),
    consent: (p) => {
      prompts.push(`${p.server} | ${p.host} | ${p.message} | ${p.url}`)
      return "accept"
    },
    ...rest,
  })
  cleanups.push(() => client.close())
  await client.connect(new StreamableHTTPClientTransport(new URL(peer.url)))
  return { client, elicit, prompts }
}

const text = (result: { content?: unknown }): string =>
  ((result.content as Array<{ text?: string }> | undefined)?.[0]?.text ?? "") as string

describe("URL-mode elicitation on 2025-11-25", () => {
  it("declares url mode only, unless forms are handled too", async () => {
    const peer = await start2025()
    const { client } = await connect(peer)
    expect(text((await client.callTool({ name: "capabilities", arguments: {} })) as { content?: unknown })).toBe(
      '{"url":{}}',
    )
    const { client: withForms } = await connect(peer, { form: async () => ({ action: "decline" }) })
    expect(text((await withForms.callTool({ name: "capabilities", arguments: {} })) as { content?: unknown })).toBe(
      '{"form":{},"url":{}}',
    )
  })

  it("presents the -32042 elicitation, opens it in the user agent, waits for completion and retries once", async () => {
    const peer = await start2025()
    const { elicit, prompts } = await connect(peer)
    const result = await elicit.callTool({ name: "files", arguments: {} })
    expect(text(result)).toBe("a.txt b.txt")
    expect(prompts).toEqual([
      `Files | ${new URL(peer.origin).host} | Connect your drive | ${peer.origin}/connect?id=${ID}`,
    ])
    expect(peer.calls).toEqual(["files", "files"])
  })

  it("answers a URL-mode elicitation/create with the user's consent after opening the URL", async () => {
    const peer = await start2025()
    const { client } = await connect(peer)
    const result = await client.callTool({ name: "connect-now", arguments: {} })
    expect(text(result as { content?: unknown })).toBe("accept true")
  })

  it("answers decline without opening anything, and does not retry", async () => {
    const peer = await start2025()
    const { client, elicit } = await connect(peer, { consent: () => "decline" })
    const error = await elicit.callTool({ name: "files", arguments: {} }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UrlElicitationFailed)
    expect((error as UrlElicitationFailed).reason).toBe("declined")
    expect((error as Error).message).toBe(`the elicitation ${ID} was declined`)
    expect(peer.calls).toEqual(["files"])
    expect(peer.connected.size).toBe(0)
    const direct = await client.callTool({ name: "connect-now", arguments: {} })
    expect(text(direct as { content?: unknown })).toBe("decline false")
  })

  it("answers cancel, and does not retry", async () => {
    const peer = await start2025()
    const { elicit } = await connect(peer, { consent: () => "cancel" })
    const error = (await elicit
      .callTool({ name: "files", arguments: {} })
      .catch((e: unknown) => e)) as UrlElicitationFailed
    expect(error.reason).toBe("cancelled")
    expect(error.message).toBe(`the elicitation ${ID} was cancelled`)
    expect(peer.calls).toEqual(["files"])
  })

  it("declines a URL that is not https without asking, with the reason", async () => {
    const peer = await start2025(() => "http://connect.example/connect")
    const { elicit, prompts } = await connect(peer)
    const error = (await elicit
      .callTool({ name: "files", arguments: {} })
      .catch((e: unknown) => e)) as UrlElicitationFailed
    expect(error.reason).toBe("declined")
    expect(error.message).toBe(
      `the elicitation ${ID} was declined: Files asked to open http://connect.example, which is neither https nor http on a loopback host; it was not opened`,
    )
    expect(prompts).toEqual([])
  })

  it("stops waiting when the caller's signal aborts, without retrying", async () => {
    const peer = await start2025()
    const controller = new AbortController()
    // The user agent opens nothing (the page is never visited), then the caller gives up.
    const { elicit } = await connect(peer, {
      open: () => controller.abort(new Error("the user pressed Escape")),
    })
    const error = await elicit
      .callTool({ name: "files", arguments: {} }, { signal: controller.signal })
      .catch((e: unknown) => e)
    expect((error as Error).message).toBe("the user pressed Escape")
    expect(peer.calls).toEqual(["files"])
  })

  it("gives up after the time limit when no completion arrives", async () => {
    const peer = await start2025()
    const { elicit } = await connect(peer, { open: () => undefined, timeoutMs: 0 })
    const error = (await elicit
      .callTool({ name: "files", arguments: {} })
      .catch((e: unknown) => e)) as UrlElicitationFailed
    expect(error.reason).toBe("timeout")
    expect(error.message).toBe(`the server did not report the elicitation ${ID} complete within 0 seconds`)
    expect(peer.calls).toEqual(["files"])
  })

  it("does not retry twice when the server asks again after completion", async () => {
    const peer = await start2025()
    peer.askAgain = true
    const { elicit, prompts } = await connect(peer)
    const error = (await elicit
      .callTool({ name: "files", arguments: {} })
      .catch((e: unknown) => e)) as UrlElicitationFailed
    expect(error.reason).toBe("repeated")
    expect(error.message).toBe(
      `the server asked again for URL elicitation after ${ID} completed; the request is not retried twice`,
    )
    expect(peer.calls).toEqual(["files", "files"])
    expect(prompts).toHaveLength(1)
  })
})

describe("URL-mode elicitation on 2026-07-28 (multi round-trip requests)", () => {
  it("answers the input request after consent and lets the SDK's driver retry with the requestState", async () => {
    const peer = await start2026()
    const { client, prompts } = await connect(peer, { modern: true })
    const result = await client.callTool({ name: "files", arguments: {} })
    expect(text(result as { content?: unknown })).toBe("a.txt b.txt")
    expect(prompts).toEqual([
      `Files | ${new URL(peer.origin).host} | Connect your drive | ${peer.origin}/connect?id=${ID}`,
    ])
    expect(peer.calls).toEqual(["files missing -", "files accept -state"])
  })

  it("answers decline, which the server sees on the retry", async () => {
    const peer = await start2026()
    const { client } = await connect(peer, { modern: true, consent: () => "decline" })
    const result = await client.callTool({ name: "files", arguments: {} })
    expect(text(result as { content?: unknown })).toBe("the user answered decline")
    expect(peer.calls).toEqual(["files missing -", "files decline -state"])
    expect(peer.connected.size).toBe(0)
  })

  it("answers cancel", async () => {
    const peer = await start2026()
    const { client } = await connect(peer, { modern: true, consent: () => "cancel" })
    const result = await client.callTool({ name: "files", arguments: {} })
    expect(text(result as { content?: unknown })).toBe("the user answered cancel")
  })
})
