/**
 * JWS Compact Serialization (RFC 7515 §7.1) as the JWT verifier reads it: each part is decoded once, the protected
 * header is held to the rules jose applies (`crit`, `b64`, `alg`), and the signature is verified with `node:crypto`
 * and a key object kept per key where the runtime has `node:crypto`, with Web Crypto elsewhere (Workers, browsers).
 * On Node.js, Web Crypto costs more CPU per verification than `node:crypto` given a DER signature and a prepared key
 * object (docs/benchmarks.md). The keys themselves come from jose's JWKS handling, as Web Crypto keys imported for
 * the header's algorithm.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7515.html#section-5.2 | RFC 7515 §5.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7518.html#section-3.1 | RFC 7518 §3.1}
 */
import { base64url } from "jose"
import type { InvalidTokenReason } from "../VerifiedToken.js"
import { type NodeCrypto, nodeBuffer, nodeCrypto } from "./native.js"

/** A signature algorithm: the key jose imports for it, and how Web Crypto and `node:crypto` verify with it. */
export interface SignatureAlgorithm {
  readonly name: string
  /** The Web Crypto algorithm of a key imported for it. */
  readonly key: { readonly name: string; readonly hash?: string; readonly namedCurve?: string }
  /** The Web Crypto verification parameters. */
  readonly webCrypto: Parameters<SubtleCrypto["verify"]>[0]
  /** The `node:crypto` digest, `null` where the algorithm names its own (EdDSA, ML-DSA). */
  readonly digest: string | null
  /** The RSASSA-PSS salt length in bytes (RFC 7518 §3.5). */
  readonly saltLength?: number
  /** ECDSA: the length in bytes of R and of S, which the signature holds side by side (RFC 7518 §3.4). */
  readonly ecdsa?: number
  /** RSA keys must be at least this long (RFC 7518 §3.3, §3.5). */
  readonly minRsaBits?: number
}

const rsa = (name: string, bits: number, saltLength?: number): SignatureAlgorithm => ({
  name,
  key: { name: saltLength === undefined ? "RSASSA-PKCS1-v1_5" : "RSA-PSS", hash: `SHA-${bits}` },
  webCrypto: saltLength === undefined ? { name: "RSASSA-PKCS1-v1_5" } : { name: "RSA-PSS", saltLength },
  digest: `sha${bits}`,
  ...(saltLength === undefined ? {} : { saltLength }),
  minRsaBits: 2048,
})
const ecdsa = (name: string, curve: string, bits: number, size: number): SignatureAlgorithm => ({
  name,
  key: { name: "ECDSA", namedCurve: curve },
  webCrypto: { name: "ECDSA", hash: `SHA-${bits}` },
  digest: `sha${bits}`,
  ecdsa: size,
})
const own = (name: string, keyName: string): SignatureAlgorithm => ({
  name,
  key: { name: keyName },
  webCrypto: { name: keyName },
  digest: null,
})

/** The asymmetric JWS algorithms jose verifies; HMAC is never accepted by this verifier. */
const ALGORITHMS: ReadonlyMap<string, SignatureAlgorithm> = new Map(
  [
    rsa("RS256", 256),
    rsa("RS384", 384),
    rsa("RS512", 512),
    rsa("PS256", 256, 32),
    rsa("PS384", 384, 48),
    rsa("PS512", 512, 64),
    ecdsa("ES256", "P-256", 256, 32),
    ecdsa("ES384", "P-384", 384, 48),
    ecdsa("ES512", "P-521", 512, 66),
    own("EdDSA", "Ed25519"),
    own("Ed25519", "Ed25519"),
    own("ML-DSA-44", "ML-DSA-44"),
    own("ML-DSA-65", "ML-DSA-65"),
    own("ML-DSA-87", "ML-DSA-87"),
  ].map((a) => [a.name, a]),
)

/** The three parts of a compact JWS, still encoded; undefined when `token` does not have exactly three. */
export const split = (token: string): readonly [string, string, string] | undefined => {
  const first = token.indexOf(".")
  const second = first === -1 ? -1 : token.indexOf(".", first + 1)
  if (second === -1 || token.indexOf(".", second + 1) !== -1) return undefined
  return [token.slice(0, first), token.slice(first + 1, second), token.slice(second + 1)]
}

