import { AuthError } from "../AuthError.js"

/** The callback carries no `state`: it cannot be matched to a pending request and is discarded (state is the CSRF protection of OAuth 2.1). */
export const stateMissing = (where: string): AuthError =>
  new AuthError({
    step: "callback",
    reason: "state-missing",
    url: where,
    message: `the authorization response at ${where} carries no state; it was discarded (it may be forged or from another request)`,
  })
