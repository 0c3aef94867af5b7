/**
 * The MCP DPoP extension on Node.js: everything the main entry has, plus replay stores shared by several instances of
 * one MCP server, for `dpopScheme({ replayCache })` of `@keyway/ext-dpop/resource-server`: a SQLite file
 * (`node:sqlite`) for processes on one machine, PostgreSQL (`pg`, an optional peer dependency) for several machines.
 * Only this entry loads `node:*` modules.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 * @packageDocumentation
 */

export * from "./index.js"
export {
  type PostgresReplayCache,
  type PostgresReplayCacheCommonOptions,
  type PostgresReplayCacheOptions,
  postgresReplayCache,
  type ReplayPostgresPool,
} from "./internal/postgres.js"
export type { ReplayCache } from "./internal/replay.js"
export {
  type SqliteReplayCache,
  type SqliteReplayCacheOptions,
  sqliteReplayCache,
} from "./internal/sqlite.js"
export { ReplayStoreError } from "./internal/store.js"
