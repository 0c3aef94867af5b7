import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startAuthorizationServer } from "@keyway/app-authorization-server"
import { freePort } from "@keyway/testing"
import { Client, InsufficientScopeError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { afterEach, describe, expect, it } from "vitest"
import { NOTE_SCOPES, startMcpServer } from "../src/index.js"
import { OTHER_USER, obtainToken, rpc, type Stack, startStack, USER } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const stack = async (): Promise<Stack> => {
  const s = await startStack()
  cleanups.push(s.close)
  return s
}

const metadataUrl = (resource: string) => `${new URL(resource).origin}/.well-known/oauth-protected-resource/mcp`

const initialize = {
  protocolVersion: "2025-11-25",
  capabilities: {},
  clientInfo: { name: "raw", version: "1.0.0" },
}

/** The official SDK client with a fixed bearer token (no OAuth provider: challenges surface as errors). */
const connect = async (url: string, token: string): Promise<Client> => {
  const client = new Client({ name: "test-client", version: "1.0.0" })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  )
  cleanups.push(() => client.close())
  return client
}

const text = (result: unknown): string => {
  const content = (result as { content: ReadonlyArray<{ type: string; text?: string }> }).content
  return content.map((c) => c.text ?? "").join("\n")
}

describe("notes MCP server", () => {
  it("answers 401 with the metadata URL and notes:read when no token is sent", async () => {
    const s = await stack()
    const response = await rpc(s.mcp.url, undefined, "initialize", initialize)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${metadataUrl(s.mcp.url)}", scope="notes:read"`,
    )
    // A tools/call of a writing tool names both scopes already.
    const write = await rpc(s.mcp.url, undefined, "tools/call", { name: "write_note", arguments: {} })
    expect(write.status).toBe(401)
    expect(write.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${metadataUrl(s.mcp.url)}", scope="notes:read notes:write"`,
    )
    expect(s.mcpLog).toContain("POST /mcp 401 (no token)")
  })

  it("serves protected resource metadata at the RFC 9728 path and at the root", async () => {
    const s = await stack()
    const expected = {
      resource: s.mcp.url,
      authorization_servers: [s.as.issuer],
      scopes_supported: Object.keys(NOTE_SCOPES),
      bearer_methods_supported: ["header"],
      resource_name: "Keyway notes",
    }
    const specific = await fetch(metadataUrl(s.mcp.url))
    expect(specific.status).toBe(200)
    expect(await specific.json()).toEqual(expected)
    const root = await fetch(`${new URL(s.mcp.url).origin}/.well-known/oauth-protected-resource`)
    expect(await root.json()).toEqual(expected)
    // Other paths are not part of the server.
    const elsewhere = await fetch(`${new URL(s.mcp.url).origin}/other`, { method: "POST", body: "{}" })
    expect(elsewhere.status).toBe(404)
  })

  it("lists tools and runs the reading tools with a notes:read token", async () => {
    const s = await stack()
    const token = await obtainToken(s.as.issuer, s.mcp.url, "notes:read")
    const client = await connect(s.mcp.url, token)
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(["list_notes", "read_note", "write_note", "delete_note"])
    expect(text(await client.callTool({ name: "list_notes", arguments: {} }))).toBe("No notes yet.")
    const missing = await client.callTool({ name: "read_note", arguments: { id: "1" } })
    expect(missing.isError).toBe(true)
    expect(text(missing)).toBe("No note #1.")
  })

  it("refuses write_note with a read-only token: 403 insufficient_scope naming notes:read notes:write", async () => {
    const s = await stack()
    const token = await obtainToken(s.as.issuer, s.mcp.url, "notes:read")
    const raw = await rpc(s.mcp.url, token, "tools/call", { name: "write_note", arguments: { title: "t", text: "x" } })
    expect(raw.status).toBe(403)
    expect(raw.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${metadataUrl(s.mcp.url)}", scope="notes:read notes:write", ` +
        'error="insufficient_scope", error_description="The access token does not grant the scopes this request needs"',
    )
    const client = await connect(s.mcp.url, token)
    const error = await client
      .callTool({ name: "delete_note", arguments: { id: "1" } })
      .catch((e: unknown) => e as InsufficientScopeError)
    expect(error).toBeInstanceOf(InsufficientScopeError)
    expect((error as InsufficientScopeError).requiredScope).toBe("notes:read notes:write")
    expect((error as InsufficientScopeError).resourceMetadataUrl?.href).toBe(metadataUrl(s.mcp.url))
    expect(s.mcpLog).toContain("POST /mcp 403 (insufficient_scope)")
  })

  it("writes, reads and deletes notes with notes:write, each user seeing only their own", async () => {
    const s = await stack()
    const alice = await connect(s.mcp.url, await obtainToken(s.as.issuer, s.mcp.url, "notes:read notes:write"))
    expect(text(await alice.callTool({ name: "write_note", arguments: { title: "Groceries", text: "eggs" } }))).toBe(
      "Saved note #1.",
    )
    expect(text(await alice.callTool({ name: "list_notes", arguments: {} }))).toBe("#1 Groceries")
    expect(text(await alice.callTool({ name: "read_note", arguments: { id: "1" } }))).toBe("#1 Groceries\neggs")
    await alice.callTool({ name: "write_note", arguments: { id: "1", title: "Groceries", text: "eggs, milk" } })
    expect(text(await alice.callTool({ name: "read_note", arguments: { id: "1" } }))).toBe("#1 Groceries\neggs, milk")

    const bob = await connect(s.mcp.url, await obtainToken(s.as.issuer, s.mcp.url, "notes:read", OTHER_USER))
    expect(text(await bob.callTool({ name: "list_notes", arguments: {} }))).toBe("No notes yet.")
    expect(text(await bob.callTool({ name: "read_note", arguments: { id: "1" } }))).toBe("No note #1.")

    expect(text(await alice.callTool({ name: "delete_note", arguments: { id: "1" } }))).toBe("Deleted note #1.")
    expect(text(await alice.callTool({ name: "list_notes", arguments: {} }))).toBe("No notes yet.")
    const again = await alice.callTool({ name: "delete_note", arguments: { id: "1" } })
    expect(again.isError).toBe(true)
    expect(text(again)).toBe("No note #1.")
    expect(s.mcpLog).toContain('note #1 written by "alice"')
    expect(s.mcpLog).toContain('note #1 deleted by "alice"')
  })

  it("refuses a token issued for another resource with 401 invalid_token", async () => {
    const s = await stack()
    const token = await obtainToken(s.as.issuer, s.other, "notes:read notes:write")
    const response = await rpc(s.mcp.url, token, "initialize", initialize)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${metadataUrl(s.mcp.url)}", scope="notes:read", error="invalid_token", ` +
        'error_description="The access token was not issued for this resource"',
    )
  })

  it("refuses a token for this resource from another authorization server with 401 invalid_token", async () => {
    const s = await stack()
    const dataDir = await mkdtemp(join(tmpdir(), "keyway-mcp-server-test-"))
    const rogue = await startAuthorizationServer(
      {
        port: 0,
        dataDir,
        users: [USER],
        resources: [{ uri: s.mcp.url, scopes: NOTE_SCOPES }],
      },
      { log: () => undefined },
    )
    cleanups.push(async () => {
      await rogue.close()
      await rm(dataDir, { recursive: true, force: true })
    })
    const token = await obtainToken(rogue.issuer, s.mcp.url, "notes:read")
    const response = await rpc(s.mcp.url, token, "initialize", initialize)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${metadataUrl(s.mcp.url)}", scope="notes:read", error="invalid_token", ` +
        'error_description="The access token was issued by an untrusted issuer"',
    )
  })

  it("refuses a garbage token with 401 invalid_token", async () => {
    const s = await stack()
    const response = await rpc(s.mcp.url, "not-a-jwt", "initialize", initialize)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${metadataUrl(s.mcp.url)}", scope="notes:read", error="invalid_token", ` +
        'error_description="The access token is malformed"',
    )
  })
})

