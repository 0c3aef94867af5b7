/**
 * The notes server with connected accounts, over HTTP: apps/authorization-server for the MCP tokens, the code host of
 * `@keyway/testing` (node-oidc-provider and its API) as the third party, the official MCP SDK client on 2026-07-28
 * (the SDK retries the input-required round) with its own elicitation handler driving the connect pages as a
 * cookie-keeping browser.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { KeyRing } from "@keyway/connections"
import { type RunningCodeHost, startCodeHost } from "@keyway/testing/code-host"
import { Client, type ElicitResult, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { afterEach, describe, expect, it } from "vitest"
import { obtainToken, type Stack, startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const SECRET = "-the notes server's secret at the code host"

const connectedStack = async (): Promise<{ stack: Stack; host: RunningCodeHost; vaultPath: string }> => {
  const dir = await mkdtemp(join(tmpdir(), "keyway-mcp-vault-"))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const vaultPath = join(dir, "vault.db")
  let host: RunningCodeHost | undefined
  const stack = await startStack({}, async (resource) => {
    const started = await startCodeHost({
      clientId: "keyway-notes",
      clientSecret: SECRET,
      redirectUris: [`${new URL(resource).origin}/connect/codehost/callback`],
      repositories: { alice: ["keyway", "-dash-first"] },
    })
    cleanups.push(started.close)
    host = started
    return {
      connections: {
        providers: {
          codehost: {
            name: "Code Host",
            issuer: started.issuer,
            clientId: "keyway-notes",
            clientSecret: SECRET,
            scopes: ["openid", "offline_access"],
            apiBase: started.apiBase,
          },
        },
        codeHost: "codehost",
        vaultPath,
        vaultKeys: `-k1:${KeyRing.generateKey()}`,
      },
    }
  })
  cleanups.push(stack.close)
  if (host === undefined) throw new Error("no code host")
  return { stack, host, vaultPath }
}

/** A cookie-keeping browser through the connect page, the code host's login and consent, and the callback. */
const browse = async (start: string): Promise<{ status: number; html: string }> => {
  const jar = new Map<string, string>()
  const request = async (url: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers)
    if (jar.size > 0) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "))
    const response = await fetch(url, { ...init, headers, redirect: "manual" })
    for (const line of response.headers.getSetCookie()) {
      const [pair = ""] = line.split(";")
      jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1))
    }
    return response
  }
  const go = async (url: string, init: RequestInit = {}) => {
    let current = url
    let response = await request(current, init)
    for (let hops = 0; response.status >= 300 && response.status < 400 && hops < 20; hops++) {
      current = new URL(response.headers.get("location") ?? "", current).href
      await response.body?.cancel()
      response = await request(current)
    }
    return { url: current, status: response.status, html: await response.text() }
  }
  const submit = (page: { url: string; html: string }, values: Record<string, string>) => {
    const form = /<form[^>]*action="([^"]*)"[^>]*>([\s\S]*?)<\/form>/iu.exec(page.html)
    const fields = new URLSearchParams()
    for (const input of form?.[2]?.matchAll(/<input[^>]*>/giu) ?? []) {
      const name = /name="([^"]*)"/iu.exec(input[0])?.[1]
      if (name !== undefined) fields.set(name, (/value="([^"]*)"/iu.exec(input[0])?.[1] ?? "").replaceAll("&amp;", "&"))
    }
    for (const [k, v] of Object.entries(values)) fields.set(k, v)
    return go(new URL((form?.[1] ?? "").replaceAll("&amp;", "&"), page.url).href, {
      method: "POST",
      body: fields,
      headers: { "content-type": "application/x-www-form-urlencoded" },
    })
  }
  let page = await go(start)
  if (page.status !== 200) return page
  page = await submit(page, {})
  for (let step = 0; step < 4 && page.status === 200 && /name="(login|prompt)"/u.test(page.html); step++) {
    page = await submit(page, { login: "alice", password: "any password" })
  }
  return page
}

const session = async (url: string, token: string) => {
  const client = new Client(
    { name: "test-client", version: "1.0.0" },
    { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  )
  const opened: Array<string> = []
  client.setRequestHandler("elicitation/create", async (request): Promise<ElicitResult> => {
    if (request.params.mode !== "url") return { action: "decline" }
    opened.push(request.params.url)
    const page = await browse(request.params.url)
    return { action: page.status === 200 ? "accept" : "cancel" }
  })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  )
  cleanups.push(() => client.close())
  return { client, opened }
}

const REPOS = [{ type: "text", text: "2 repositories at Code Host:\nalice/keyway\nalice/-dash-first" }]

describe("the notes server with connected accounts", () => {
  it("asks to connect, then lists the repositories; the vault file holds no token in clear", async () => {
    const { stack, host, vaultPath } = await connectedStack()
    const token = await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read")
    const { client, opened } = await session(stack.mcp.url, token)
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain("list_code_repositories")
    const origin = new URL(stack.mcp.url).origin
    expect((await client.callTool({ name: "list_code_repositories", arguments: {} })).content).toEqual(REPOS)
    expect(opened).toHaveLength(1)
    expect(opened[0]).toMatch(new RegExp(`^${origin}/connect/codehost\\?ref=[A-Za-z0-9_-]{43}$`, "u"))
    // The vault answers the next call: no elicitation, no new grant at the code host.
    expect((await client.callTool({ name: "list_code_repositories", arguments: {} })).content).toEqual(REPOS)
    expect(opened).toHaveLength(1)
    expect(host.counts.codes).toBe(1)
    expect(stack.mcpLog).toContain('connected "alice" at codehost')
    const file = await readFile(vaultPath)
    expect(file.includes(Buffer.from("keyway-notes"))).toBe(false)
    expect(file.includes(Buffer.from("Bearer"))).toBe(false)
  })

  it("serves the connect pages on the MCP server's origin: an unknown link is refused, other methods get 405", async () => {
    const { stack } = await connectedStack()
    const origin = new URL(stack.mcp.url).origin
    const unknown = await fetch(`${origin}/connect/codehost?ref=-not-a-reference`)
    expect(unknown.status).toBe(400)
    expect(await unknown.text()).toContain(
      "This connection link is unknown, has expired or was already used: call the tool again in your MCP client for a new link.",
    )
    const put = await fetch(`${origin}/connect/codehost`, { method: "PUT" })
    expect(put.status).toBe(405)
    expect(put.headers.get("allow")).toBe("GET, POST")
    expect((await fetch(`${origin}/connect/elsewhere`)).status).toBe(404)
  })

  it("does not offer list_code_repositories without connections", async () => {
    const stack = await startStack()
    cleanups.push(stack.close)
    const token = await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read")
    const { client } = await session(stack.mcp.url, token)
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).not.toContain("list_code_repositories")
    expect((await fetch(`${new URL(stack.mcp.url).origin}/connect/codehost`)).status).toBe(404)
  })
})
