import { OAuthError } from "@keyway/core"
import { Effect } from "effect"

/** Fails with the OAuth error to answer. */
export const err = (code: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(code, description))
