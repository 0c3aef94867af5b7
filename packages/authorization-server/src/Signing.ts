/**
 * Access-token signing: keys come from the {@link KeyStore} (an ES256 key is generated on first start) and the
 * public halves are published as the JWK Set at `jwks_uri`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2 | RFC 9068 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @module
 */
import { Context, Effect, Layer } from "effect"
import {
  type CryptoKey,
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWTPayload,
  SignJWT,
} from "jose"
import { nowSeconds } from "./internal/clock.js"
import type { NoSigningKey, StorageError } from "./storage/Errors.js"
import { type Jwk, type JwkSet, KeyStore, type SigningKey } from "./storage/Storage.js"

/** Signature algorithms the server can sign access tokens with. */
export type SigningAlgorithm = "ES256" | "ES384" | "EdDSA" | "RS256" | "PS256"

/**
 * Creates a key pair for `alg` with a thumbprint `kid`, ready for {@link KeyStore} `add`, created and active from `at`
 * (NumericDate seconds, read from the caller's clock: Effect's `Clock` inside the server).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7638.html | RFC 7638 (JWK thumbprint)}
 */
export const generateSigningKey = async (alg: SigningAlgorithm, at: number): Promise<SigningKey> => {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true })
  const publicJwk = await exportJWK(publicKey)
  const kid = await calculateJwkThumbprint(publicJwk)
  const privateJwk = await exportJWK(privateKey)
  return {
    kid,
    alg,
    private_jwk: { ...privateJwk, kid, alg } as Jwk,
    public_jwk: { ...publicJwk, kid, alg, use: "sig" } as Jwk,
    created_at: at,
    activates_at: at,
    status: "active",
  }
}

/**
 * Signs JWTs with the current key and serves the published JWK Set.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2.1 | RFC 9068 §2.1}
 */
export class TokenSigner extends Context.Service<
  TokenSigner,
  {
    /** A compact JWS with header `{ alg, kid, typ }`. */
    readonly sign: (payload: JWTPayload, typ: string) => Effect.Effect<string, NoSigningKey | StorageError>
    /** The public keys to publish now (RFC 7517 §5). */
    readonly jwks: Effect.Effect<JwkSet, StorageError>
  }
>()("@keyway/authorization-server/TokenSigner") {
  /**
   * Signer over the {@link KeyStore}; when the store has no key that can sign, one is generated with `alg` and
   * stored, so a fresh installation needs no key management.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
   */
  static readonly layer = (alg: SigningAlgorithm = "ES256"): Layer.Layer<TokenSigner, StorageError, KeyStore> =>
    Layer.effect(
      TokenSigner,
      Effect.gen(function* () {
        const keys = yield* KeyStore
        const startedAt = yield* nowSeconds
        const existing = yield* keys.current(startedAt).pipe(
          Effect.map(() => true),
          Effect.catchTag("NoSigningKey", () => Effect.succeed(false)),
        )
        if (!existing) {
          const key = yield* Effect.promise(() => generateSigningKey(alg, startedAt))
          yield* keys.add(key).pipe(Effect.catchTag("KeyAlreadyExists", () => Effect.void))
        }
        const imported = new Map<string, CryptoKey>()
        const importKey = (key: SigningKey) =>
          Effect.promise(async () => {
            let cryptoKey = imported.get(key.kid)
            if (cryptoKey === undefined) {
              cryptoKey = (await importJWK(key.private_jwk as Parameters<typeof importJWK>[0], key.alg)) as CryptoKey
              imported.set(key.kid, cryptoKey)
            }
            return cryptoKey
          })
        // The signing key as read in one second of the clock: read again at most once a second, so a rotation or a
        // revocation by another process (the admin CLI, another instance) takes effect here within a second, and a
        // token request reads no key from the store.
        let held: { readonly second: number; readonly key: SigningKey } | undefined
        const current = (now: number) =>
          held !== undefined && held.second === now
            ? Effect.succeed(held.key)
            : Effect.tap(keys.current(now), (key) =>
                Effect.sync(() => {
                  held = { second: now, key }
                }),
              )
        return TokenSigner.of({
          sign: (payload, typ) =>
            Effect.gen(function* () {
              const key = yield* current(yield* nowSeconds)
              const cryptoKey = yield* importKey(key)
              return yield* Effect.promise(() =>
                new SignJWT(payload).setProtectedHeader({ alg: key.alg, kid: key.kid, typ }).sign(cryptoKey),
              )
            }),
          jwks: Effect.flatMap(nowSeconds, keys.published).pipe(
            Effect.map((list) => ({ keys: list.map((k) => k.public_jwk) })),
          ),
        })
      }),
    )
}
