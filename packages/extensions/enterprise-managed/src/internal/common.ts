import { OAuthError } from "@keyway/core"
import { Effect } from "effect"
import type { z } from "zod"

/** Fails with the OAuth error to answer. */
export const err = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))

/** Checks a plain-face option object against its schema; a `TypeError` naming the first problem otherwise. */
export const checkOptions = (name: string, schema: z.ZodType, options: unknown): void => {
  const checked = schema.safeParse(options)
  if (!checked.success) {
    const issue = checked.error.issues[0]
    throw new TypeError(`${name}: ${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`)
  }
}
