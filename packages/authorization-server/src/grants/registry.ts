/**
 * The grants the token endpoint serves: the built-in `authorization_code` and `refresh_token` handlers, then every
 * extension's, in one registry that both the dispatch by `grant_type` and `grant_types_supported` read.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-8.3 | RFC 6749 §8.3 (defining new grant types)}
 * @module
 */
import { Grant } from "@keyway/core"
import type { AuthorizationServerExtension, GrantHandler } from "../Extension.js"
import type { RateLimiterService } from "../RateLimiter.js"
import type { TokenSigner } from "../Signing.js"
import type { GrantStore } from "../storage/Storage.js"
import { authorizationCodeGrant } from "./authorizationCode.js"
import { refreshTokenGrant } from "./refreshToken.js"

/**
 * What the built-in grants run with, taken from the server's services when it starts: their handlers then require no
 * service, as an extension's.
 */
export interface GrantServices {
  readonly grants: GrantStore["Service"]
  readonly signer: TokenSigner["Service"]
  readonly limiter: RateLimiterService
}

/** The grant types the server serves itself, registered before any extension's. */
const BUILTIN_GRANT_TYPES: ReadonlyArray<string> = [Grant.AUTHORIZATION_CODE, Grant.REFRESH_TOKEN]

const extensionGrants = (extensions: ReadonlyArray<AuthorizationServerExtension>): ReadonlyArray<GrantHandler> =>
  extensions.flatMap((e) => e.grants ?? [])

/**
 * Every grant type served, each once, in the order of registration: `grant_types_supported` (RFC 8414 §2).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 */
export const grantTypes = (extensions: ReadonlyArray<AuthorizationServerExtension>): ReadonlyArray<string> => [
  ...new Set([...BUILTIN_GRANT_TYPES, ...extensionGrants(extensions).map((g) => g.grantType)]),
]

/**
 * Why the extensions' grants cannot be registered, for a `ConfigError` at start-up: one that claims a built-in grant
 * type (its requests would never reach it, or take another handler's). Several extensions may share a grant type of
 * their own, each `accepts` its requests.
 */
export const registrationProblem = (extensions: ReadonlyArray<AuthorizationServerExtension>): string | undefined => {
  for (const e of extensions) {
    const taken = (e.grants ?? []).find((g) => BUILTIN_GRANT_TYPES.includes(g.grantType))
    if (taken !== undefined) {
      return `${e.id}: the grant type ${taken.grantType} is the server's own; an extension cannot register it`
    }
  }
  return undefined
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
