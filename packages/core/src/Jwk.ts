/**
 * JSON Web Keys a client publishes: the rule that a client's `jwks` (registered, in a client ID metadata document,
 * or behind `jwks_uri`) holds public keys only.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-4 | RFC 7517 §4}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7518.html#section-6 | RFC 7518 §6}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 * @module
 */

/**
 * The JWK members that carry private or symmetric key material: the RSA private members (`d`, `p`, `q`, `dp`,
 * `dq`, `qi`, `oth`; RFC 7518 §6.3.2), the elliptic-curve and OKP private key (`d`; RFC 7518 §6.2.2, RFC 8037 §2)
 * and the symmetric key value (`k`; RFC 7518 §6.4.1).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7518.html#section-6 | RFC 7518 §6}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8037.html#section-2 | RFC 8037 §2}
 */
export const privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"] as const

/**
 * One of {@link privateMembers}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7518.html#section-6 | RFC 7518 §6}
 */
export type PrivateMember = (typeof privateMembers)[number]

/**
 * Key material found where only public keys belong.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export interface PrivateKeyMaterial {
  readonly _tag: "PrivateKeyMaterial"
  /** The member found. */
  readonly member: PrivateMember
  /** `"symmetric"` for an `oct` key value (`k`), `"private"` for the private parts of asymmetric keys. */
  readonly kind: "private" | "symmetric"
  /** Dot-separated path of the member within what was checked: `"d"` in a JWK, `"keys.0.d"` in a JWK Set. */
  readonly path: string
  /** What is wrong, starting with a verb: `"must not be present: only public keys may be published"`. */
  readonly problem: string
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const inKey = (key: unknown, prefix: string): PrivateKeyMaterial | undefined => {
  if (!isObject(key)) return undefined
  const member = privateMembers.find((name) => key[name] !== undefined)
  if (member === undefined) return undefined
  return {
    _tag: "PrivateKeyMaterial",
    member,
    kind: member === "k" ? "symmetric" : "private",
    path: `${prefix}${member}`,
    problem: "must not be present: only public keys may be published",
  }
}

/**
 * Finds private or symmetric key material in a JWK or a JWK Set (an object whose `keys` is an array): the first
 * member of {@link privateMembers} present in the key, or in the first key of the set that has one. A client's
 * keys are published (RFC 7591 §2 `jwks`, client ID metadata documents, `jwks_uri`), so they must be public keys:
 * a private part or an `oct` key (RFC 7517 §4, RFC 7518 §6.4) there is a secret given away. Entries that are not
 * objects, and the shape of the set, are left to the caller's schema; a member counts when present, even as `null`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-4 | RFC 7517 §4}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7518.html#section-6 | RFC 7518 §6}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export const findPrivateKeyMaterial = (jwkOrSet: unknown): PrivateKeyMaterial | undefined => {
  if (isObject(jwkOrSet) && Array.isArray(jwkOrSet.keys)) {
    for (const [i, key] of jwkOrSet.keys.entries()) {
      const found = inKey(key, `keys.${i}.`)
      if (found !== undefined) return found
    }
    return undefined
  }
  return inKey(jwkOrSet, "")
}
