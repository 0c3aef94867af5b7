import type { Extension } from "@keyway/authorization-server"
import { Grant, OAuthError } from "@keyway/core"
import { Effect, Result } from "effect"
import { z } from "zod"
import { makeNonces } from "./nonce.js"
import { checkProof, failed } from "./proof.js"

// The client metadata field of RFC 9449 §5.2.
const BOUND_TOKENS = "dpop_bound_access_tokens"

/**
 * Options of {@link dpopAuthorizationServer}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-5 | RFC 9449 §5}
 */
export interface DPoPServerOptions {
  /** The JWS algorithms accepted in proofs, advertised as `dpop_signing_alg_values_supported`; `["ES256"]` by default. */
  readonly algorithms?: ReadonlyArray<string>
  /** How far a proof's `iat` may lie from now, in seconds, either way (RFC 9449 §11.1); 60 by default. */
  readonly window?: number
  /**
   * Whether token requests must carry a proof: `true` for every client, a list of client IDs, or a function of the
   * client ID (undefined for requests without a client). A client registered with `dpop_bound_access_tokens: true`
   * (RFC 9449 §5.2) must, whatever this says. Requests without a proof get Bearer tokens otherwise.
   */
  readonly required?: boolean | ReadonlyArray<string> | ((clientId: string | undefined) => boolean)
  /**
   * Server-issued nonces (RFC 9449 §8): proofs must carry a nonce this server issued, else `use_dpop_nonce` with a
   * fresh `DPoP-Nonce`. The nonces are stateless and rotate every `period` seconds (300 by default), keyed by the
   * server's `sessionSecret` (shared by every instance behind the issuer; a random key per process without one).
   */
  readonly nonce?: boolean | { readonly period?: number }
}

/**
 * The schema of the JSON-expressible {@link DPoPServerOptions} (`required` as a boolean or a list of client IDs), for
 * configuration files.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-5 | RFC 9449 §5}
 */
export const optionsSchema = z.strictObject(
  {
    algorithms: z
      .array(
        z.enum(Grant.ASYMMETRIC_ALGORITHMS as [string, ...Array<string>], {
          error: "must be an asymmetric JWS algorithm",
        }),
        {
          error: "must be an array",
        },
      )
      .min(1, "must name at least one algorithm")
      .optional(),
    window: z.number({ error: "must be a number" }).int().positive().optional(),
    required: z
      .union([z.boolean(), z.array(z.string().min(1, "must not be empty"))], {
        error: "must be a boolean or an array of client IDs",
      })
      .optional(),
    nonce: z
      .union([
        z.boolean(),
        z.strictObject({ period: z.number().int().positive().optional() }, { error: "must be an object" }),
      ])
      .optional(),
  },
  { error: "must be an object" },
)

// RFC 9449 §10: the base64url SHA-256 JWK thumbprint (RFC 7638) of the key the code is bound to.
const THUMBPRINT = /^[A-Za-z0-9_-]{43}$/

const fail = (
  error: "invalid_dpop_proof" | "use_dpop_nonce" | "invalid_request",
  description: string,
  nonce?: string,
) =>
  Effect.fail(
    new OAuthError.OAuthError({
      error,
      error_description: OAuthError.sanitizeDescription(description),
      ...(nonce === undefined ? {} : { headers: { "DPoP-Nonce": nonce } }),
    }),
  )

/**
 * The DPoP extension for `@keyway/authorization-server`: every token request carrying a `DPoP` proof has it checked
 * per RFC 9449 §4.3 (signature with the embedded key, `typ`, `htm` POST, `htu` the token endpoint, `iat` within the
 * window, `jti` used once across instances through the grant store, the nonce when configured), and the access token
 * it issues is bound to the proof's key (`cnf.jkt`, `token_type: DPoP`). The metadata lists
 * `dpop_signing_alg_values_supported`.
 *
 * @example
 * ```ts
 * const server = createAuthorizationServer({ ..., extensions: [dpopAuthorizationServer({ nonce: true })] })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc9449.html#section-5 | RFC 9449 §5}
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/dpop-extension.mdx | MCP DPoP extension}
 */
