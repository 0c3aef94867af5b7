import { Jwk } from "@keyway/core"

/**
 * Client metadata rules shared by dynamic registration (RFC 7591) and client ID metadata documents, beyond the
 * shapes core's `Wire` schemas check. Each caller words the problem for its own document. The redirect URI rule
 * lives in `redirect.ts`.
 */

/** The application types Keyway knows (OpenID Connect Dynamic Client Registration 1.0 §2). */
export const isApplicationType = (value: string): value is "web" | "native" => value === "web" || value === "native"

/**
 * Why a client's JWK Set is not a set of public keys, with the path of the member at fault inside the set:
 * - `not-a-set`: no `keys` array;
 * - `no-kty`: a key that is not an object with a string `kty` (RFC 7517 §4.1);
 * - `secret`: a key holding private or symmetric material (core's `Jwk.findPrivateKeyMaterial`).
 */
export type JwkSetProblem =
  | { readonly kind: "not-a-set"; readonly path: "keys" }
  | { readonly kind: "no-kty"; readonly path: string }
  | { readonly kind: "secret"; readonly path: string; readonly secret: Jwk.PrivateKeyMaterial }

/** The first problem of a client's published JWK Set, key by key, or undefined for a set of public keys. */
export const jwkSetProblem = (jwks: unknown): JwkSetProblem | undefined => {
  const keys = typeof jwks === "object" && jwks !== null ? (jwks as { keys?: unknown }).keys : undefined
  if (!Array.isArray(keys)) return { kind: "not-a-set", path: "keys" }
  for (const [i, key] of keys.entries()) {
    if (typeof key !== "object" || key === null || typeof (key as { kty?: unknown }).kty !== "string") {
      return { kind: "no-kty", path: `keys.${i}.kty` }
    }
    const secret = Jwk.findPrivateKeyMaterial(key)
    if (secret !== undefined) return { kind: "secret", path: `keys.${i}.${secret.path}`, secret }
  }
  return undefined
}
