/**
 * Turns any failure into one readable line: Keyway's typed authorization errors name the step and reason, other
 * errors give their message and the causes behind it.
 *
 * @module
 */
import { isAuthError } from "@keyway/client"
import { UsageError } from "./args.js"

const oneLine = (text: string): string => text.replace(/\s+/gu, " ").trim()

/** The causes of an error, outermost first (the SDK wraps transport failures). */
const chain = (error: unknown): ReadonlyArray<unknown> => {
  const seen: unknown[] = []
  for (let current: unknown = error; current !== undefined && !seen.includes(current) && seen.length < 8; ) {
    seen.push(current)
    current = current instanceof Error ? current.cause : undefined
  }
  return seen
}

/** One line describing an error, without the program name. */
export const describeError = (error: unknown): string => {
  const causes = chain(error)
  const auth = causes.find(isAuthError)
  if (auth !== undefined) {
    const extras = [auth.error, auth.status !== undefined ? `HTTP ${auth.status}` : undefined].filter(
      (x): x is string => x !== undefined,
    )
    return oneLine(
      `authorization failed at ${auth.step} (${auth.reason}${extras.length > 0 ? `, ${extras.join(", ")}` : ""}): ${auth.message}`,
    )
  }
  if (error instanceof UsageError) return oneLine(`${error.message} (see keyway-mcp --help)`)
  const messages = causes.map((cause) => (cause instanceof Error ? cause.message : String(cause)))
  const distinct = messages.filter((message, index) => message !== "" && !messages.slice(0, index).includes(message))
  return oneLine(distinct.join(": ") || "unknown error")
}
