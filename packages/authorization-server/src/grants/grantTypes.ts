/**
 * The grant types the server serves: its own, then every extension's. Apart from the handlers (`registry.ts`), so
 * that the configuration's checks read the same list without loading the grants.
 *
 * @module
 */
import { Grant } from "@keyway/core"
import type { AuthorizationServerExtension, GrantHandler } from "../Extension.js"

/** The grant types the server serves itself, registered before any extension's. */
export const BUILTIN_GRANT_TYPES: ReadonlyArray<string> = [Grant.AUTHORIZATION_CODE, Grant.REFRESH_TOKEN]

export const extensionGrants = (extensions: ReadonlyArray<AuthorizationServerExtension>): ReadonlyArray<GrantHandler> =>
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

/**
 * The grant types a client may ask for when it registers itself (RFC 7591 §2): the built-in ones and those of
 * extension grants that allow it ({@link GrantHandler.dynamicRegistration}).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export const registrableGrantTypes = (
  extensions: ReadonlyArray<AuthorizationServerExtension>,
): ReadonlyArray<string> => [
  ...new Set([
    ...BUILTIN_GRANT_TYPES,
    ...extensionGrants(extensions)
      .filter((g) => g.dynamicRegistration === true)
      .map((g) => g.grantType),
  ]),
]
