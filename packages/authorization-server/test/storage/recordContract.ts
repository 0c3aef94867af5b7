/**
 * The extension-record contract: memory, SQLite and PostgreSQL run this same suite. Each test gets a fresh, empty
 * store from the factory.
 */
import { Effect, type Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import { RecordStore, type StorageError } from "../../src/storage/index.js"
import { NOW } from "./contract.js"

/** Builds a fresh, empty record store. */
export type RecordsFactory = () => Layer.Layer<RecordStore, StorageError>

const NS = "example/records"

export const recordContract = (name: string, factory: RecordsFactory): void => {
  const run = <A, E>(program: Effect.Effect<A, E, RecordStore>): Promise<A> =>
    Effect.runPromise(Effect.provide(program, factory()))

  describe(`${name}: RecordStore`, () => {
    it("puts a record once, gets it until it expires, and keeps namespaces apart", () =>
      run(
        Effect.gen(function* () {
          const records = yield* RecordStore
          // A key beginning with "-" and one with non-ASCII text are keys like any other.
          expect(yield* records.put(NS, "-abc", { state: "pending", n: 1 }, NOW + 10, NOW)).toBe(true)
          expect(yield* records.put(NS, "-abc", { state: "other" }, NOW + 10, NOW + 1)).toBe(false)
          expect(yield* records.put("other/ns", "-abc", "x", NOW + 10, NOW)).toBe(true)
          expect(yield* records.put(NS, "ключ", [1, 2], NOW + 10, NOW)).toBe(true)
          expect(yield* records.get(NS, "-abc", NOW + 9)).toEqual(
            Option.some({ value: { state: "pending", n: 1 }, version: 1, expires_at: NOW + 10 }),
          )
          expect(yield* records.get("other/ns", "-abc", NOW)).toEqual(
            Option.some({ value: "x", version: 1, expires_at: NOW + 10 }),
          )
          expect(yield* records.get(NS, "ключ", NOW)).toEqual(
            Option.some({ value: [1, 2], version: 1, expires_at: NOW + 10 }),
          )
          expect(yield* records.get(NS, "-abd", NOW)).toEqual(Option.none())
          // Absent from expires_at on; a new put may then take the key.
          expect(yield* records.get(NS, "-abc", NOW + 10)).toEqual(Option.none())
          expect(yield* records.put(NS, "-abc", { state: "new" }, NOW + 30, NOW + 10)).toBe(true)
          expect(yield* records.get(NS, "-abc", NOW + 10)).toEqual(
            Option.some({ value: { state: "new" }, version: 1, expires_at: NOW + 30 }),
          )
        }),
      ))

    it("updates by compare-and-set: the stale version loses, the expiry stays", () =>
      run(
        Effect.gen(function* () {
          const records = yield* RecordStore
          yield* records.put(NS, "k", { n: 0 }, NOW + 10, NOW)
          expect(yield* records.update(NS, "k", 1, { n: 1 }, NOW)).toBe(true)
          expect(yield* records.update(NS, "k", 1, { n: 99 }, NOW)).toBe(false)
          expect(yield* records.get(NS, "k", NOW)).toEqual(
            Option.some({ value: { n: 1 }, version: 2, expires_at: NOW + 10 }),
          )
          expect(yield* records.update(NS, "k", 2, { n: 2 }, NOW + 10)).toBe(false)
          expect(yield* records.update(NS, "missing", 1, { n: 2 }, NOW)).toBe(false)
        }),
      ))

    it("lets exactly one of 20 concurrent compare-and-sets of one version win", () =>
      run(
        Effect.gen(function* () {
          const records = yield* RecordStore
          yield* records.put(NS, "k", 0, NOW + 10, NOW)
          const won = yield* Effect.forEach(
            Array.from({ length: 20 }, (_, i) => i),
            (i) => records.update(NS, "k", 1, i + 1, NOW),
            { concurrency: "unbounded" },
          )
          expect(won.filter(Boolean)).toHaveLength(1)
        }),
      ))

    it("takes a record once, even under 20 concurrent takers, and never an expired one", () =>
      run(
        Effect.gen(function* () {
          const records = yield* RecordStore
          yield* records.put(NS, "once", { v: "a" }, NOW + 10, NOW)
          const taken = yield* Effect.forEach(
            Array.from({ length: 20 }, () => 0),
            () => records.take(NS, "once", NOW),
            { concurrency: "unbounded" },
          )
          expect(taken.filter(Option.isSome)).toEqual([
            Option.some({ value: { v: "a" }, version: 1, expires_at: NOW + 10 }),
          ])
          expect(yield* records.get(NS, "once", NOW)).toEqual(Option.none())
          yield* records.put(NS, "late", 1, NOW + 10, NOW)
          expect(yield* records.take(NS, "late", NOW + 10)).toEqual(Option.none())
        }),
      ))

    it("deletes a record, and purges the expired ones only", () =>
      run(
        Effect.gen(function* () {
          const records = yield* RecordStore
          yield* records.put(NS, "a", 1, NOW + 10, NOW)
          yield* records.put(NS, "b", 2, NOW + 20, NOW)
          yield* records.put(NS, "c", 3, NOW + 5, NOW)
          expect(yield* records.delete(NS, "a")).toBe(true)
          expect(yield* records.delete(NS, "a")).toBe(false)
          expect(yield* records.purgeExpired(NOW + 10)).toBe(1)
          expect(yield* records.get(NS, "b", NOW + 10)).toEqual(
            Option.some({ value: 2, version: 1, expires_at: NOW + 20 }),
          )
        }),
      ))
  })
}