const strictText = new TextDecoder("utf-8", { fatal: true })

// The base64url alphabet without padding, the only encoding of a compact JWS part (RFC 7515 §2).
const BASE64URL = /^[A-Za-z0-9_-]*$/

/**
 * The bytes of a base64url part (RFC 7515 §2: no padding, no whitespace, nothing outside the alphabet); undefined
 * when it is anything else. node:buffer decodes it where the runtime has it, several times faster than `atob`.
 */
export const decodePart = (part: string): Uint8Array<ArrayBuffer> | undefined => {
  if (part.length % 4 === 1 || !BASE64URL.test(part)) return undefined
  if (nodeBuffer !== undefined) return nodeBuffer.from(part, "base64url") as Uint8Array<ArrayBuffer>
  try {
    return base64url.decode(part) as Uint8Array<ArrayBuffer>
  } catch {
    return undefined
  }
}

/** A base64url part holding a JSON object (a JOSE header or a JWT claims set); undefined when it is anything else. */
export const decodeObject = (part: string): Record<string, unknown> | undefined => {
  const bytes = decodePart(part)
  if (bytes === undefined) return undefined
  try {
    const value: unknown = JSON.parse(strictText.decode(bytes))
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined
  } catch {
    return undefined
  }
}

/**
 * The algorithm of a protected header, or why the header is refused: `crit` may name only `b64` (RFC 7515 §4.1.11),
 * an unencoded payload is no JWT (RFC 7797 §7), and `alg` must be allowed and known.
 */
export const algorithmOf = (
  header: Readonly<Record<string, unknown>>,
  allowed: ReadonlySet<string>,
): SignatureAlgorithm | InvalidTokenReason => {
  const crit = header.crit
  if (crit !== undefined) {
    if (!Array.isArray(crit) || crit.length === 0) return "malformed"
    for (const name of crit as ReadonlyArray<unknown>) {
      if (typeof name !== "string" || name.length === 0) return "malformed"
      if (name !== "b64") return "algorithm-not-allowed"
    }
    if (header.b64 !== true) return "malformed"
  }
  const alg = header.alg
  if (typeof alg !== "string" || alg === "") return "malformed"
  if (!allowed.has(alg)) return "algorithm-not-allowed"
  return ALGORITHMS.get(alg) ?? "algorithm-not-allowed"
}

/** Whether `key` is a public Web Crypto key for `algorithm` that may verify, as jose requires before it verifies. */
export const fits = (key: unknown, algorithm: SignatureAlgorithm): key is CryptoKey => {
  if (typeof key !== "object" || key === null || !("algorithm" in key) || !("usages" in key)) return false
  const k = key as CryptoKey
  const actual = k.algorithm as { name: string; hash?: { name: string }; namedCurve?: string; modulusLength?: number }
  const expected = algorithm.key
  if (actual.name !== expected.name || !k.usages.includes("verify")) return false
  if (expected.hash !== undefined && actual.hash?.name !== expected.hash) return false
  if (expected.namedCurve !== undefined && actual.namedCurve !== expected.namedCurve) return false
  if (algorithm.minRsaBits !== undefined && !((actual.modulusLength ?? 0) >= algorithm.minRsaBits)) return false
  return true
}

type KeyObject = NodeCrypto.KeyObject

// The node:crypto form of each Web Crypto key, made once per key; `null` when it cannot be made (Web Crypto then).
const keyObjects = new WeakMap<CryptoKey, KeyObject | null>()

const keyObjectOf = (crypto: typeof NodeCrypto, key: CryptoKey): KeyObject | null => {
  let object = keyObjects.get(key)
  if (object === undefined) {
    try {
      object = crypto.KeyObject.from(key)
    } catch {
      object = null
    }
    keyObjects.set(key, object)
  }
  return object
}

const encoder = new TextEncoder()

/**
 * An ECDSA signature R || S as the DER `ECDSA-Sig-Value` (RFC 3279 §2.2.3) that OpenSSL reads natively: node:crypto's
 * own conversion (`dsaEncoding: "ieee-p1363"`) costs a quarter of a P-256 verification. Each half becomes a DER
 * INTEGER (X.690 §8.3): no redundant leading zero, a zero before a high bit. Undefined when the signature does not
 * have the curve's length, which Web Crypto refuses as well.
 */
