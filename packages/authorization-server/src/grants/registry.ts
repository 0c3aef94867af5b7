/**
 * The grants the token endpoint serves: the built-in `authorization_code` and `refresh_token` handlers, then every
 * extension's, in one registry that both the dispatch by `grant_type` and `grant_types_supported` read.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-8.3 | RFC 6749 §8.3 (defining new grant types)}
 * @module
 */
import type { AuthorizationServerExtension, GrantContext, GrantHandler } from "../Extension.js"
import type { RateLimiterService } from "../RateLimiter.js"
import type { TokenSigner } from "../Signing.js"
import type { GrantStore, RecordStore } from "../storage/Storage.js"
import { authorizationCodeGrant } from "./authorizationCode.js"
import { extensionGrants } from "./grantTypes.js"
import { refreshTokenGrant } from "./refreshToken.js"

/**
 * What the built-in grants run with, taken from the server's services when it starts: their handlers then require no
 * service, as an extension's.
 */
export interface GrantServices {
  readonly grants: GrantStore["Service"]
  readonly signer: TokenSigner["Service"]
  readonly limiter: RateLimiterService
  /** The extensions' records, for {@link GrantContext.records}. */
  readonly records: RecordStore["Service"]
}

/** The registered grant handlers, looked up by a request's `grant_type` and form. */
export interface GrantRegistry {
  /** The first handler of this grant type whose `accepts` takes the form (one without `accepts` takes any). */
  readonly find: (grantType: string, form: ReadonlyMap<string, string>) => GrantHandler | undefined
}

/** The registry: the built-in grants over the server's services first, then every extension's, in order. */
export const grantRegistry = (
  services: GrantServices,
  extensions: ReadonlyArray<AuthorizationServerExtension>,
): GrantRegistry => {
  const handlers = [authorizationCodeGrant(services), refreshTokenGrant(services), ...extensionGrants(extensions)]
  return {
    find: (grantType, form) =>
      handlers.find((g) => g.grantType === grantType && (g.accepts === undefined || g.accepts(form))),
  }
}
