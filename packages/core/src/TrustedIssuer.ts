/**
 * An external issuer of JWTs whose signatures an authorization server trusts (a workload issuer, an enterprise
 * identity provider): its identifier and where its public keys are. One type, one schema and one transport rule for
 * every extension that trusts such issuers; the extensions add what they admit on top.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @module
 */
import { z } from "zod"
import * as Jwk from "./Jwk.js"
import * as SecureUrl from "./SecureUrl.js"

/**
 * A trusted issuer: the `iss` of its JWTs and its public keys, published at `jwksUri` or given inline as `jwks`
 * (exactly one of them).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export interface TrustedIssuer {
  /** The `iss` of the issuer's JWTs, compared exactly. */
  readonly issuer: string
  /**
   * Where the issuer publishes its JWK Set: https (http only on a loopback host, as a development allowance, see
   * `transportProblem`). Fetched on first use, cached, fetched again for an unknown `kid`.
   */
  readonly jwksUri?: string
  /** The issuer's public keys, inline (a JWK Set), instead of `jwksUri`. */
  readonly jwks?: { readonly keys: ReadonlyArray<Readonly<Record<string, unknown>>> }
}

const nonEmpty = z.string({ error: "must be a string" }).min(1, "must not be empty")
const anObject = { error: "must be an object" }

/**
 * The members of {@link TrustedIssuer} as zod fields, for a schema that adds its own members to them.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const fields = {
  issuer: nonEmpty,
  jwksUri: nonEmpty.optional(),
  jwks: z
    .object(
      {
        keys: z
          .array(z.record(z.string(), z.unknown()), { error: "must be an array" })
          .min(1, "must hold at least one key"),
      },
      anObject,
    )
    .optional(),
}

/**
 * Options of {@link schemaWith}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export interface SchemaOptions {
  /**
   * Where "give exactly one of jwksUri and jwks" is reported: at the issuer's `jwksUri` (the default) or at the
   * issuer itself.
   */
  readonly exactlyOneAt?: "jwksUri" | "issuer"
}

/**
 * The schema of {@link TrustedIssuer}: a strict object of {@link fields} with one refinement, which refuses an issuer
 * with both or neither of `jwksUri` and `jwks`, and inline keys holding private or symmetric key material
 * ({@link Jwk.findPrivateKeyMaterial}, reported at the member). Extend it with `safeExtend`, which keeps the
 * refinement. The transport of `jwksUri` depends on a development allowance the issuer does not hold: see
 * {@link transportProblem}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-9.2 | RFC 7517 §9.2 (private key material)}
 */
export const schemaWith = (options: SchemaOptions = {}) =>
  z.strictObject(fields, anObject).superRefine((issuer, ctx) => {
    if ((issuer.jwksUri === undefined) === (issuer.jwks === undefined)) {
      ctx.addIssue({
        code: "custom",
        path: options.exactlyOneAt === "issuer" ? [] : ["jwksUri"],
        message: "give exactly one of jwksUri and jwks",
      })
    }
    const found = issuer.jwks === undefined ? undefined : Jwk.findPrivateKeyMaterial(issuer.jwks)
    if (found !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["jwks", ...found.path.split(".").map((part) => (/^\d+$/.test(part) ? Number(part) : part))],
        message: found.problem,
      })
    }
  })

/**
 * {@link schemaWith} with its defaults: "give exactly one of jwksUri and jwks" is reported at `jwksUri`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const schema = schemaWith()

/**
 * Options of {@link transportProblem}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-8.3 | RFC 8252 §8.3}
 */
export interface TransportOptions {
  /** The development allowance is on: plain http to a loopback host is accepted. */
  readonly allowHttpLoopback?: boolean
  /** The name of that allowance in the caller's options, for the message; `development.allowHttpLoopbackJwks`. */
  readonly allowance?: string
}

/**
 * What is wrong with the transport of a `jwksUri`, or undefined when it may be fetched: https always; http on a
 * loopback host only with the development allowance (the caller warns when it is on); nothing else. Keys fetched
 * over plain http could be replaced on the way, and with them every signature they verify.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-9.1 | RFC 7517 §9.1 (key provenance and trust)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-8.3 | RFC 8252 §8.3 (loopback)}
 */
export const transportProblem = (jwksUri: string, options: TransportOptions = {}): string | undefined => {
  const transport = SecureUrl.transportOf(jwksUri)
  if (transport === "https") return undefined
  if (transport === "http-loopback") {
    if (options.allowHttpLoopback === true) return undefined
    const allowance = options.allowance ?? "development.allowHttpLoopbackJwks"
    return `must use https; set ${allowance} to fetch keys over http from a loopback host`
  }
  return "must be an https URL"
}