export const dpopAuthorizationServer = (options: DPoPServerOptions = {}): Extension.AuthorizationServerExtension => {
  const algorithms = options.algorithms ?? ["ES256"]
  const window = options.window ?? 60
  const required = options.required ?? false
  const requiredFor = (clientId: string | undefined) =>
    typeof required === "boolean"
      ? required
      : typeof required === "function"
        ? required(clientId)
        : clientId !== undefined && required.includes(clientId)
  const period = typeof options.nonce === "object" ? (options.nonce.period ?? 300) : 300
  let nonces: ReturnType<typeof makeNonces> | undefined
  return {
    id: Grant.extensions.dpop,
    metadata: () => ({ dpop_signing_alg_values_supported: [...algorithms] }),
    // RFC 9449 §5.2: the client always sends proofs to the token endpoint.
    clientMetadata: { [BOUND_TOKENS]: z.boolean({ error: "must be a boolean" }) },
    // RFC 9449 §6.1: a token confirmed by a key thumbprint is a DPoP token (introspected as such, §6.2).
    confirmations: { jkt: "DPoP" },
    // RFC 9449 §10: `dpop_jkt` binds the code to the key whose proof must accompany its redemption.
    authorizationRequest: (params) => {
      const values = params.getAll("dpop_jkt")
      if (values.length === 0) return Result.succeed(undefined)
      if (values.length > 1) return Result.fail("dpop_jkt is repeated")
      const jkt = values[0] as string
      return THUMBPRINT.test(jkt)
        ? Result.succeed(jkt)
        : Result.fail("dpop_jkt must be the base64url SHA-256 JWK thumbprint of the DPoP key (RFC 9449 §10)")
    },
    validate: () => {
      const bad = algorithms.filter((a) => !Grant.ASYMMETRIC_ALGORITHMS.includes(a))
      if (algorithms.length === 0) return "dpop: algorithms must name at least one JWS algorithm"
      return bad.length === 0
        ? undefined
        : `dpop: ${bad.join(", ")} cannot sign DPoP proofs (asymmetric algorithms only)`
    },
    tokenRequest: ({ config, request, client, now, rememberJti }) =>
      Effect.gen(function* () {
        if (options.nonce !== undefined && options.nonce !== false && nonces === undefined) {
          nonces = makeNonces(config.sessionSecret, period, `keyway/dpop/authorization-server/${config.issuer}`)
        }
        const issuer = nonces
        const header = request.headers.get("dpop")
        if (header === null) {
          if (client?.extension_metadata?.[BOUND_TOKENS] === true) {
            return yield* fail(
              "invalid_dpop_proof",
              "this client registered dpop_bound_access_tokens: every token request must carry a DPoP proof",
            )
          }
          return requiredFor(client?.client_id)
            ? yield* fail("invalid_dpop_proof", "this client must send a DPoP proof with its token requests")
            : undefined
        }
        const result = yield* Effect.promise(() =>
          checkProof(header, {
            method: "POST",
            url: config.endpoints.token,
            algorithms,
            now,
            window,
            ...(issuer === undefined ? {} : { nonce: (nonce: string) => issuer.valid(nonce, now) }),
          }),
        )
        const fresh = issuer === undefined ? undefined : yield* Effect.promise(() => issuer.current(now))
        if (failed(result)) return yield* fail(result.error, result.description, fresh)
        if (!(yield* rememberJti("dpop", result.jti, result.iat + window))) {
          return yield* fail("invalid_dpop_proof", "the DPoP proof was already used", fresh)
        }
        return {
          claims: { cnf: { jkt: result.jkt } },
          tokenType: "DPoP",
          confirmation: result.jkt,
          // RFC 9449 §5: a public client's refresh tokens are bound to its key; a confidential client's are already
          // bound to its credentials.
          bindRefreshTokens: client?.token_endpoint_auth_method === "none",
          ...(fresh === undefined ? {} : { headers: { "DPoP-Nonce": fresh } }),
        }
      }),
  }
}
