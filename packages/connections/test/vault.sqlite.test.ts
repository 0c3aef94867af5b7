import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Context, Effect, Exit, Layer, Option, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { layerSqliteVault, sqliteVault } from "../src/node/sqlite.js"
import { Vault } from "../src/Vault.js"
import { sqlStore } from "../src/vault/sql.js"
import { ringA, tokens, user, vaultContract } from "./vaultContract.js"

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
const tempFile = () => {
  const dir = mkdtempSync(join(tmpdir(), "keyway-vault-"))
  dirs.push(dir)
  return join(dir, "vault.db")
}

vaultContract({
  name: "SQLite file",
  fresh: async () => {
    const path = tempFile()
    const handles: Array<{ close: () => Promise<void> }> = []
    // The contract's raw access goes through a connection of its own to the same file.
    const raw = new DatabaseSync(path)
    const first = await sqliteVault({ path, keyRing: ringA })
    handles.push(first)
    const store = sqlStore({
      rows: async (sql, params) =>
        raw.prepare(sql.replace(/\$(\d+)/g, "?$1")).all(...params) as ReadonlyArray<Record<string, unknown>>,
      count: async (sql, params) => Number(raw.prepare(sql.replace(/\$(\d+)/g, "?$1")).run(...params).changes),
    })
    return {
      store,
      open: async (keyRing, options) => {
        const handle = await sqliteVault({ path, keyRing, ...options })
        handles.push(handle)
        return handle
      },
      close: async () => {
        for (const handle of handles) await handle.close()
        raw.close()
      },
    }
  },
})

describe("SQLite vault at rest", () => {
  it("keeps no token, refresh token or code verifier in clear in the database or its WAL", async () => {
    const path = tempFile()
    const vault = await sqliteVault({ path, keyRing: ringA })
    await Effect.runPromise(vault.put(user, tokens("1", 1_800_003_600), 1_800_000_000))
    await Effect.runPromise(
      vault.putFlow("-reference-secret", {
        key: user,
        elicitationId: "e",
        state: "state-secret",
        codeVerifier: "verifier-secret",
        redirectUri: "http://127.0.0.1:1/cb",
        expiresAt: 1_800_000_600,
      }),
    )
    const files = readdirSync(join(path, "..")).filter((name) => name.startsWith("vault.db"))
    expect(files).toContain("vault.db-wal")
    const bytes = files.map((name) => readFileSync(join(path, "..", name)).toString("latin1")).join("")
    for (const secret of [
      "access-1-secret",
      "refresh-1-secret",
      "verifier-secret",
      "state-secret",
      "-reference-secret",
    ])
      expect(bytes).not.toContain(secret)
    // Readable again through the vault, from a connection opened after the writes.
    const again = await sqliteVault({ path, keyRing: ringA })
    expect(Option.getOrThrow(await Effect.runPromise(again.get(user))).tokens).toEqual(tokens("1", 1_800_003_600))
    const db = new DatabaseSync(path)
    expect(db.prepare("SELECT key_id, length(iv) AS iv FROM keyway_connections").all()).toEqual([
      { key_id: "-a", iv: 16 },
    ])
    expect((db.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode).toBe("wal")
    db.close()
    await again.close()
    await vault.close()
  })

  it("refuses to open what is not a database with a typed error", async () => {
    const path = tempFile()
    const error = await sqliteVault({ path: join(path, "missing-dir", "x.db"), keyRing: ringA }).catch((e) => e)
    expect([error._tag, error.reason, error.message]).toEqual([
      "VaultError",
      "storage",
      "vault storage failed (open): unable to open database file",
    ])
  })

  it("as a layer: serves the file while its scope is open, closes it with the scope, and fails typed when it cannot open", async () => {
    const path = tempFile()
    const scope = await Effect.runPromise(Scope.make())
    const context = await Effect.runPromise(Layer.buildWithScope(layerSqliteVault({ path, keyRing: ringA }), scope))
    const vault = Context.get(context, Vault)
    await Effect.runPromise(vault.put(user, tokens("layer"), 1_000))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    // Closed with its scope: the connection is gone (a closed node:sqlite database refuses statements).
    const afterClose = await Effect.runPromise(Effect.flip(vault.get(user)))
    expect([afterClose._tag, afterClose.reason, afterClose.message]).toEqual([
      "VaultError",
      "storage",
      "vault storage failed (get): database is not open",
    ])
    // What it wrote is in the file for the next opener.
    const again = await sqliteVault({ path, keyRing: ringA })
    const read = Option.getOrThrow(await Effect.runPromise(again.get(user)))
    expect(read.tokens.accessToken).toBe(tokens("layer").accessToken)
    await again.close()
    const error = await Effect.runPromise(
      Effect.flip(
        Layer.build(layerSqliteVault({ path: join(path, "missing-dir", "x.db"), keyRing: ringA })).pipe(Effect.scoped),
      ),
    )
    expect([error._tag, error.reason, error.message]).toEqual([
      "VaultError",
      "storage",
      "vault storage failed (open): unable to open database file",
    ])
  })
})
