import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Worker } from "node:worker_threads"
import { Context, Effect, Fiber, Layer, Option, Result, type Scope } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { RateLimiter } from "../../src/RateLimiter.js"
import {
  ClientStore,
  CodeAlreadyUsed,
  GrantStore,
  KeyStore,
  layerSqlite,
  RecordStore,
  RefreshTokenReused,
  RefreshTokenRevoked,
  StorageError,
} from "../../src/storage/index.js"
import { GroupCommit, groupDriver, MIGRATIONS, open } from "../../src/storage/internal/sqlite.js"
import { makeGrantStore } from "../../src/storage/internal/store.js"
import { NOW, newClient, newCode, runWith, secret, signingKey, storageContract } from "./contract.js"
import { rateLimitContract } from "./rateLimitContract.js"
import { recordContract } from "./recordContract.js"

const dir = mkdtempSync(join(tmpdir(), "keyway-storage-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

let files = 0
const freshPath = () => join(dir, `store-${++files}.sqlite`)

storageContract("sqlite", () => layerSqlite({ path: freshPath() }))
rateLimitContract("sqlite", () => layerSqlite({ path: freshPath() }))
storageContract("sqlite, one commit per change", () => layerSqlite({ path: freshPath(), groupCommit: false }))
rateLimitContract("sqlite, one commit per change", () => layerSqlite({ path: freshPath(), groupCommit: false }))
recordContract("sqlite", () => layerSqlite({ path: freshPath() }))
recordContract("sqlite, one commit per change", () => layerSqlite({ path: freshPath(), groupCommit: false }))

/** The three stores of one connection, kept open for the rest of the scope. */
const connect = (path: string) =>
  Effect.map(Layer.build(layerSqlite({ path })), (context) => ({
    clients: Context.get(context, ClientStore),
    grants: Context.get(context, GrantStore),
    keys: Context.get(context, KeyStore),
  }))

const run = <A, E>(program: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(Effect.scoped(program))

describe("sqlite: file, migrations, connections", () => {
  it("persists across close and reopen, and reopening applies no migration again", async () => {
    const path = freshPath()
    const code = newCode()
    const clientSecret = secret()
    const { grantId } = await runWith(() => layerSqlite({ path }))(
      Effect.gen(function* () {
        yield* (yield* ClientStore).create(newClient({ client_id: "persisted", client_secret: clientSecret }))
        yield* (yield* KeyStore).add(signingKey("k1"))
        const created = yield* (yield* GrantStore).createCode(code)
        return { grantId: created.grant_id }
      }),
    )
    const migrationsBefore = readMigrations(path)
    expect(migrationsBefore).toEqual(
      MIGRATIONS.map(({ version, name }) => ({ version, name, applied_at: migrationsBefore[0]?.applied_at })),
    )

    await runWith(() => layerSqlite({ path }))(
      Effect.gen(function* () {
        expect(yield* (yield* ClientStore).verifySecret("persisted", clientSecret, NOW)).toBe(true)
        expect((yield* (yield* KeyStore).current(NOW)).kid).toBe("k1")
        expect((yield* (yield* GrantStore).consumeCode(code.code, NOW + 1)).grant_id).toBe(grantId)
      }),
    )
    await runWith(() => layerSqlite({ path }))(
      Effect.gen(function* () {
        const replay = yield* Effect.flip((yield* GrantStore).consumeCode(code.code, NOW + 2))
        expect(replay).toEqual(new CodeAlreadyUsed({ grant_id: grantId }))
      }),
    )
    expect(readMigrations(path)).toEqual(migrationsBefore)
  })

  it("uses WAL and closes the connection when the layer's scope closes", async () => {
    const path = freshPath()
    await run(
      Effect.gen(function* () {
        const { clients } = yield* connect(path)
        yield* clients.create(newClient({ client_id: "c" }))
        // While open, the write-ahead log exists next to the file.
        expect(existsSync(`${path}-wal`)).toBe(true)
      }),
    )
    // The last connection to close checkpoints and removes the log.
    expect(existsSync(`${path}-wal`)).toBe(false)
    const db = new DatabaseSync(path)
    try {
      expect(db.prepare("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" })
    } finally {
      db.close()
    }
  })

  it("opens a private in-memory database for :memory:", async () => {
    const run = runWith(() => layerSqlite({ path: ":memory:" }))
    await run(
      Effect.gen(function* () {
        const clients = yield* ClientStore
        yield* clients.create(newClient({ client_id: "mem" }))
        expect((yield* clients.list()).map((c) => c.client_id)).toEqual(["mem"])
      }),
    )
    await run(
      Effect.gen(function* () {
        expect(yield* (yield* ClientStore).list()).toEqual([])
      }),
    )
  })

  it("never writes a raw code, refresh token, client secret or registration token to disk", async () => {
    const path = freshPath()
    const code = newCode()
    const refreshToken = secret()
    const rotated = secret()
    const clientSecret = secret()
    const registrationToken = secret()
    await runWith(() => layerSqlite({ path }))(
      Effect.gen(function* () {
        const grants = yield* GrantStore
        yield* (yield* ClientStore).create(
          newClient({ client_id: "c", client_secret: clientSecret, registration_access_token: registrationToken }),
        )
        const created = yield* grants.createCode(code)
        yield* grants.consumeCode(code.code, NOW + 1)
        yield* grants.createRefresh({ grant_id: created.grant_id, token: refreshToken, scope: "", issued_at: NOW })
        yield* grants.rotate({
          token: refreshToken,
          new_token: rotated,
          client_id: code.client_id,
          scope: "",
          now: NOW,
        })
      }),
    )
    const bytes = readFileSync(path).toString("latin1")
    expect(bytes).toContain("https://mcp.example.com/mcp")
    for (const raw of [code.code, refreshToken, rotated, clientSecret, registrationToken]) {
      expect(bytes).not.toContain(raw)
    }
  })

  it("never writes an extension record's raw key to disk, only its value", async () => {
    const path = freshPath()
    const key = secret()
    await Effect.runPromise(
      Effect.provide(
        RecordStore.use((records) => records.put("example/records", key, { marker: "kept-in-clear" }, NOW + 60, NOW)),
        layerSqlite({ path }),
      ),
    )
    const bytes = readFileSync(path).toString("latin1")
    expect(bytes).toContain("kept-in-clear")
    expect(bytes).not.toContain(key)
  })

  it("refuses a database written by a newer schema version", async () => {
    const path = freshPath()
    await runWith(() => layerSqlite({ path }))(Effect.void)
    const db = new DatabaseSync(path)
    db.prepare("INSERT INTO keyway_migrations (version, name, applied_at) VALUES (99, 'future', 0)").run()
    db.close()
    const error = await Effect.runPromise(Effect.flip(Effect.provide(Effect.void, layerSqlite({ path }))))
    expect(error).toEqual(
      new StorageError({
        operation: "open",
        message: "database schema version 99 is newer than this Keyway (knows up to 1)",
      }),
    )
  })

  it("answers StorageError when the file cannot be opened", async () => {
    const error = await Effect.runPromise(
      Effect.flip(Effect.provide(Effect.void, layerSqlite({ path: join(dir, "missing-dir", "x.sqlite") }))),
    )
    expect(error).toEqual(new StorageError({ operation: "open", message: "unable to open database file" }))
  })

  it("answers StorageError, with the operation, when the backend rejects a write", async () => {
    const error = await runWith(() => layerSqlite({ path: freshPath() }))(
      Effect.gen(function* () {
        const grants = yield* GrantStore
        const { grant_id } = yield* grants.createCode(newCode())
        yield* grants.recordAccessToken({ grant_id, jti: "same", expires_at: NOW + 60 })
        return yield* Effect.flip(grants.recordAccessToken({ grant_id, jti: "same", expires_at: NOW + 60 }))
      }),
    )
    expect(error).toEqual(
      new StorageError({
        operation: "GrantStore.recordAccessToken",
        message: "UNIQUE constraint failed: access_tokens.jti",
      }),
    )
  })

  it("redeems a code once and rotates a token once across two connections to one file", async () => {
    const path = freshPath()
    await run(
      Effect.gen(function* () {
        const a = yield* connect(path)
        const b = yield* connect(path)
        const code = newCode()
        const created = yield* a.grants.createCode(code)
        const redemptions = yield* Effect.all(
          Array.from({ length: 50 }, (_, i) => Effect.result((i % 2 === 0 ? a : b).grants.consumeCode(code.code, NOW))),
          { concurrency: "unbounded" },
        )
        expect(redemptions.filter(Result.isSuccess)).toHaveLength(1)
        expect(redemptions.filter(Result.isFailure).map((r) => r.failure)).toEqual(
          Array.from({ length: 49 }, () => new CodeAlreadyUsed({ grant_id: created.grant_id })),
        )

        const fresh = newCode()
        const grant = yield* b.grants.createCode(fresh)
        yield* a.grants.consumeCode(fresh.code, NOW)
        const token = secret()
        const refresh = yield* a.grants.createRefresh({ grant_id: grant.grant_id, token, scope: "", issued_at: NOW })
        const rotations = yield* Effect.all(
          Array.from({ length: 50 }, (_, i) =>
            Effect.result(
              (i % 2 === 0 ? a : b).grants.rotate({
                token,
                new_token: secret(),
                client_id: fresh.client_id,
                scope: "",
                now: NOW,
              }),
            ),
          ),
          { concurrency: "unbounded" },
        )
        expect(rotations.filter(Result.isSuccess)).toHaveLength(1)
        expect(rotations.filter(Result.isFailure).map((r) => r.failure)).toEqual(
          Array.from(
            { length: 49 },
            () => new RefreshTokenReused({ family_id: refresh.family_id, grant_id: grant.grant_id }),
          ),
        )
        expect((yield* b.grants.getGrant(grant.grant_id)).revoked_at).toBe(NOW)
      }),
    )
  })

  describe("across worker threads, each with its own connection, released at once", () => {
    const WORKERS = 6

    type Outcome = { readonly tag: string; readonly newToken?: string }

    const race = async (path: string, op: Record<string, unknown>): Promise<ReadonlyArray<Outcome>> => {
      const gate = new SharedArrayBuffer(4)
      const workers = Array.from(
        { length: WORKERS },
        (_, index) => new Worker(new URL("./worker.mjs", import.meta.url), { workerData: { path, op, gate, index } }),
      )
      try {
        const outcomes = workers.map(
          (worker) =>
            new Promise<Outcome>((resolve, reject) => {
              worker.on("message", (message: { ready?: boolean } & Outcome) => {
                if (message.ready !== true) resolve(message)
              })
              worker.once("error", reject)
              worker.once("exit", (code) => reject(new Error(`worker exited with ${code} before answering`)))
            }),
        )
        const ready = workers.map(
          (worker) =>
            new Promise<void>((resolve) => {
              worker.on("message", (message: { ready?: boolean }) => {
                if (message.ready === true) resolve()
              })
            }),
        )
        await Promise.race([Promise.all(ready), Promise.all(outcomes)])
        const go = new Int32Array(gate)
        Atomics.store(go, 0, 1)
        Atomics.notify(go, 0)
        return await Promise.all(outcomes)
      } finally {
        await Promise.all(workers.map((worker) => worker.terminate()))
      }
    }

    it("redeems one code exactly once", async () => {
      const path = freshPath()
      const code = newCode()
      const grantId = await runWith(() => layerSqlite({ path }))(
        Effect.gen(function* () {
          return (yield* (yield* GrantStore).createCode(code)).grant_id
        }),
      )
      const outcomes = await race(path, { kind: "consume", code: code.code, now: NOW + 1 })
      expect(outcomes.map((o) => o.tag).sort()).toEqual([
        ...Array.from({ length: WORKERS - 1 }, () => "CodeAlreadyUsed"),
        "Success",
      ])
      await runWith(() => layerSqlite({ path }))(
        Effect.gen(function* () {
          expect((yield* (yield* GrantStore).getGrant(grantId)).revoked_at).toBe(NOW + 1)
        }),
      )
    })

    it("rotates one refresh token exactly once and revokes the family", async () => {
      const path = freshPath()
      const code = newCode()
      const token = secret()
      const { family_id, grant_id } = await runWith(() => layerSqlite({ path }))(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const created = yield* grants.createCode(code)
          yield* grants.consumeCode(code.code, NOW)
          return yield* grants.createRefresh({ grant_id: created.grant_id, token, scope: "", issued_at: NOW })
        }),
      )
      const outcomes = await race(path, {
        kind: "rotate",
        token,
        clientId: code.client_id,
        scope: "",
        now: NOW + 1,
      })
      expect(outcomes.map((o) => o.tag).sort()).toEqual([
        ...Array.from({ length: WORKERS - 1 }, () => "RefreshTokenReused"),
        "Success",
      ])
      const winner = outcomes.find((o) => o.tag === "Success")?.newToken ?? ""
      await runWith(() => layerSqlite({ path }))(
        Effect.gen(function* () {
          const error = yield* Effect.flip((yield* GrantStore).getRefresh(winner, NOW + 2))
          expect(error).toEqual(new RefreshTokenRevoked({ family_id, grant_id }))
        }),
      )
    })
  })
})

const readMigrations = (path: string) => {
  const db = new DatabaseSync(path, { readOnly: true })
  try {
    return db.prepare("SELECT version, name, applied_at FROM keyway_migrations ORDER BY version").all()
  } finally {
    db.close()
  }
}

describe("sqlite: group commit", () => {
  /** A connection of its own to `path`, as another process would have: it sees committed data only. */
  const observer = (path: string) => {
    const db = new DatabaseSync(path, { readOnly: true })
    const grants = db.prepare("SELECT COUNT(*) AS n FROM grants WHERE grant_id = ?")
    const tokens = db.prepare("SELECT COUNT(*) AS n FROM access_tokens WHERE jti = ?")
    return {
      hasGrant: (grantId: string) => grants.get(grantId)?.n === 1,
      hasToken: (jti: string) => tokens.get(jti)?.n === 1,
      grantCount: () => Number(db.prepare("SELECT COUNT(*) AS n FROM grants").get()?.n),
      close: () => db.close(),
    }
  }

  it("answers each change only once it is committed, and commits the changes of one turn together", async () => {
    const path = freshPath()
    await run(
      Effect.gen(function* () {
        const { grants } = yield* connect(path)
        const seen = observer(path)
        yield* Effect.addFinalizer(() => Effect.sync(seen.close))
        const committedAtAnswer: Array<[boolean, number]> = []
        yield* Effect.all(
          Array.from({ length: 20 }, (_, i) =>
            grants
              // Twenty users: twenty grants.
              .createCode(newCode({ subject: `user-${i}` }))
              .pipe(
                Effect.tap((code) =>
                  Effect.sync(() => committedAtAnswer.push([seen.hasGrant(code.grant_id), seen.grantCount()])),
                ),
              ),
          ),
          { concurrency: "unbounded" },
        )
        // Every answer came after its change was visible to another connection, and already the first answer came
        // after all twenty: they were started in one turn of the event loop and share one commit.
        expect(committedAtAnswer).toEqual(Array.from({ length: 20 }, () => [true, 20]))
      }),
    )
  })

  it("commits one change at a time, each before its answer, with groupCommit: false", async () => {
    const path = freshPath()
    await run(
      Effect.gen(function* () {
        const context = yield* Layer.build(layerSqlite({ path, groupCommit: false }))
        const grants = Context.get(context, GrantStore)
        const seen = observer(path)
        yield* Effect.addFinalizer(() => Effect.sync(seen.close))
        const committedAtAnswer: Array<boolean> = []
        const counts: Array<number> = []
        yield* Effect.all(
          Array.from({ length: 5 }, () =>
            grants.createCode(newCode()).pipe(
              Effect.tap((code) =>
                Effect.sync(() => {
                  committedAtAnswer.push(seen.hasGrant(code.grant_id))
                  counts.push(seen.grantCount())
                }),
              ),
            ),
          ),
          { concurrency: "unbounded" },
        )
        expect(committedAtAnswer).toEqual([true, true, true, true, true])
        expect(counts[0]).toBe(1)
      }),
    )
  })

  it("rolls back only the change that fails; the others of its group commit", async () => {
    const path = freshPath()
    await run(
      Effect.gen(function* () {
        const { grants } = yield* connect(path)
        const seen = observer(path)
        yield* Effect.addFinalizer(() => Effect.sync(seen.close))
        const { grant_id } = yield* grants.createCode(newCode())
        const record = (jti: string) => Effect.result(grants.recordAccessToken({ grant_id, jti, expires_at: NOW + 60 }))
        const [first, duplicate, other, code] = yield* Effect.all(
          [record("jti-1"), record("jti-1"), record("jti-2"), Effect.result(grants.createCode(newCode()))],
          { concurrency: "unbounded" },
        )
        expect(first).toEqual(Result.succeed(undefined))
        expect(duplicate).toEqual(
          Result.fail(
            new StorageError({
              operation: "GrantStore.recordAccessToken",
              message: "UNIQUE constraint failed: access_tokens.jti",
            }),
          ),
        )
        expect(other).toEqual(Result.succeed(undefined))
        expect(Result.isSuccess(code) && seen.hasGrant(code.success.grant_id)).toBe(true)
        expect([seen.hasToken("jti-1"), seen.hasToken("jti-2")]).toEqual([true, true])
      }),
    )
  })

  it("counts the rate limiter's hits in the store's group, visible to the next request at once", async () => {
    const path = freshPath()
    await run(
      Effect.gen(function* () {
        const context = yield* Layer.build(layerSqlite({ path }))
        const limiter = Context.get(context, RateLimiter)
        const rule = { max: 2, window: 60 }
        const decisions = yield* Effect.all(
          Array.from({ length: 3 }, () => limiter.hit("bucket", rule, NOW)),
          { concurrency: "unbounded" },
        )
        expect(decisions).toEqual([{ allowed: true }, { allowed: true }, { allowed: false, retryAfter: 60 }])
        const grants = Context.get(context, GrantStore)
        yield* grants.createCode(newCode())
        const seen = new DatabaseSync(path, { readOnly: true })
        try {
          expect(seen.prepare("SELECT hits FROM rate_limits WHERE bucket = 'bucket'").get()).toEqual({ hits: 3 })
        } finally {
          seen.close()
        }
      }),
    )
  })

  describe("with the WAL flush in the test's hands", () => {
    /** A store over a group whose flushes wait until the test lets them end (or fail). */
    const controlled = () => {
      const path = freshPath()
      const db = open({ path }, NOW)
      const flushes: Array<{ end: () => void; fail: (error: Error) => void }> = []
      const group = new GroupCommit(
        db,
        () => new Promise<void>((resolve, reject) => flushes.push({ end: resolve, fail: reject })),
      )
      const grants = makeGrantStore(groupDriver(group))
      const close = () => db.close()
      return { grants, flushes, close }
    }
    const turns = (n: number) =>
      Effect.promise(async () => {
        for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
      })

    it("answers a change, and a read of it, only once the WAL flush after its commit has ended", async () => {
      const { grants, flushes, close } = controlled()
      try {
        await Effect.runPromise(
          Effect.gen(function* () {
            const code = newCode()
            const created = yield* Effect.forkChild(grants.createCode(code))
            yield* turns(3)
            // Committed (so a reader could see it), flushed not yet: no answer.
            expect(flushes).toHaveLength(1)
            expect(created.pollUnsafe()).toBeUndefined()
            const found = yield* Effect.forkChild(grants.findCode(code.code))
            yield* turns(3)
            expect(found.pollUnsafe()).toBeUndefined()
            flushes[0]!.end()
            expect((yield* Fiber.join(created)).client_id).toBe(code.client_id)
            expect(Option.isSome(yield* Fiber.join(found))).toBe(true)
            // Nothing under way: a read answers at once.
            expect(Option.isSome(yield* grants.findCode(code.code))).toBe(true)
          }),
        )
      } finally {
        close()
      }
    })

    it("flushes once for the groups committed while a flush was under way", async () => {
      const { grants, flushes, close } = controlled()
      try {
        await Effect.runPromise(
          Effect.gen(function* () {
            const first = yield* Effect.forkChild(grants.createCode(newCode()))
            yield* turns(3)
            const later = yield* Effect.forkChild(
              Effect.all([grants.createCode(newCode()), grants.createCode(newCode())], { concurrency: "unbounded" }),
            )
            yield* turns(3)
            const last = yield* Effect.forkChild(grants.createCode(newCode()))
            yield* turns(3)
            // Three groups committed, one flush under way: the two later groups wait for the next one.
            expect(flushes).toHaveLength(1)
            flushes[0]!.end()
            yield* Fiber.join(first)
            yield* turns(3)
            expect([later.pollUnsafe(), last.pollUnsafe()]).toEqual([undefined, undefined])
            expect(flushes).toHaveLength(2)
            flushes[1]!.end()
            expect(yield* Fiber.join(later)).toHaveLength(2)
            yield* Fiber.join(last)
            expect(flushes).toHaveLength(2)
          }),
        )
      } finally {
        close()
      }
    })

    it("fails every change of a group whose flush fails, with StorageError naming each operation", async () => {
      const { grants, flushes, close } = controlled()
      try {
        await Effect.runPromise(
          Effect.gen(function* () {
            const outcomes = yield* Effect.forkChild(
              Effect.all([Effect.flip(grants.createCode(newCode())), Effect.flip(grants.rememberJti("c", "j", NOW))], {
                concurrency: "unbounded",
              }),
            )
            yield* turns(3)
            expect(flushes).toHaveLength(1)
            flushes[0]!.fail(new Error("EIO: i/o error, fdatasync"))
            expect(yield* Fiber.join(outcomes)).toEqual([
              new StorageError({ operation: "GrantStore.createCode", message: "EIO: i/o error, fdatasync" }),
              new StorageError({ operation: "GrantStore.rememberJti", message: "EIO: i/o error, fdatasync" }),
            ])
            // What the failed flush covered may be lost whatever a later flush says: nothing is answered any more.
            expect(yield* Effect.flip(grants.revokeFamily("f", NOW))).toEqual(
              new StorageError({ operation: "GrantStore.revokeFamily", message: "EIO: i/o error, fdatasync" }),
            )
            expect(yield* Effect.flip(grants.findCode("any"))).toEqual(
              new StorageError({ operation: "GrantStore.findCode", message: "EIO: i/o error, fdatasync" }),
            )
            expect(flushes).toHaveLength(1)
          }),
        )
      } finally {
        close()
      }
    })
  })
})
