import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Effect, Layer } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { ClientStore, GrantStore, KeyStore, layerSqlite, type Stores } from "../src/storage/Storage.js"
import { newClient, newCode, signingKey } from "./storage/contract.js"
import { eventually } from "./support/eventually.js"
import { startServer, type TestServer } from "./support/server.js"

const seconds = () => Math.floor(Date.now() / 1000)

/** Runs a program on its own connection to the file, as another process sharing the database would. */
const onFile = <A, E>(path: string, program: Effect.Effect<A, E, Stores>) =>
  Effect.runPromise(
    Effect.scoped(Effect.flatMap(Layer.build(layerSqlite({ path })), (c) => Effect.provide(program, c))),
  )

/** Rows per table, read straight from the file. */
const rows = (path: string) => {
  const db = new DatabaseSync(path, { readOnly: true })
  try {
    const count = (sql: string) => Number((db.prepare(sql).get() as { n: number }).n)
    return {
      codes: count("SELECT count(*) AS n FROM authorization_codes"),
      grants: count("SELECT count(*) AS n FROM grants"),
      revokedAccessTokens: count("SELECT count(*) AS n FROM revoked_access_tokens"),
      assertionJtis: count("SELECT count(*) AS n FROM assertion_jtis"),
      cachedClients: count("SELECT count(*) AS n FROM clients WHERE origin = 'metadata-document'"),
      keys: count("SELECT count(*) AS n FROM signing_keys"),
    }
  } finally {
    db.close()
  }
}

/** One expired record of every kind the purge handles, written before the server sees them. */
const seedExpired = (path: string) =>
  onFile(
    path,
    Effect.gen(function* () {
      const past = seconds() - 60
      yield* (yield* GrantStore).createCode(newCode({ issued_at: past - 60, expires_at: past }))
      yield* (yield* GrantStore).revokeAccessToken("expired-jti", past)
      yield* (yield* GrantStore).rememberJti("public-app", "assertion-jti", past)
      yield* (yield* ClientStore).upsert(
        newClient({ client_id: "https://client.example.com/cimd", origin: "metadata-document", expires_at: past }),
      )
      yield* (yield* KeyStore).add(signingKey("retired-key", { status: "retired", retires_at: past }))
    }),
  )

const expired = { codes: 1, grants: 1, revokedAccessTokens: 1, assertionJtis: 1, cachedClients: 1, keys: 1 }

describe("maintenance: the purge runs while the server runs", () => {
  const started: Array<TestServer> = []
  const dirs: Array<string> = []
  afterEach(async () => {
    for (const s of started.splice(0)) await s.close()
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
  })
  const dbPath = () => {
    const dir = mkdtempSync(join(tmpdir(), "keyway-maintenance-"))
    dirs.push(dir)
    return join(dir, "as.db")
  }

  it("deletes expired codes, grants, revoked token ids, assertion ids, cached clients and retired keys", async () => {
    const path = dbPath()
    await seedExpired(path)
    expect(rows(path)).toEqual(expired)
    const server = await startServer({ storage: { type: "sqlite", path }, maintenance: { purgeEvery: 0.05 } })
    started.push(server)
    await fetch(`${server.issuer}/jwks`)
    // What the server itself wrote (its signing key) stays.
    await eventually(() => rows(path).codes === 0 && rows(path).keys === 1, "purged")
    expect(rows(path)).toEqual({
      codes: 0,
      grants: 0,
      revokedAccessTokens: 0,
      assertionJtis: 0,
      cachedClients: 0,
      keys: 1,
    })
    // And again later, for records that expire while the server runs.
    await seedExpired(path)
    await eventually(() => rows(path).codes === 0 && rows(path).keys === 1, "purged again")
    expect(rows(path)).toMatchObject({ grants: 0, revokedAccessTokens: 0, assertionJtis: 0, cachedClients: 0 })
  })

  it("does not purge with purgeEvery: false, while the key job keeps running", async () => {
    const path = dbPath()
    await seedExpired(path)
    const server = await startServer({
      storage: { type: "sqlite", path },
      maintenance: { purgeEvery: false },
      signingKeys: { checkEvery: 0.02 },
    })
    started.push(server)
    await fetch(`${server.issuer}/jwks`)
    // Two duplicate waiting keys, twice: each pair is resolved by a later round of the key job.
    for (const round of [1, 2]) {
      const later = seconds() + 600
      await onFile(
        path,
        Effect.gen(function* () {
          const keys = yield* KeyStore
          yield* keys.add(signingKey(`a-${round}`, { created_at: seconds(), activates_at: later }))
          yield* keys.add(signingKey(`b-${round}`, { created_at: seconds(), activates_at: later }))
        }),
      )
      await eventually(
        () =>
          onFile(
            path,
            Effect.map(
              Effect.flatMap(KeyStore, (k) => k.get(`b-${round}`)),
              (k) => k.status === "retired",
            ),
          ),
        `duplicate ${round} withdrawn`,
      )
    }
    expect(rows(path)).toMatchObject({ ...expired, keys: 1 + 1 + 4 })
  })
})
