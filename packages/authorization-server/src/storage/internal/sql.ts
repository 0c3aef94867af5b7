/**
 * The driver port the store is written against: the store's methods are generators that yield statements, and a
 * driver (SQLite, PostgreSQL) runs them, in one transaction or one statement at a time. SQL text is written once, in
 * the dialect both databases share, with PostgreSQL's numbered placeholders (`$1`, `$2`, ...); a driver rewrites what
 * its database spells differently.
 */
import type { Effect } from "effect"
import type { StorageError } from "../Errors.js"

/** A result row as a driver returns it. */
export type Row = Record<string, unknown>

/** A value bound to a placeholder. */
export type Param = string | number | null | ReadonlyArray<string>

/** One statement for the driver: `rows` returns the result rows, `count` the number of rows changed. */
export interface Statement {
  readonly kind: "rows" | "count"
  readonly sql: string
  readonly params: ReadonlyArray<Param>
}

/** A unit of work: yields statements, receives each result, returns its outcome. */
export type Work<A> = Generator<Statement, A, unknown>

/** The rows a query returns. */
export function* rows(sql: string, params: ReadonlyArray<Param> = []): Work<ReadonlyArray<Row>> {
  return (yield { kind: "rows", sql, params }) as ReadonlyArray<Row>
}

/** The first row a query returns, if any. */
export function* row(sql: string, params: ReadonlyArray<Param> = []): Work<Row | undefined> {
  return (yield* rows(sql, params))[0]
}

/** How many rows a statement inserted, updated or deleted. */
export function* count(sql: string, params: ReadonlyArray<Param> = []): Work<number> {
  return (yield { kind: "count", sql, params }) as number
}

/**
 * How a unit of work runs: `transaction` runs every statement in one transaction, committed when the work returns
 * (whatever outcome it returns, so a detected replay commits its revocation) and rolled back when a statement or the
 * work throws; `autocommit` runs each statement on its own (single-statement work).
 */
export type Mode = "transaction" | "autocommit"

/**
 * One schema change, applied once, in one transaction with the others pending: `sql` first (the dialect's own text,
 * several statements), then `work` when present, statements in the shared dialect over the bare table names (a change
 * of data that needs more than SQL, written once for both databases).
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
  readonly work?: (tables: Tables) => Work<unknown>
}

/** The qualified names of Keyway's tables. */
export interface Tables {
  readonly clients: string
  readonly grants: string
  readonly codes: string
  readonly accessTokens: string
  readonly revokedAccessTokens: string
  readonly families: string
  readonly refreshTokens: string
  readonly consents: string
  readonly assertionJtis: string
  readonly keys: string
  readonly rateLimits: string
  /** The extensions' namespaced records (see `RecordStore`). */
  readonly records: string
  /** The issuer the database serves (one row). */
  readonly issuer: string
}

/** The table names as they are in a database whose tables are on the search path. */
export const bareTables: Tables = {
  clients: "clients",
  grants: "grants",
  codes: "authorization_codes",
  accessTokens: "access_tokens",
  revokedAccessTokens: "revoked_access_tokens",
  families: "refresh_families",
  refreshTokens: "refresh_tokens",
  consents: "consents",
  assertionJtis: "assertion_jtis",
  keys: "signing_keys",
  rateLimits: "rate_limits",
  records: "extension_records",
  issuer: "issuer",
}

/** An open database as the store sees it. */
export interface Driver {
  readonly tables: Tables
  /**
   * Appended to a `SELECT` inside a transaction whose rows must stay locked until it ends (`FOR UPDATE`, or
   * `FOR SHARE` with `share`), naming the locked table's alias when the query joins; empty where the transaction
   * already holds the whole database (SQLite's `BEGIN IMMEDIATE`).
   */
  readonly lock: (mode: "update" | "share", of?: string) => string
  /** A list of strings as the database stores it (a `text[]`, or JSON text). */
  readonly textArray: (values: ReadonlyArray<string>) => Param
  /** Runs `work`; a failing statement or a thrown decoding error becomes a `StorageError` naming `operation`. */
  readonly run: <A>(operation: string, mode: Mode, work: () => Work<A>) => Effect.Effect<A, StorageError>
}

/** Drives `work` to its end with a synchronous executor (from `first`, when its first step was already taken). */
export const driveSync = <A>(
  work: Work<A>,
  execute: (statement: Statement) => unknown,
  first?: IteratorResult<Statement, A>,
): A => {
  let step = first ?? work.next()
  while (step.done !== true) step = work.next(execute(step.value))
  return step.value
}

/** Drives `work` to its end with an asynchronous executor. */
export const driveAsync = async <A>(work: Work<A>, execute: (statement: Statement) => Promise<unknown>): Promise<A> => {
  let step = work.next()
  while (step.done !== true) step = work.next(await execute(step.value))
  return step.value
}

export const message = (error: unknown): string => (error instanceof Error ? error.message : String(error))
