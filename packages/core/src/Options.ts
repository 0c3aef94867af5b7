/**
 * The options a Keyway factory cannot be built with, as one typed error for every factory that has no error of its
 * own: the extensions' (`clientCredentialsGrant`, `identityAssertionGrant`, `dpop`, ...). The role packages keep
 * theirs (`InvalidClientOptions`, `InvalidConfiguration`, `ConfigError`).
 *
 * @module
 */
import * as Schema from "effect/Schema"
import type { z } from "zod"

/**
 * A factory was given options it cannot work with. `factory` is its name, `option` the path of the option at fault
 * (`clients.reporter.scope`; empty when no one option is), and `message` reads `<factory>: <option>: <problem>`.
 */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>()("InvalidOptions", {
  factory: Schema.String,
  option: Schema.String,
  message: Schema.String,
}) {}

/** The error for `option` of `factory`: `message` is `<factory>: <option>: <problem>`, or `<factory>: <problem>`. */
export const invalid = (factory: string, option: string, problem: string): InvalidOptions =>
  new InvalidOptions({
    factory,
    option,
    message: option === "" ? `${factory}: ${problem}` : `${factory}: ${option}: ${problem}`,
  })

/**
 * Checks options against their schema; throws {@link InvalidOptions} naming the first problem zod finds (its path
 * joined with dots, and zod's message).
 */
export const check = (factory: string, schema: z.ZodType, options: unknown): void => {
  const checked = schema.safeParse(options)
  if (checked.success) return
  const issue = checked.error.issues[0]
  throw invalid(factory, issue?.path.join(".") ?? "", issue?.message ?? "invalid")
}
