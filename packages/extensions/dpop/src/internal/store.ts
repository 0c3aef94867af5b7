/** What the shared replay stores have in common: their error, how they key entries, how much they purge. */
import { Schema } from "effect"

/**
 * A shared replay store failed: it could not be opened (`operation: "open"`: the file, the database or the schema
 * name) or could not record a proof (`"remember"`). A request whose proof could not be recorded is not accepted: the
 * resource server answers it 500 and reports the error (its `onError`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-11.1 | RFC 9449 §11.1}
 */
export class ReplayStoreError extends Schema.TaggedError<ReplayStoreError>()("ReplayStoreError", {
  /** What failed: `open` or `remember`. */
  operation: Schema.String,
  /** The backend's description of the failure. */
  message: Schema.String,
}) {}

/** The text of whatever was thrown. */
export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * A key as the stores keep it: its UTF-16 code units as they are, so every string is its own key (a `jti` is any JSON
 * string: NUL, which PostgreSQL text cannot hold, and unpaired surrogates, which UTF-8 would merge, included).
 */
export const keyBytes = (key: string): Uint8Array => Buffer.from(key, "utf16le")

/**
 * Expired rows deleted by each insert: more than the one row an insert adds, so the table comes back to the proofs of
 * the current window after a burst, a few rows at a time instead of in one long sweep that holds the write lock.
 */
export const PURGED_PER_INSERT = 2
