/**
 * A server process killed with SIGKILL in the middle of a load of refresh-token rotations, restarted on the same
 * SQLite file: every token request commits whole or not at all, and a retry within the reuse interval gets the same
 * successor, so no family is lost and none has two live tokens.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Pkce } from "@keyway/core"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { GrantStore, layerSqlite } from "../src/storage/Storage.js"
import { type Instance, startInstance } from "./support/fork.js"
import { MCP } from "./support/server.js"

const ISSUER = "https://as.example.com"
const REDIRECT = "https://app.example.com/callback"
const FAMILIES = 24

const dir = mkdtempSync(join(tmpdir(), "keyway-crash-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const token = (instance: Instance, body: Record<string, string>) =>
  fetch(instance.at(`${ISSUER}/token`), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ client_id: "public-app", ...body }).toString(),
  })

/** What the client holds for one family: the last refresh token it received, and the one before. */
interface Held {
  current: string
  previous: string | undefined
}

describe("a server killed during refresh rotations (SQLite file)", () => {
  it("keeps every family: the last token the client received, or its predecessor, works; one live token each", async () => {
    const path = join(dir, "as.sqlite")
    const options = {
      issuer: ISSUER,
      resources: [{ uri: MCP, name: "Example MCP", scopes: { "tools:read": "List the tools" } }],
      clients: [{ clientId: "public-app", clientName: "Public App", redirectUris: [REDIRECT] }],
      storage: { type: "sqlite", path },
    }
    // Codes written to the file beforehand, as the authorization endpoint would (the login pages are not the subject).
    const pkce = await Pkce.generate()
    const codes = Array.from({ length: FAMILIES }, () => crypto.randomUUID())
    const now = Math.floor(Date.now() / 1000)
    await Effect.runPromise(
      Effect.provide(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          for (const code of codes) {
            yield* grants.createCode({
              code,
              client_id: "public-app",
              redirect_uri: REDIRECT,
              redirect_uri_sent: true,
              code_challenge: pkce.challenge,
              code_challenge_method: "S256",
              resource: MCP,
              scope: "tools:read",
              subject: "alice",
              auth_time: now,
              issued_at: now,
              expires_at: now + 60,
            })
          }
        }),
        layerSqlite({ path }),
      ),
    )

    const first = await startInstance(options, ISSUER)
    const held: Array<Held> = []
    for (const code of codes) {
      const response = await token(first, {
        grant_type: "authorization_code",
        code,
        code_verifier: pkce.verifier,
        redirect_uri: REDIRECT,
      })
      expect(response.status).toBe(200)
      held.push({ current: ((await response.json()) as { refresh_token: string }).refresh_token, previous: undefined })
    }

    // Every family rotates in a loop, as a client would, on a flaky network: one answer in three is lost on its way
    // back (the server committed and answered; the client never saw it) and the client retries with the token it
    // holds. Then the process is killed while requests are in flight.
    let killed = false
    let rotations = 0
    let dropped = 0
    const loops = held.map(async (family, index) => {
      for (let attempt = index; !killed; attempt++) {
        try {
          const response = await token(first, { grant_type: "refresh_token", refresh_token: family.current })
          if (response.status !== 200) throw new Error(`refresh answered ${response.status}: ${await response.text()}`)
          const { refresh_token } = (await response.json()) as { refresh_token: string }
          if (attempt % 3 === 0) {
            dropped++
            continue
          }
          family.previous = family.current
          family.current = refresh_token
          rotations++
        } catch (error) {
          // A connection cut by the kill is the client's lost answer; anything else is a failure of the test.
          if (!killed) throw error
        }
      }
    })
    while (rotations < FAMILIES * 8) await new Promise((resolve) => setImmediate(resolve))
    killed = true
    await first.kill()
    await Promise.all(loops)
    expect(dropped).toBeGreaterThan(0)

    const second = await startInstance(options, ISSUER)
    try {
      // No family has two live tokens, and none was revoked.
      const db = new DatabaseSync(path, { readOnly: true })
      try {
        const live = db
          .prepare(
            `SELECT f.family_id AS family, f.revoked_at AS revoked,
               (SELECT COUNT(*) FROM refresh_tokens r WHERE r.family_id = f.family_id AND r.rotated_at IS NULL) AS live
             FROM refresh_families f`,
          )
          .all()
        expect(live).toHaveLength(FAMILIES)
        for (const family of live) expect(family).toEqual({ family: family.family, revoked: null, live: 1 })
      } finally {
        db.close()
      }
      // The client retries with the last token it received; where that answer was lost, with its predecessor.
      let retriedWithPredecessor = 0
      for (const family of held) {
        let response = await token(second, { grant_type: "refresh_token", refresh_token: family.current })
        if (response.status !== 200 && family.previous !== undefined) {
          retriedWithPredecessor++
          response = await token(second, { grant_type: "refresh_token", refresh_token: family.previous })
        }
        expect(response.status).toBe(200)
        const { refresh_token } = (await response.json()) as { refresh_token: string }
        // The successor works too: the family goes on.
        expect((await token(second, { grant_type: "refresh_token", refresh_token })).status).toBe(200)
      }
      expect(retriedWithPredecessor).toBe(0)
    } finally {
      await second.stop()
    }
  }, 60_000)
})
