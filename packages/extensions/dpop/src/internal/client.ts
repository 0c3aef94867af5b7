import { AuthError, type Extension, TokenStore as Tokens } from "@keyway/client"

type TokenStore = Tokens.TokenStore
const TokenStore = Tokens.TokenStore

import { Challenge, Grant, Options, type Wire } from "@keyway/core"
import { Clock, Effect, Result } from "effect"
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  type CryptoKey as JoseKey,
  type JWK,
  SignJWT,
} from "jose"
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
 * A place of your own for DPoP keys, one per authorization server issuer, holding the `CryptoKey` itself (a key that
 * is not extractable can be kept by structured clone, as IndexedDB does).
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
  /**
   * Where keys are kept, so that DPoP-bound tokens (a public client's refresh tokens above all) keep working across
   * restarts:
   * - `token-store` (the default): in the client's token store, beside the tokens they protect, as a JWK pair (the
   *   private key is as safe as the refresh token next to it); in memory the private key is a `CryptoKey` that is not
   *   extractable.
   * - `memory`: generated not extractable, and lost with the process (bound refresh tokens with it).
   * - a {@link DPoPKeyStore} of your own, holding the `CryptoKey` (generated not extractable).
   */
  readonly keys?: "token-store" | "memory" | DPoPKeyStore
}

/** A key as the token store keeps it (JSON). */
interface StoredKey {
  readonly alg: string
  readonly publicJwk: JWK
  readonly privateJwk: JWK
}

const storedKey = (issuer: string): string => `dpop-key:${issuer}`

const isStoredKey = (value: unknown): value is StoredKey =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as StoredKey).alg === "string" &&
  typeof (value as StoredKey).publicJwk === "object" &&
  typeof (value as StoredKey).privateJwk === "object"

const publicPart = async (key: CryptoKey): Promise<JWK> => {
  // The public half is always extractable in Web Crypto.
  const { kty, crv, x, y, n, e } = await exportJWK(key as JoseKey)
  return Object.fromEntries(Object.entries({ kty, crv, x, y, n, e }).filter(([, v]) => v !== undefined)) as JWK
}

/** Where a key of one issuer is found and kept: the token store, memory, or the caller's store. */
interface Keys {
  readonly get: (issuer: string) => Effect.Effect<DPoPKey | undefined, never, TokenStore>
  readonly create: (issuer: string, alg: string) => Effect.Effect<DPoPKey, never, TokenStore>
}

const inTokenStore = (): Keys => {
  // Imported once per process: the private key in memory is not extractable.
  const imported = new Map<string, { readonly stored: StoredKey; readonly key: DPoPKey }>()
  return {
    get: (issuer) =>
      Effect.gen(function* () {
        const store = yield* TokenStore
        const stored = yield* store.get(storedKey(issuer))
        if (!isStoredKey(stored)) return undefined
        const held = imported.get(issuer)
        if (held !== undefined && held.stored.privateJwk.d === stored.privateJwk.d) return held.key
        const privateKey = yield* Effect.promise(
          () => importJWK(stored.privateJwk, stored.alg, { extractable: false }) as Promise<CryptoKey>,
        )
        const key: DPoPKey = { privateKey, publicJwk: stored.publicJwk, alg: stored.alg }
        imported.set(issuer, { stored, key })
        return key
      }),
    create: (issuer, alg) =>
      Effect.gen(function* () {
        const store = yield* TokenStore
        const pair = yield* Effect.promise(() => generateKeyPair(alg, { extractable: true }))
        const privateJwk = yield* Effect.promise(() => exportJWK(pair.privateKey))
        const publicJwk = yield* Effect.promise(() => publicPart(pair.publicKey as CryptoKey))
        const stored: StoredKey = { alg, publicJwk, privateJwk: { ...privateJwk, alg } }
        yield* store.set(storedKey(issuer), stored)
        const privateKey = yield* Effect.promise(
          () => importJWK(stored.privateJwk, alg, { extractable: false }) as Promise<CryptoKey>,
        )
        const key: DPoPKey = { privateKey, publicJwk, alg }
        imported.set(issuer, { stored, key })
        return key
      }),
  }
}

