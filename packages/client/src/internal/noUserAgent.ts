import * as Effect from "effect/Effect"
import { AuthError } from "../AuthError.js"
import { UserAgent } from "../UserAgent.js"

/**
 * The user agent of `createAuthClient` from the main entry when none is given: no runtime-neutral default can reach a
 * user, so an authorization fails at once and says which agent to pass.
 */
export const noUserAgent: UserAgent["Service"] = UserAgent.of({
  // Built when an authorization asks for it, not when the module loads: the first error made costs Schema's
  // constructor machinery, which a client given a user agent never needs.
  open: Effect.failSync(
    () =>
      new AuthError({
        step: "authorization",
        reason: "user-agent-failed",
        url: "about:blank",
        message:
          'no user agent is configured: in a web app pass userAgent: UserAgent.redirect({ redirectUri }); on Node.js import createAuthClient from "@keyway/client/node" for the system browser with a loopback listener; in automation pass UserAgent.headless()',
      }),
  ),
})
