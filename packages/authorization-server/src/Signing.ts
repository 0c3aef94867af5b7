/**
 * Access-token signing: keys come from the {@link KeyStore} (an ES256 key is generated on first start) and the
 * public halves are published as the JWK Set at `jwks_uri`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9068.html#section-2 | RFC 9068 §2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @module
 */
import { constants, createPrivateKey, type KeyObject, sign as signWith } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWTPayload } from "jose"
import { nowSeconds } from "./internal/clock.js"
import type { NoSigningKey, StorageError } from "./storage/Errors.js"
import { type Jwk, type JwkSet, KeyStore, type SigningKey } from "./storage/Storage.js"

/** Signature algorithms the server can sign access tokens with. */
export type SigningAlgorithm = "ES256" | "ES384" | "EdDSA" | "RS256" | "PS256"

/**
 * An ECDSA signature in DER (`ECDSA-Sig-Value`, RFC 3279 §2.2.3), as OpenSSL makes it, as the R || S of `size` bytes
 * each that JWS requires (RFC 7518 §3.4): each INTEGER (X.690 §8.3) without its sign byte, left-padded with zeros.
 * node:crypto's own conversion (`dsaEncoding: "ieee-p1363"`) goes through a slower path than signing with the key
 * object alone, which costs about as much again as the signature.
 */
const derToJose = (der: Buffer, size: number): Buffer => {
  const out = Buffer.alloc(2 * size)
  // SEQUENCE, its length in one byte (P-256) or two (0x81 n, P-384), then two INTEGERs.
  let o = der[1] === 0x81 ? 3 : 2
  for (let half = 0; half < 2; half++) {
    const length = der[o + 1] as number
    const start = o + 2
    const end = start + length
    const from = Math.max(start, end - size)
    der.copy(out, half * size + size - (end - from), from, end)
    o = end
  }
  return out
}

/**
 * A compact JWS signer for one key, signing synchronously with node:crypto (no Web Crypto job handed to the thread
 * pool and awaited per token): the digest and options of each algorithm (RFC 7518 §3.1; EdDSA: RFC 8037 §3.1).
 */
const jwsSigner = (alg: string, key: KeyObject): ((input: Buffer) => Buffer) => {
  switch (alg) {
    case "ES256":
      return (input) => derToJose(signWith("sha256", input, key), 32)
    case "ES384":
      return (input) => derToJose(signWith("sha384", input, key), 48)
    case "EdDSA":
      return (input) => signWith(null, input, key)
    case "RS256":
      return (input) => signWith("sha256", input, key)
    case "PS256":
      // RFC 7518 §3.5: MGF1 with SHA-256 and a salt as long as the hash.
      return (input) => signWith("sha256", input, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 })
    default:
      throw new Error(`unsupported signing algorithm ${alg}`)
  }
}

const base64url = (value: unknown): string => Buffer.from(JSON.stringify(value), "utf8").toString("base64url")

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
        // One signer per key, made on its first use; the protected header of each `typ` encoded once.
        const signers = new Map<
          string,
          { readonly sign: (input: Buffer) => Buffer; readonly headers: Map<string, string> }
        >()
        const signerOf = (key: SigningKey) => {
          let signer = signers.get(key.kid)
          if (signer === undefined) {
            const keyObject = createPrivateKey({ key: key.private_jwk as Record<string, string>, format: "jwk" })
            signer = { sign: jwsSigner(key.alg, keyObject), headers: new Map() }
            signers.set(key.kid, signer)
          }
          return signer
        }
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
            Effect.flatMap(nowSeconds, (now) =>
              Effect.map(current(now), (key) => {
                const signer = signerOf(key)
                let header = signer.headers.get(typ)
                if (header === undefined) {
                  header = base64url({ alg: key.alg, kid: key.kid, typ })
                  signer.headers.set(typ, header)
                }
                const input = `${header}.${base64url(payload)}`
                return `${input}.${signer.sign(Buffer.from(input, "ascii")).toString("base64url")}`
              }),
            ),
          jwks: Effect.flatMap(nowSeconds, keys.published).pipe(
            Effect.map((list) => ({ keys: list.map((k) => k.public_jwk) })),
          ),
        })
      }),
    )
}
