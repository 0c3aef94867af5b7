/**
 * Pluggable user authentication for the login page. The default implementation checks users from configuration
 * whose passwords are stored as scrypt hashes.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1 (the server authenticates the resource owner)}
 * @module
 */
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import { ConfigError, passwordProblem, type UserOptions } from "./Config.js"

/** An authenticated resource owner. */
export interface User {
  /** The stable identifier put in the `sub` claim. */
  readonly subject: string
  readonly displayName: string
}

/**
 * What the login form submitted.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 */
export interface Credentials {
  readonly username: string
  readonly password: string
}

/**
 * Plain (Promise) form of a user-authentication service, for `createAuthorizationServer`.
 * Resolves to the user, or `undefined` when the credentials are wrong.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 */
export type AuthenticateFn = (credentials: Credentials) => Promise<User | undefined>

const N = 16384
const R = 8
const P = 1
const KEY_LENGTH = 32

const derive = (password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> =>
  new Promise((resolve, reject) =>
    scrypt(password.normalize("NFC"), salt, KEY_LENGTH, { N: n, r, p, maxmem: 256 * n * r }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  )

/**
 * Hashes a new password for {@link UserOptions}: `scrypt$N$r$p$salt$hash` (base64url salt and hash). A password
 * shorter than `Config.limits.passwordMinLength` (15 characters) is refused with a {@link ConfigError} (see
 * `Config.passwordProblem`); passwords hashed before still verify.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7914.html | RFC 7914 (scrypt)}
 * @see {@link https://pages.nist.gov/800-63-4/sp800-63b.html#password | NIST SP 800-63B-4 §3.1.1.2 (password verifiers)}
 */
export const hashPassword = async (password: string): Promise<string> => {
  const problem = passwordProblem(password)
  if (problem !== undefined) throw new ConfigError({ message: `password: ${problem}` })
  const salt = randomBytes(16)
  const key = await derive(password, salt, N, R, P)
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64url")}$${key.toString("base64url")}`
}

/**
 * Checks a password against a hash from {@link hashPassword}, comparing in constant time.
 * A malformed hash never matches.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7914.html | RFC 7914 (scrypt)}
 */
export const verifyPassword = async (password: string, hash: string): Promise<boolean> => {
  const parts = hash.split("$")
  if (parts.length !== 6 || parts[0] !== "scrypt") return false
  const [n, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])]
  if (![n, r, p].every((v) => Number.isInteger(v) && v > 0) || n > 1 << 20) return false
  const expected = Buffer.from(parts[5] ?? "", "base64url")
  if (expected.length !== KEY_LENGTH) return false
  const actual = await derive(password, Buffer.from(parts[4] ?? "", "base64url"), n, r, p)
  return timingSafeEqual(actual, expected)
}

// Verifying against this when the username is unknown keeps the response time independent of whether it exists.
const DUMMY_HASH = `scrypt$${N}$${R}$${P}$AAAAAAAAAAAAAAAAAAAAAA$${Buffer.alloc(KEY_LENGTH).toString("base64url")}`

/**
 * The default `AuthenticateFn`: configured users with scrypt password hashes.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7914.html | RFC 7914 (scrypt)}
 */
export const fromUsers = (users: ReadonlyArray<UserOptions>): AuthenticateFn => {
  const byName = new Map(users.map((u) => [u.username, u]))
  return async ({ username, password }) => {
    const user = byName.get(username)
    const ok = await verifyPassword(password, user?.passwordHash ?? DUMMY_HASH)
    if (!ok || user === undefined) return undefined
    return { subject: user.subject ?? user.username, displayName: user.displayName ?? user.username }
  }
}

/**
 * The user-authentication service used by the login page.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
 */
export class UserAuthenticator extends Context.Service<
  UserAuthenticator,
  { readonly authenticate: (credentials: Credentials) => Effect.Effect<User | undefined> }
>()("@keyway/authorization-server/UserAuthenticator") {
  /**
   * From a Promise function (any user directory).
   *
   * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.1.1 | OAuth 2.1 §4.1.1}
   */
  static readonly fromFunction = (authenticate: AuthenticateFn): Layer.Layer<UserAuthenticator> =>
    Layer.succeed(
      UserAuthenticator,
      UserAuthenticator.of({ authenticate: (c) => Effect.promise(() => authenticate(c)) }),
    )

  /**
   * Users from configuration, scrypt-hashed passwords.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc7914.html | RFC 7914 (scrypt)}
   */
  static readonly layerUsers = (users: ReadonlyArray<UserOptions>): Layer.Layer<UserAuthenticator> =>
    UserAuthenticator.fromFunction(fromUsers(users))
}
