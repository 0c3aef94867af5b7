import { AuthError, type Extension } from "@keyway/client"
import { Challenge, Grant } from "@keyway/core"
import { Clock, Effect, Result } from "effect"
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type CryptoKey as JoseKey, type JWK, SignJWT } from "jose"
import { accessTokenHash, targetUri } from "./proof.js"

/**
 * A DPoP key pair with the algorithm it signs with and its public JWK.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-4.2 | RFC 9449 §4.2}
 */
export interface DPoPKey {
  readonly privateKey: CryptoKey
  readonly publicJwk: JWK
  readonly alg: string
}

/**
 * Where DPoP keys are kept, one per authorization server issuer, so that DPoP-bound tokens (refresh tokens of public
 * clients above all) keep working across restarts. In memory by default; give one that persists next to the token
 * store (a `CryptoKey` that is not extractable can be kept by structured clone, as IndexedDB does).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-2 | RFC 9449 §2}
 */
export interface DPoPKeyStore {
  readonly get: (issuer: string) => Promise<DPoPKey | undefined>
  readonly set: (issuer: string, key: DPoPKey) => Promise<void>
}

/**
 * Options of {@link dpop}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 */
export interface DPoPClientOptions {
  /**
   * The algorithms this client signs proofs with, in order of preference; the first the authorization server lists in
   * `dpop_signing_alg_values_supported` is used (the first of these when it lists none). `["ES256", "EdDSA",
   * "PS256"]` by default.
   */
  readonly algorithms?: ReadonlyArray<string>
  /**
   * What to do when a token response answers a proof with `token_type: Bearer` (the server ignored DPoP): `refuse`
   * (the default: the client asked for a sender-constrained token and does not settle for less) or `accept`.
   */
  readonly bearerResponse?: "refuse" | "accept"
  /** Where keys are kept; in memory by default. */
  readonly keys?: DPoPKeyStore
  /** Keys are generated extractable (false by default: the private key cannot leave Web Crypto). */
  readonly extractable?: boolean
}

const memoryKeys = (): DPoPKeyStore => {
  const keys = new Map<string, DPoPKey>()
  return { get: async (issuer) => keys.get(issuer), set: async (issuer, key) => void keys.set(issuer, key) }
}

const invalid = (url: string, message: string) =>
  new AuthError.AuthError({ step: "token", reason: "invalid-input", url, message })

