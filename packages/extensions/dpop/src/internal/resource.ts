import { Challenge } from "@keyway/core"
import type { Presentation } from "@keyway/resource-server"
import { makeNonces } from "./nonce.js"
import { checkProof, failed } from "./proof.js"
import { memoryReplayCache, type ReplayCache } from "./replay.js"

/**
 * Options of {@link dpopScheme}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7 | RFC 9449 §7}
 */
export interface DPoPSchemeOptions {
  /** The JWS algorithms accepted in proofs, advertised as `dpop_signing_alg_values_supported`; `["ES256"]` by default. */
  readonly algorithms?: ReadonlyArray<string>
  /** How far a proof's `iat` may lie from now, in seconds, either way (RFC 9449 §11.1); 60 by default. */
  readonly window?: number
  /** The most `jti` values the in-memory replay cache holds (RFC 9449 §11.1); 100 000 by default. */
  readonly maxReplayEntries?: number
  /**
   * Server-issued nonces (RFC 9449 §9): proofs must carry a nonce this server issued, else the request is refused
   * with `use_dpop_nonce` and a fresh `DPoP-Nonce`. `secret` is shared by every instance behind one resource (a
   * random one per process when omitted); nonces rotate every `period` seconds (300 by default).
   */
  readonly nonce?: { readonly secret?: string; readonly period?: number }
  /**
   * Only DPoP-bound tokens, presented with the DPoP scheme, are accepted: a token presented as Bearer is refused
   * (`invalid_token`), and so is a token without `cnf.jkt` presented as DPoP. Advertised as
   * `dpop_bound_access_tokens_required` in the protected resource metadata (RFC 9728 §2). False by default.
   */
  readonly boundTokensRequired?: boolean
  /**
   * The public origin of the resource, when requests reach the server with origin-form URLs or behind a proxy that
   * rewrites the host: `htu` is compared with this origin and the request's path. The request's own URL by default.
   */
  readonly publicOrigin?: string
  /** The clock, milliseconds since the epoch (tests drive it); `Date.now` by default. */
  readonly now?: () => number
  /**
   * Where seen `jti` values are kept (RFC 9449 §11.1): an in-memory cache bounded by `maxReplayEntries` by default,
   * which only this process sees. Instances behind one resource share one store, so that a proof accepted by one is
   * refused by the others: `sqliteReplayCache` (processes on one machine) or `postgresReplayCache` (several machines)
   * of `@keyway/ext-dpop/node`, or your own.
   */
  readonly replayCache?: ReplayCache
}

const replayed: Presentation.PresentationRefusal = {
  error: "invalid_dpop_proof",
  description: "the DPoP proof was already used",
}

const jktOf = (claims: Readonly<Record<string, unknown>>): string | undefined => {
  const cnf = claims.cnf
  if (typeof cnf !== "object" || cnf === null) return undefined
  const jkt = (cnf as { jkt?: unknown }).jkt
  return typeof jkt === "string" ? jkt : undefined
}

/**
 * The DPoP presentation scheme for `@keyway/resource-server`: `Authorization: DPoP <token>` with a `DPoP` proof
 * header, checked per RFC 9449 §4.3 and §7.1 (signature, `typ`, `htm`, `htu` against the request URL, `iat` within
 * the window, `ath` the hash of the token, `jti` not seen before, the nonce when configured) and signed by the key the
 * token is bound to (`cnf.jkt`). A bound token presented as Bearer is refused (RFC 9449 §7.2); every 401 offers a
 * `DPoP` challenge with `algs` beside Bearer's.
 *
 * @example
 * ```ts
 * const resource = createProtectedResource({ ..., presentationSchemes: [dpopScheme({ algorithms: ["ES256"] })] })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-7 | RFC 9449 §7}
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 */
export const dpopScheme = (options: DPoPSchemeOptions = {}): Presentation.PresentationScheme => {
  const algorithms = options.algorithms ?? ["ES256"]
  const window = options.window ?? 60
  const clock = options.now ?? Date.now
  const replay = options.replayCache ?? memoryReplayCache(options.maxReplayEntries ?? 100_000)
  const nonces =
    options.nonce === undefined
      ? undefined
      : makeNonces(options.nonce.secret, options.nonce.period ?? 300, "keyway/dpop/resource-server")
  const algs = algorithms.join(" ")
  return {
    scheme: "DPoP",
    binds: (token) => jktOf(token.claims) !== undefined,
    required: options.boundTokensRequired === true,
    confirm: async (request, token, accessToken) => {
      const jkt = jktOf(token.claims)
      if (jkt === undefined) {
        return { error: "invalid_token", description: "The access token is not bound to a DPoP key" }
      }
      const now = Math.floor(clock() / 1000)
      const url =
        options.publicOrigin === undefined
          ? new URL(request.url, "http://invalid").href
          : new URL(new URL(request.url, "http://invalid").pathname, options.publicOrigin).href
      const result = await checkProof(request.header?.("dpop"), {
        method: request.method,
        url,
        algorithms,
        now,
        window,
        accessToken,
        jkt,
        ...(nonces === undefined ? {} : { nonce: (nonce: string) => nonces.valid(nonce, now) }),
      })
      if (failed(result)) {
        return {
          error: result.error,
          description: result.description,
          ...(nonces === undefined ? {} : { headers: { "DPoP-Nonce": await nonces.current(now) } }),
        }
      }
      // Last, so only proofs that pass every other check take a place in the store; the memory cache answers at once.
      const remembered = replay.remember(result.jti, result.iat + window, now)
      return (typeof remembered === "boolean" ? remembered : await remembered) ? undefined : replayed
    },
    challenge: ({ resourceMetadata, realm, scope, error, description }) =>
      Challenge.formatDPoP({
        ...(realm === undefined ? {} : { realm }),
        resource_metadata: resourceMetadata,
        ...(scope === undefined ? {} : { scope }),
        algs,
        ...(error === undefined ? {} : { error }),
        ...(description === undefined ? {} : { error_description: description }),
      }),
    metadata: {
      dpop_signing_alg_values_supported: [...algorithms],
      ...(options.boundTokensRequired === true ? { dpop_bound_access_tokens_required: true } : {}),
    },
  }
}
