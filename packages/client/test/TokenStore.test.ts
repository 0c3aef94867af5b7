import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { rpc } from "@keyway/testing/peers"
import { describe, expect, it, vi } from "vitest"
import { createAuthClient } from "../src/node/AuthClient.js"
import { type Backend, file, memory, webStorage } from "../src/node/TokenStore.js"
import { headless } from "../src/UserAgent.js"
import { memoryStorage } from "./support/storage.js"
import { track, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })

const tempDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), "keyway-store-"))
  track(() => rm(dir, { recursive: true, force: true }))
  return dir
}

describe("memory store", () => {
  it("stores, returns copies, and deletes", async () => {
    const store = memory()
    const value = { a: [1, 2] }
    await store.set("k", value)
    value.a.push(3)
    const read = (await store.get("k")) as { a: Array<number> }
    expect(read).toEqual({ a: [1, 2] })
    read.a.push(4)
    expect(await store.get("k")).toEqual({ a: [1, 2] })
    await store.delete("k")
    expect(await store.get("k")).toBeUndefined()
  })
})

describe("Web Storage store", () => {
  it("keeps tokens and registrations in the storage, pending authorizations in the pending storage, under a prefix", async () => {
    const local = memoryStorage()
    const session = memoryStorage()
    const store = webStorage({ storage: local, pendingStorage: session, prefix: "app1:" })
    await store.set("tokens:https://mcp.example.com/mcp", { access_token: "a" })
    await store.set("client:https://as.example.com", { client_id: "c" })
    await store.set("pending:xyz", { state: "xyz" })
    expect(local.keys()).toEqual(["app1:tokens:https://mcp.example.com/mcp", "app1:client:https://as.example.com"])
    expect(session.keys()).toEqual(["app1:pending:xyz"])
    expect(await store.get("tokens:https://mcp.example.com/mcp")).toEqual({ access_token: "a" })
    expect(await store.get("pending:xyz")).toEqual({ state: "xyz" })
    expect(await store.get("pending:other")).toBeUndefined()
    await store.delete("pending:xyz")
    expect(session.keys()).toEqual([])
    // Another prefix on the same origin sees nothing of it.
    expect(
      await webStorage({ storage: local, pendingStorage: session }).get("client:https://as.example.com"),
    ).toBeUndefined()
  })

  it("uses the global localStorage and sessionStorage by default, looked up on use", async () => {
    const local = memoryStorage()
    const session = memoryStorage()
    const store = webStorage()
    const globals = globalThis as { localStorage?: Storage; sessionStorage?: Storage }
    const saved = { local: globals.localStorage, session: globals.sessionStorage }
    Object.defineProperty(globalThis, "localStorage", { value: local, configurable: true, writable: true })
    Object.defineProperty(globalThis, "sessionStorage", { value: session, configurable: true, writable: true })
    try {
      await store.set("tokens:x", 1)
      await store.set("pending:y", 2)
    } finally {
      Object.defineProperty(globalThis, "localStorage", { value: saved.local, configurable: true, writable: true })
      Object.defineProperty(globalThis, "sessionStorage", { value: saved.session, configurable: true, writable: true })
    }
    expect(local.keys()).toEqual(["keyway:tokens:x"])
    expect(session.keys()).toEqual(["keyway:pending:y"])
  })
})