/**
 * The DPoP extension for `@keyway/client`: a key pair per authorization server (asymmetric, not extractable unless
 * asked), a fresh proof (`typ: dpop+jwt`, `jwk`, `jti`, `htm`, `htu` without query and fragment, `iat`, `ath` for
 * MCP requests, the server's nonce when one is known) on every token request and every request carrying an access
 * token, whatever its method; tokens presented with the `DPoP` scheme; `use_dpop_nonce` answered with one retry
 * (nonces kept per origin); a token response that is not `DPoP` refused by default.
 *
 * @example
 * ```ts
 * const auth = createAuthClient({ extensions: [dpop()] })
 * const response = await auth.fetch("https://mcp.example.com/mcp", { method: "POST", body })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html | RFC 9449}
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 */
export const dpop = (options: DPoPClientOptions = {}): Extension.ClientExtension => {
  const preferred = options.algorithms ?? ["ES256", "EdDSA", "PS256"]
  const unusable = preferred.filter((a) => !Grant.ASYMMETRIC_ALGORITHMS.includes(a))
  if (unusable.length > 0 || preferred.length === 0) {
    throw new TypeError(`dpop: ${unusable.join(", ") || "no algorithm"}: DPoP proofs need asymmetric JWS algorithms`)
  }
  const store = options.keys ?? memoryKeys()
  // One key generation per issuer at a time.
  const pending = new Map<string, Promise<DPoPKey>>()
  const nonces = new Map<string, string>()
  const sentNonce = new WeakMap<Headers, string | undefined>()

  const keyFor = (issuer: string, supported: ReadonlyArray<string> | undefined): Promise<DPoPKey> => {
    const running = pending.get(issuer)
    if (running !== undefined) return running
    const made = (async () => {
      const held = await store.get(issuer)
      if (held !== undefined && (supported === undefined || supported.includes(held.alg))) return held
      const alg = supported === undefined ? preferred[0] : preferred.find((a) => supported.includes(a))
      if (alg === undefined) {
        throw new Error(
          `the authorization server ${issuer} accepts DPoP proofs signed with ${supported?.join(", ")}, and this client signs with ${preferred.join(", ")}`,
        )
      }
      const pair = await generateKeyPair(alg, { extractable: options.extractable ?? false })
      // The public half is always extractable in Web Crypto.
      const { kty, crv, x, y, n, e } = await exportJWK(pair.publicKey as JoseKey)
      const publicJwk = Object.fromEntries(
        Object.entries({ kty, crv, x, y, n, e }).filter(([, v]) => v !== undefined),
      ) as JWK
      const key: DPoPKey = { privateKey: pair.privateKey as CryptoKey, publicJwk, alg }
      await store.set(issuer, key)
      return key
    })()
    pending.set(issuer, made)
    made.catch(() => pending.delete(issuer))
    return made
  }

  const originOf = (url: string) => new URL(url).origin

  const prove = (request: Extension.OutgoingRequest, key: DPoPKey) =>
    Effect.gen(function* () {
      const iat = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const nonce = nonces.get(originOf(request.url))
      const ath =
        request.accessToken === undefined
          ? undefined
          : yield* Effect.promise(() => accessTokenHash(request.accessToken as string))
      const proof = yield* Effect.promise(() =>
        new SignJWT({
          htm: request.method.toUpperCase(),
          htu: targetUri(request.url) ?? request.url,
          ...(ath === undefined ? {} : { ath }),
          ...(nonce === undefined ? {} : { nonce }),
        })
          .setProtectedHeader({ typ: "dpop+jwt", alg: key.alg, jwk: key.publicJwk })
          .setJti(crypto.randomUUID())
          .setIssuedAt(iat)
          .sign(key.privateKey),
      )
      request.headers.set("dpop", proof)
      sentNonce.set(request.headers, nonce)
    })

  return {
    id: Grant.extensions.dpop,
    schemes: ["DPoP"],
    clientMetadata: { dpop_bound_access_tokens: true },
    authorizationParameters: (server) =>
      Effect.tryPromise({
        try: async () => {
          const key = await keyFor(server.issuer, server.metadata.dpop_signing_alg_values_supported)
          return { dpop_jkt: await calculateJwkThumbprint(key.publicJwk, "sha256") }
        },
        catch: (e) => invalid(server.issuer, `dpop: ${(e as Error).message}`),
      }),
    decorate: (request) =>
      Effect.gen(function* () {
        const issuer = request.issuer
        if (issuer === undefined) return
        if (request.kind === "token") {
          const supported = request.metadata?.dpop_signing_alg_values_supported
          const key = yield* Effect.tryPromise({
            try: () => keyFor(issuer, supported),
            catch: (e) => invalid(request.url, `dpop: ${(e as Error).message}`),
          })
          return yield* prove(request, key)
        }
        // A Bearer token (accepted with `bearerResponse: "accept"`) goes as it is.
        if (request.accessToken === undefined || request.tokenType?.toLowerCase() !== "dpop") return
        const key = yield* Effect.promise(() => pending.get(issuer) ?? store.get(issuer))
        // No key for this token's server (a token obtained before DPoP was configured): it goes as it was.
        if (key === undefined) return
        request.headers.set("authorization", `DPoP ${request.accessToken}`)
        yield* prove(request, key)
      }),
    response: (response, request) =>
      Effect.gen(function* () {
        const nonce = response.headers.get("dpop-nonce")
        if (nonce === null || !request.headers.has("dpop")) return false
        nonces.set(originOf(request.url), nonce)
        if (sentNonce.get(request.headers) === nonce) return false
        if (request.kind === "token") {
          if (response.status !== 400) return false
          const body = yield* Effect.promise(() => response.json().catch(() => undefined))
          return (body as { error?: unknown } | undefined)?.error === "use_dpop_nonce"
        }
        if (response.status !== 401) return false
        const challenge = Challenge.parse(response.headers.get("www-authenticate"))
        return Result.isSuccess(challenge) && Challenge.dpop(challenge.success)?.error === "use_dpop_nonce"
      }),
    tokenType: (tokenType, request) =>
      Effect.gen(function* () {
        if (!request.headers.has("dpop")) return false
        if (tokenType.toLowerCase() === "dpop") return true
        if (options.bearerResponse === "accept") return false
        return yield* new AuthError.AuthError({
          step: "token",
          reason: "unsupported-token-type",
          url: request.url,
          message: `the token endpoint ${request.url} answered a DPoP proof with token_type ${tokenType}: the token is not bound to this client's key (set bearerResponse: "accept" to use such tokens)`,
        })
      }),
  }
}