describe("the start-up log", () => {
  const AS = "http://127.0.0.1:9"
  const startLogged = async (options: { readonly port?: number; readonly publicUrl?: string }) => {
    const log: Array<string> = []
    const server = await startMcpServer({ authorizationServer: AS, port: 0, ...options, log: (line) => log.push(line) })
    cleanups.push(server.close)
    return { server, log }
  }

  it("names the address it listens on and its public URL", async () => {
    const { server, log } = await startLogged({})
    expect(log).toEqual([
      `listening on http://127.0.0.1:${server.port}, public URL http://127.0.0.1:${server.port}/mcp, authorization server ${AS}`,
    ])
  })

  it("warns when a loopback public URL names another port than the one it listens on", async () => {
    for (const publicUrl of ["http://localhost:1/mcp", "http://[::1]:1/mcp", "http://127.0.0.1:1/mcp"]) {
      const { server, log } = await startLogged({ publicUrl })
      expect(log).toEqual([
        `listening on http://127.0.0.1:${server.port}, public URL ${publicUrl}, authorization server ${AS}`,
        `warning: the public URL ${publicUrl} names port 1 of this machine, but the server listens on port ` +
          `${server.port}: clients that use it reach another server or none (unless a proxy on port 1 forwards to ` +
          "this one), and the resource in the protected resource metadata is not the URL they used",
      ])
    }
    // Without a port, the URL names its scheme's default.
    const { server, log } = await startLogged({ publicUrl: "http://localhost/mcp" })
    expect(log[1]).toBe(
      `warning: the public URL http://localhost/mcp names port 80 of this machine, but the server listens on port ` +
        `${server.port}: clients that use it reach another server or none (unless a proxy on port 80 forwards to ` +
        "this one), and the resource in the protected resource metadata is not the URL they used",
    )
  })

  it("does not warn for a loopback public URL on its own port, nor for a public URL on another host", async () => {
    const port = await freePort()
    for (const publicUrl of [`http://localhost:${port}/mcp`, "https://mcp.example.com/mcp"]) {
      const { log } = await startLogged({ port, publicUrl })
      expect(log).toEqual([
        `listening on http://127.0.0.1:${port}, public URL ${publicUrl}, authorization server ${AS}`,
      ])
      await cleanups.pop()?.()
    }
  })
})