const inKeyStore = (store: DPoPKeyStore): Keys => ({
  get: (issuer) => Effect.promise(() => store.get(issuer)),
  create: (issuer, alg) =>
    Effect.promise(async () => {
      const pair = await generateKeyPair(alg, { extractable: false })
      const key: DPoPKey = {
        privateKey: pair.privateKey as CryptoKey,
        publicJwk: await publicPart(pair.publicKey as CryptoKey),
        alg,
      }
      await store.set(issuer, key)
      return key
    }),
})

const memoryKeys = (): DPoPKeyStore => {
  const keys = new Map<string, DPoPKey>()
  return { get: async (issuer) => keys.get(issuer), set: async (issuer, key) => void keys.set(issuer, key) }
}

/** The algorithms both documents allow (either may list none: then the other decides). */
const supportedBy = (
  server: ReadonlyArray<string> | undefined,
  resource: ReadonlyArray<string> | undefined,
): ReadonlyArray<string> | undefined =>
  server === undefined ? resource : resource === undefined ? server : server.filter((alg) => resource.includes(alg))

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
    throw Options.invalid(
      "dpop",
      "algorithms",
      `${unusable.join(", ") || "none given"}: DPoP proofs need asymmetric JWS algorithms`,
    )
  }
  const keys =
    options.keys === undefined || options.keys === "token-store"
      ? inTokenStore()
      : inKeyStore(options.keys === "memory" ? memoryKeys() : options.keys)
  // One key generation per issuer at a time.
  const pending = new Map<string, Promise<DPoPKey | string>>()
  const nonces = new Map<string, string>()
  const sentNonce = new WeakMap<Headers, string | undefined>()

  /**
   * The key for this issuer: the one held while both metadata documents still accept its algorithm, else a new one
   * with the first preferred algorithm both accept (RFC 9449 §5.1, RFC 9728 §2).
   */
  const keyFor = (
    issuer: string,
    server: Wire.AuthorizationServerMetadata | undefined,
    resource: Wire.ProtectedResourceMetadata | undefined,
  ): Effect.Effect<DPoPKey, AuthError.AuthError, TokenStore> =>
    Effect.gen(function* () {
      const services = yield* Effect.context<TokenStore>()
      // Looked up and made in one promise per issuer, set before anything else runs: concurrent first requests share
      // one key instead of each storing its own.
      const made = yield* Effect.sync(() => {
        const running = pending.get(issuer)
        if (running !== undefined) return running
        const supported = supportedBy(
          server?.dpop_signing_alg_values_supported,
          resource?.dpop_signing_alg_values_supported,
        )
        const lookup = Effect.gen(function* () {
          const held = yield* keys.get(issuer)
          if (held !== undefined && (supported === undefined || supported.includes(held.alg))) return held
          const alg = supported === undefined ? preferred[0] : preferred.find((a) => supported.includes(a))
          if (alg === undefined) {
            return `dpop: the authorization server ${issuer} and the MCP server accept DPoP proofs signed with ${supported?.join(", ") || "no common algorithm"}, and this client signs with ${preferred.join(", ")}`
          }
          return yield* keys.create(issuer, alg)
        })
        const promise = Effect.runPromise(lookup.pipe(Effect.provideContext(services))).finally(() =>
          pending.delete(issuer),
        )
        pending.set(issuer, promise)
        return promise
      })
      const key = yield* Effect.promise(() => made)
      return typeof key === "string" ? yield* invalid(issuer, key) : key
    })

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
    authorizationParameters: (server, resourceMetadata) =>
      Effect.gen(function* () {
        const key = yield* keyFor(server.issuer, server.metadata, resourceMetadata)
        return { dpop_jkt: yield* Effect.promise(() => calculateJwkThumbprint(key.publicJwk, "sha256")) }
      }),
    decorate: (request) =>
      Effect.gen(function* () {
        const issuer = request.issuer
        if (issuer === undefined) return
        if (request.kind === "token") {
          return yield* prove(request, yield* keyFor(issuer, request.metadata, request.resourceMetadata))
        }
        // A Bearer token (accepted with `bearerResponse: "accept"`) goes as it is.
        if (request.accessToken === undefined || request.tokenType?.toLowerCase() !== "dpop") return
        const running = pending.get(issuer)
        const found = running === undefined ? yield* keys.get(issuer) : yield* Effect.promise(() => running)
        const key = typeof found === "string" ? undefined : found
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
