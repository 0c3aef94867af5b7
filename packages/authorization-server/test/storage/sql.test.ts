/**
 * The driver port: a unit of work commits whatever outcome it returns and rolls back when a statement or its own code
 * throws, answering `StorageError` with the operation; statements are written with PostgreSQL's numbered placeholders.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { GrantStore, layerMemory, StorageError } from "../../src/storage/index.js"
import { count, rows } from "../../src/storage/internal/sql.js"
import { driver, open } from "../../src/storage/internal/sqlite.js"
import { NOW, newCode } from "./contract.js"

const withDriver = <A>(f: (d: ReturnType<typeof driver>) => Promise<A>): Promise<A> => {
  const db = open({ path: ":memory:" }, NOW)
  return f(driver(db)).finally(() => db.close())
}

const insert = (jti: string) =>
  count("INSERT INTO revoked_access_tokens (jti, expires_at) VALUES ($1, $2)", [jti, NOW + 60])
const jtis = () => rows("SELECT jti FROM revoked_access_tokens ORDER BY jti")

describe("SQLite driver", () => {
  it("commits a transaction whatever value it returns", () =>
    withDriver(async (d) => {
      const returned = await Effect.runPromise(
        d.run("test.commit", "transaction", function* () {
          yield* insert("a")
          return "refused"
        }),
      )
      expect(returned).toBe("refused")
      expect(await Effect.runPromise(d.run("test.read", "autocommit", jtis))).toEqual([{ jti: "a" }])
    }))

  it("rolls back when a statement fails, naming the operation", () =>
    withDriver(async (d) => {
      const error = await Effect.runPromise(
        Effect.flip(
          d.run("test.duplicate", "transaction", function* () {
            yield* insert("a")
            yield* insert("a")
          }),
        ),
      )
      expect(error).toEqual(
        new StorageError({
          operation: "test.duplicate",
          message: "UNIQUE constraint failed: revoked_access_tokens.jti",
        }),
      )
      expect(await Effect.runPromise(d.run("test.read", "autocommit", jtis))).toEqual([])
    }))

  it("rolls back when the work's own code throws", () =>
    withDriver(async (d) => {
      const error = await Effect.runPromise(
        Effect.flip(
          d.run("test.throw", "transaction", function* () {
            yield* insert("a")
            throw new Error("column x: expected text")
          }),
        ),
      )
      expect(error).toEqual(new StorageError({ operation: "test.throw", message: "column x: expected text" }))
      expect(await Effect.runPromise(d.run("test.read", "autocommit", jtis))).toEqual([])
    }))

  it("binds a numbered placeholder used twice", () =>
    withDriver(async (d) => {
      const found = await Effect.runPromise(
        d.run("test.params", "autocommit", () => rows("SELECT $1 AS a, $2 AS b, $1 AS c", ["x", 2])),
      )
      expect(found).toEqual([{ a: "x", b: 2, c: "x" }])
    }))
})

describe("the in-memory stores", () => {
  it("refuse a duplicate access-token id as the SQL stores always did", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const grants = yield* GrantStore
        const { grant_id } = yield* grants.createCode(newCode())
        yield* grants.recordAccessToken({ grant_id, jti: "same", expires_at: NOW + 60 })
        const error = yield* Effect.flip(grants.recordAccessToken({ grant_id, jti: "same", expires_at: NOW + 60 }))
        expect(error).toEqual(
          new StorageError({
            operation: "GrantStore.recordAccessToken",
            message: "UNIQUE constraint failed: access_tokens.jti",
          }),
        )
      }).pipe(Effect.provide(layerMemory)),
    ))
})
