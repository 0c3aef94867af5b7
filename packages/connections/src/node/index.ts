/**
 * The Node.js storage of the vault: SQLite (node:sqlite) and PostgreSQL (pg).
 *
 * @module
 */
export * from "../index.js"
