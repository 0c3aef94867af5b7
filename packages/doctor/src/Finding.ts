/**
 * What the doctor reports: findings, each the outcome of one check against one server, with what was sent and seen,
 * and the catalog of checks that says why each matters and how to fix it.
 *
 * @module
 */
import type { Revision } from "@keyway/core"

/** `pass`: the rule holds; `warn`: some clients may stumble, or a SHOULD is not met; `fail`: clients break. */
export type Status = "pass" | "warn" | "fail"

/**
 * One HTTP exchange the doctor made: what it sent and what it saw (selected headers, the start of the body), or why
 * it saw nothing.
 */
export interface Exchange {
  readonly method: string
  readonly url: string
  /** Request headers that matter to the check (never a token or a secret in clear). */
  readonly requestHeaders?: Readonly<Record<string, string>>
  /** The status, absent when no answer came (`error` says why). */
  readonly status?: number
  /** Response headers, lower-case names. */
  readonly headers?: Readonly<Record<string, string>>
  /** The start of the response body (at most 2,000 characters). */
  readonly body?: string
  /** Why no answer came: a refused connection, a timeout, a DNS failure, a body too large. */
  readonly error?: string
}

/**
 * A check: its title, why it matters (which clients break, the spec section) and the fix in one sentence.
 */
export interface CheckEntry {
  /** What is checked, as a statement that holds when it passes ("The 401 names its protected resource metadata"). */
  readonly title: string
  /** Why it matters: which clients break and how, and the spec section. */
  readonly why: string
  /** The fix, one sentence, for a warning or a failure. */
  readonly fix: string
  /** The spec section the check applies (a URL). */
  readonly spec: string
}

/**
 * The outcome of one check against one server.
 */
export interface Finding {
  /** The check (a key of the catalog). */
  readonly check: string
  readonly status: Status
  /** The server the finding is about: the MCP server's URL, or an authorization server's issuer. */
  readonly server: string
  /** The revisions whose clients the finding concerns; every selected revision when the rule is the same for all. */
  readonly revisions: ReadonlyArray<Revision.Revision>
  /** What was seen, with the values that matter, one or two sentences. */
  readonly detail: string
  /** The exchanges the check rests on, in order. */
  readonly exchanges: ReadonlyArray<Exchange>
}