export const ecdsaToDer = (signature: Uint8Array, size: number): Uint8Array<ArrayBuffer> | undefined => {
  if (signature.length !== 2 * size) return undefined
  let r = 0
  while (r < size - 1 && signature[r] === 0) r++
  let s = size
  while (s < 2 * size - 1 && signature[s] === 0) s++
  const rPad = (signature[r] as number) >= 0x80 ? 1 : 0
  const sPad = (signature[s] as number) >= 0x80 ? 1 : 0
  const rLength = size - r + rPad
  const sLength = 2 * size - s + sPad
  const body = 4 + rLength + sLength
  const out = new Uint8Array((body < 0x80 ? 2 : 3) + body)
  let o = 0
  out[o++] = 0x30
  if (body >= 0x80) out[o++] = 0x81
  out[o++] = body
  out[o++] = 0x02
  out[o++] = rLength
  if (rPad === 1) out[o++] = 0
  out.set(signature.subarray(r, size), o)
  o += size - r
  out[o++] = 0x02
  out[o++] = sLength
  if (sPad === 1) out[o++] = 0
  out.set(signature.subarray(s, 2 * size), o)
  return out
}

/** The bytes of a base64url signature part; undefined when it is not base64url. */
export const decodeSignature = (part: string): Uint8Array<ArrayBuffer> | undefined => decodePart(part)

/** Verifies `signature` over the JWS signing input (`header.payload`, encoded) with `key`. */
export type VerifySignature = (
  algorithm: SignatureAlgorithm,
  key: CryptoKey,
  signingInput: string,
  signature: Uint8Array<ArrayBuffer>,
) => boolean | Promise<boolean>

/**
 * {@link VerifySignature} handing its answer to `done` instead of a promise, so that a caller that makes a promise of
 * its own (one per verification) needs no second one.
 */
export type VerifySignatureThen = (
  algorithm: SignatureAlgorithm,
  key: CryptoKey,
  signingInput: string,
  signature: Uint8Array<ArrayBuffer>,
  done: (verified: boolean) => void,
) => void

/**
 * Signature verification through `crypto` when given, and through Web Crypto otherwise or for a key `crypto` cannot
 * take. `node:crypto` verifies on the thread pool, as Web Crypto does, so that the event loop serves other requests
 * meanwhile: in the benchmark that answered more requests per second than verifying on the event loop, for some more
 * CPU per request (the hand-over, docs/benchmarks.md). A verification that fails (a signature of the wrong length for
 * the key) is a wrong signature.
 */
export const signatureVerifierThen =
  (crypto: typeof NodeCrypto | undefined): VerifySignatureThen =>
  (algorithm, key, signingInput, signature, done) => {
    const data = encoder.encode(signingInput)
    const object = crypto === undefined ? null : keyObjectOf(crypto, key)
    if (crypto !== undefined && object !== null) {
      let input: Uint8Array = signature
      if (algorithm.ecdsa !== undefined) {
        const der = ecdsaToDer(signature, algorithm.ecdsa)
        if (der === undefined) {
          done(false)
          return
        }
        input = der
      }
      const options =
        algorithm.saltLength !== undefined
          ? { key: object, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: algorithm.saltLength }
          : object
      try {
        crypto.verify(algorithm.digest, data, options, input, (error, verified) => done(error === null && verified))
      } catch {
        done(false)
      }
      return
    }
    globalThis.crypto.subtle.verify(algorithm.webCrypto, key, signature, data).then(done, () => done(false))
  }

/** {@link signatureVerifierThen} as a promise. */
export const signatureVerifier = (crypto: typeof NodeCrypto | undefined): VerifySignature => {
  const verify = signatureVerifierThen(crypto)
  return (algorithm, key, signingInput, signature) =>
    new Promise<boolean>((resolve) => verify(algorithm, key, signingInput, signature, resolve))
}

/** Signature verification with `node:crypto` where the runtime has it, Web Crypto elsewhere. */
export const verifySignatureThen: VerifySignatureThen = signatureVerifierThen(nodeCrypto)