describe("file store", () => {
  it("writes one JSON file readable by its owner only, with no temporary files left behind", async () => {
    const dir = await tempDir()
    const path = join(dir, "nested", "auth.json")
    const store = file(path)
    await store.set("tokens:https://x", { access_token: "t" })
    expect((await stat(path)).mode & 0o777).toBe(0o600)
    expect((await stat(join(dir, "nested"))).mode & 0o777).toBe(0o700)
    expect(JSON.parse(await readFile(path, "utf8"))).toEqual({
      version: 1,
      entries: { "tokens:https://x": { access_token: "t" } },
    })
    expect(await readdir(join(dir, "nested"))).toEqual(["auth.json"])
  })

  it("serialises concurrent writes so none is lost", async () => {
    const dir = await tempDir()
    const path = join(dir, "auth.json")
    const store = file(path)
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.set(`k${i}`, i)))
    const reopened = file(path)
    for (let i = 0; i < 20; i++) expect(await reopened.get(`k${i}`)).toBe(i)
    await store.delete("k3")
    expect(await file(path).get("k3")).toBeUndefined()
  })

  it("makes the missing directory of a missing file (owner-only) when first read, before a write needs it", async () => {
    const dir = await tempDir()
    const path = join(dir, "nested", "auth.json")
    const store = file(path)
    expect(await store.get("k")).toBeUndefined()
    await vi.waitFor(async () => expect((await stat(join(dir, "nested"))).mode & 0o777).toBe(0o700))
    expect(await readdir(join(dir, "nested"))).toEqual([])
    await store.set("k", 1)
    expect(await file(path).get("k")).toBe(1)
    expect(await readdir(join(dir, "nested"))).toEqual(["auth.json"])
  })

  it("starts empty when the file does not exist", async () => {
    const dir = await tempDir()
    expect(await file(join(dir, "missing.json")).get("k")).toBeUndefined()
  })

  it("keeps tokens, expiry, scope and registration across a restart of the client", async () => {
    const dir = await tempDir()
    const store = { file: join(dir, "auth.json") }
    const { as, rs } = await world()
    const first = createAuthClient({ userAgent: headless(), store })
    expect((await first.fetch(rs.url, post(rpc("initialize")))).status).toBe(200)
    const saved = await first.tokens(rs.url)
    await first.dispose()

    const second = createAuthClient({ userAgent: headless(), store })
    track(second.dispose)
    expect(await second.tokens(rs.url)).toEqual(saved)
    expect(saved).toMatchObject({ scope: "tools:read offline_access", issuer: as.issuer, resource: rs.url })
    expect(saved?.expires_at).toBeGreaterThan(Date.now())
    expect((await second.fetch(rs.url, post(rpc("tools/list")))).status).toBe(200)
    expect(as.authorizations).toHaveLength(1)
    // After a logout the stored registration is reused for the new authorization.
    await second.logout(rs.url)
    await second.fetch(rs.url, post(rpc("tools/list")))
    expect(as.authorizations).toHaveLength(2)
    expect(as.registrations).toHaveLength(1)
  })
  it("a warm start with an expired access token costs two requests: the refresh, then the call", async () => {
    const dir = await tempDir()
    const path = join(dir, "auth.json")
    const { as, rs } = await world()
    const first = createAuthClient({ userAgent: headless(), store: { file: path } })
    expect((await first.fetch(rs.url, post(rpc("initialize")))).status).toBe(200)
    const saved = await first.tokens(rs.url)
    await first.dispose()
    expect(saved?.refresh_token).toEqual(expect.any(String))
    // The access token expires while no process runs (the refresh token stays valid).
    await file(path).set(`tokens:${rs.url}`, { ...saved, expires_at: Date.now() - 1000 })

    const sent: Array<string> = []
    const restarted = createAuthClient({
      userAgent: headless(),
      store: { file: path },
      fetch: (input, init) => {
        sent.push(`${init?.method ?? "GET"} ${input instanceof Request ? input.url : String(input)}`)
        return fetch(input, init)
      },
    })
    track(restarted.dispose)
    expect((await restarted.fetch(rs.url, post(rpc("tools/list")))).status).toBe(200)
    // No discovery, no registration: the token endpoint and the registration were kept with the tokens.
    expect(sent).toEqual([`POST ${as.issuer}/token`, `POST ${rs.url}`])
    expect(as.registrations).toHaveLength(1)
    // The rotated refresh token is on disk for the next process.
    const kept = (await file(path).get(`tokens:${rs.url}`)) as { refresh_token?: string; expires_at?: number }
    expect(kept.refresh_token).toEqual(expect.any(String))
    expect(kept.refresh_token).not.toBe(saved?.refresh_token)
    expect(kept.expires_at).toBeGreaterThan(Date.now())
  })
})

describe("custom store", () => {
  it("receives the tokens and the registration under their keys", async () => {
    const inner = memory()
    const keys: Array<string> = []
    const custom: Backend = {
      get: inner.get,
      set: async (key, value) => {
        keys.push(key)
        await inner.set(key, value)
      },
      delete: inner.delete,
    }
    const { as, rs } = await world()
    const client = createAuthClient({ userAgent: headless(), store: custom })
    track(client.dispose)
    await client.fetch(rs.url, post(rpc("initialize")))
    expect(keys.filter((k) => !k.startsWith("pending:"))).toEqual([`client:${as.issuer}`, `tokens:${rs.url}`])
    expect(await inner.get(`tokens:${rs.url}`)).toEqual(await client.tokens(rs.url))
  })
})
