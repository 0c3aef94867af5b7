/**
 * The audit log: one JSON object per line for every security event (sign-ins, consents, clients, tokens, refresh-token
 * reuse, signing keys), appended to a file only its owner can read. Events carry names, IDs, scopes and outcomes; a
 * secret, a code or a token never reaches them: the server reports its events without them (`Operations.SecurityEvent`).
 *
 * @module
 */
import { closeSync, openSync, writeSync } from "node:fs"
import type { AuditEvent } from "./logging.js"

/** An open audit log. */
export interface AuditLog {
  /** Appends one event, with the time and who wrote it (`server` or `admin`). */
  readonly write: (event: AuditEvent) => void
  readonly close: () => void
}

/**
 * Opens (creating, mode 0600) the audit log file for appending. Lines are written whole with one `write` each, so the
 * server and admin commands can append to the same file.
 */
export const openAuditLog = (file: string, source: "server" | "admin"): AuditLog => {
  const fd = openSync(file, "a", 0o600)
  let open = true
  return {
    write: (event) => {
      if (!open) return
      const fields = Object.fromEntries(Object.entries(event).filter(([, value]) => value !== undefined))
      writeSync(fd, `${JSON.stringify({ time: new Date().toISOString(), source, ...fields })}\n`)
    },
    close: () => {
      if (open) closeSync(fd)
      open = false
    },
  }
}
