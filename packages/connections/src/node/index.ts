/**
 * The Node.js storage of the vault: SQLite (node:sqlite) and PostgreSQL (pg).
 *
 * @module
 */
export * from "../index.js"
export {
  layerPostgresVault,
  type PostgresClient,
  type PostgresPool,
  type PostgresResult,
  type PostgresVaultOptions,
  postgresVault,
} from "./postgres.js"
export { layerSqliteVault, type SqliteVaultOptions, sqliteVault, type VaultHandle } from "./sqlite.js"
