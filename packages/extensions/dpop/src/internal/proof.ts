/**
 * DPoP proofs (RFC 9449 §4): creating them (client) and checking them (authorization server and resource server
 * alike, §4.3), with Web Crypto and jose only, so that every face runs on Web runtimes.
 */
import { Grant } from "@keyway/core"
import { base64url, calculateJwkThumbprint, compactVerify, decodeProtectedHeader, importJWK, type JWK } from "jose"

/** `htu` and the request URL compared without query and fragment, after URL normalisation (RFC 9449 §4.3 item 9). */
export const targetUri = (url: string): string | undefined => {
  try {
    const parsed = new URL(url)
    parsed.search = ""
    parsed.hash = ""
    return parsed.href
  } catch {
    return undefined
  }
}

/** base64url(SHA-256(ASCII(token))): the `ath` claim (RFC 9449 §4.2). */
export const accessTokenHash = async (accessToken: string): Promise<string> =>
  base64url.encode(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(accessToken))))

/** What a valid proof says. */
export interface CheckedProof {
  readonly jkt: string
  readonly jti: string
  readonly iat: number
  readonly nonce: string | undefined
}

/** Why a proof was refused: `invalid_dpop_proof`, or `use_dpop_nonce` when only the nonce is missing or stale. */
export interface ProofFailure {
  readonly error: "invalid_dpop_proof" | "use_dpop_nonce"
  readonly description: string
}

/** What a proof is checked against. */
export interface ProofExpectation {
  /** The request's method (`htm`). */
  readonly method: string
  /** The request's URL (`htu`, compared without query and fragment). */
  readonly url: string
  /** The algorithms accepted. */
  readonly algorithms: ReadonlyArray<string>
  /** Now, seconds since the epoch. */
  readonly now: number
  /** How far `iat` may lie from now, in seconds, either way. */
  readonly window: number
  /** The access token the proof must name by `ath` (resource requests). */
  readonly accessToken?: string
  /** The key thumbprint the proof must be signed with (`cnf.jkt` of the token). */
  readonly jkt?: string
  /** Whether a nonce is valid; when given, a proof without a valid nonce fails `use_dpop_nonce`. */
  readonly nonce?: (nonce: string) => boolean | Promise<boolean>
}

interface ImportedKey {
  readonly key: CryptoKey | Uint8Array
  readonly jkt: string
}

/** Imported keys by algorithm and JWK: a client signs every proof with one key, and importing costs as much as verifying. */
const imported = new Map<string, Promise<ImportedKey>>()
const MAX_IMPORTED = 1024

const importKey = (jwk: JWK, alg: string): Promise<ImportedKey> => {
  const id = `${alg} ${JSON.stringify(jwk)}`
  const held = imported.get(id)
  if (held !== undefined) return held
  const made = (async () => ({
    key: (await importJWK(jwk, alg)) as CryptoKey | Uint8Array,
    jkt: await calculateJwkThumbprint(jwk, "sha256"),
  }))()
  if (imported.size >= MAX_IMPORTED) imported.delete(imported.keys().next().value as string)
  imported.set(id, made)
  made.catch(() => imported.delete(id))
  return made
}

/**
 * The longest `jti` accepted. RFC 9449 §4.2 asks for enough randomness that collisions are negligible (96 bits make 16
 * base64url characters; clients send 22 to 43); the bound keeps what a replay cache holds per proof small.
 */
export const MAX_JTI_LENGTH = 256

const invalid = (description: string): ProofFailure => ({ error: "invalid_dpop_proof", description })

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * Checks a proof per RFC 9449 §4.3: one well-formed JWT, `typ` `dpop+jwt`, an accepted asymmetric `alg`, a public
 * `jwk` that verifies the signature, `jti` (at most {@link MAX_JTI_LENGTH} characters), `htm`, `htu`, `iat` within the window, `ath` and the key thumbprint when
 * asked, and the nonce when one is required. Replay of `jti` is the caller's (its cache, its lifetime).
 */
export const checkProof = async (
  header: string | null | undefined,
  expected: ProofExpectation,
): Promise<CheckedProof | ProofFailure> => {
  if (header === null || header === undefined || header === "") return invalid("the DPoP proof is missing")
  if (header.includes(",")) return invalid("exactly one DPoP proof is allowed")
  let protectedHeader: ReturnType<typeof decodeProtectedHeader>
  try {
    protectedHeader = decodeProtectedHeader(header)
  } catch {
    return invalid("the DPoP proof is not a JWS in compact serialization")
  }
  if (protectedHeader.typ !== "dpop+jwt") return invalid("the DPoP proof's typ is not dpop+jwt")
  const alg = protectedHeader.alg
  if (alg === undefined || !Grant.ASYMMETRIC_ALGORITHMS.includes(alg) || !expected.algorithms.includes(alg)) {
    return invalid(`the DPoP proof's alg is not one of ${expected.algorithms.join(", ")}`)
  }
  const jwk = protectedHeader.jwk as JWK | undefined
  if (!isRecord(jwk)) return invalid("the DPoP proof has no jwk header")
  if (jwk.d !== undefined || jwk.k !== undefined || jwk.p !== undefined) {
    return invalid("the DPoP proof's jwk is not a public key")
  }
  let payload: unknown
  let imported: ImportedKey
  try {
    imported = await importKey(jwk, alg)
    const verified = await compactVerify(header, imported.key, { algorithms: [alg] })
    payload = JSON.parse(new TextDecoder().decode(verified.payload))
  } catch {
    return invalid("the DPoP proof's signature does not verify with its jwk")
  }
  if (!isRecord(payload)) return invalid("the DPoP proof's payload is not a JSON object")
  const { jti, htm, htu, iat, ath, nonce } = payload
  if (typeof jti !== "string" || jti === "") return invalid("the DPoP proof has no jti")
  if (jti.length > MAX_JTI_LENGTH) return invalid(`the DPoP proof's jti is longer than ${MAX_JTI_LENGTH} characters`)
  if (htm !== expected.method) return invalid(`the DPoP proof's htm is not ${expected.method}`)
  const target = typeof htu === "string" ? targetUri(htu) : undefined
  if (target === undefined || target !== targetUri(expected.url)) {
    return invalid("the DPoP proof's htu does not match the request URL")
  }
  if (typeof iat !== "number" || !Number.isFinite(iat)) return invalid("the DPoP proof has no iat")
  if (Math.abs(expected.now - iat) > expected.window) return invalid("the DPoP proof's iat is outside the window")
  if (expected.accessToken !== undefined && ath !== (await accessTokenHash(expected.accessToken))) {
    return invalid("the DPoP proof's ath does not match the access token")
  }
  const jkt = imported.jkt
  if (expected.jkt !== undefined && jkt !== expected.jkt) {
    return invalid("the DPoP proof's key is not the key the access token is bound to")
  }
  if (expected.nonce !== undefined) {
    if (typeof nonce !== "string" || !(await expected.nonce(nonce))) {
      return {
        error: "use_dpop_nonce",
        description: typeof nonce === "string" ? "the DPoP nonce is stale" : "a DPoP nonce is required",
      }
    }
  }
  return { jkt, jti, iat, nonce: typeof nonce === "string" ? nonce : undefined }
}

/** Whether a check failed. */
export const failed = (result: CheckedProof | ProofFailure): result is ProofFailure => "error" in result
