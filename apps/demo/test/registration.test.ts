/**
 * The published test user (`UserAgent.testUser` with a file store, as its README example) against the demo's Keyway
 * authorization server: it registers once and reuses the registration across runs, and replaces one the server no
 * longer knows. Registrations are counted in the server's own database.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Administration, Storage } from "@keyway/authorization-server"
import { createAuthClient, UserAgent } from "@keyway/client/node"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Stack, startStack } from "../src/stack.js"

describe("the test user example registers once with Keyway's authorization server", () => {
  let stack: Stack
  let dir: string
  beforeAll(async () => {
    stack = await startStack()
    dir = await mkdtemp(join(tmpdir(), "keyway-demo-registration-"))
  })
  afterAll(async () => {
    await stack?.close()
    await rm(dir, { recursive: true, force: true })
  })

  /** Runs an effect on the server's database (SQLite, shared with the running server). */
  const onDatabase = <A, E>(effect: Effect.Effect<A, E, Storage.ClientStore | Storage.GrantStore>) =>
    Effect.runPromise(Effect.provide(effect, Storage.layerSqlite({ path: join(stack.dataDir, "keyway.db") })))

  /** The dynamically registered clients the server holds. */
  const registered = () =>
    onDatabase(
      Effect.gen(function* () {
        const clients = yield* Storage.ClientStore
        return (yield* clients.list({ origin: "dynamic" })).map((client) => client.client_id)
      }),
    )

  /** One run of the example: a new process would make a new client on the same token file. */
  const run = async (before?: (auth: ReturnType<typeof createAuthClient>) => Promise<void>) => {
    const user = stack.users[0] as { username: string; password: string }
    const auth = createAuthClient({
      clientName: "my-tests",
      userAgent: UserAgent.testUser(user),
      store: { file: join(dir, "auth.json") },
    })
    try {
      await before?.(auth)
      const response = await auth.fetch(stack.mcpUrl, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      })
      await response.text()
      return response.status
    } finally {
      await auth.dispose()
    }
  }

  it("registers on the first run and reuses the registration on the next, after a logout too", async () => {
    expect(await run()).toBe(200)
    const first = await registered()
    expect(first).toHaveLength(1)
    expect(await run()).toBe(200)
    expect(await run((auth) => auth.logout(stack.mcpUrl))).toBe(200)
    expect(await registered()).toEqual(first)
  })

  it("registers anew when the server removed the registration: at the authorization page, and at a refresh", async () => {
    expect(await run()).toBe(200)
    const [kept, ...others] = await registered()
    expect(others).toEqual([])
    // Logged out, and the operator removed the client: Keyway's authorization page refuses it (invalid_client).
    await onDatabase(Administration.removeClient(kept as string))
    expect(await run((auth) => auth.logout(stack.mcpUrl))).toBe(200)
    const replaced = await registered()
    expect(replaced).toHaveLength(1)
    expect(replaced).not.toEqual([kept])

    // Tokens held, and the client removed again: the refresh is refused (invalid_client).
    await onDatabase(Administration.removeClient(replaced[0] as string))
    const file = join(dir, "auth.json")
    const stored = JSON.parse(await readFile(file, "utf8")) as { entries: Record<string, { expires_at?: number }> }
    const key = `tokens:${stack.mcpUrl}`
    stored.entries[key] = { ...stored.entries[key], expires_at: 0 }
    await writeFile(file, JSON.stringify(stored))
    expect(await run()).toBe(200)
    const again = await registered()
    expect(again).toHaveLength(1)
    expect(again).not.toEqual(replaced)
  })
})
