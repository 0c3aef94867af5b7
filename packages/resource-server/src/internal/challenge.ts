/**
 * The refusals of the protected resource as framework-neutral {@link Rejection}s: 401/403/400 with their Bearer
 * challenge (RFC 6750 §3, `resource_metadata` of RFC 9728 §5.1, the challenge scopes MCP describes), the JSON-RPC 400
 * for a body whose operations cannot be read, and the 413 for a body over the limit.
 */
import { Challenge, OAuthError, Scope } from "@keyway/core"
import { PayloadTooLarge } from "@keyway/http"
import type { PresentationScheme } from "../Presentation.js"
import type { Rejection } from "../ProtectedResource.js"
import type { Config } from "./config.js"
import type { Cors } from "./cors.js"
import { errorBody, type OperationScan } from "./jsonrpc.js"

/**
 * `error_description` of a request whose access token is in the URI query (RFC 6750 §2.3).
 */
/** The error codes of RFC 6750 §3.1, answered with their own statuses (400, 401, 403). */
const PROTECTED_RESOURCE_CODES: ReadonlySet<string> = new Set([
  "invalid_request",
  "invalid_token",
  "insufficient_scope",
])

export const queryTokenDescription = "Access tokens are accepted only in the Authorization header, not in the URI query"

/**
 * `error_description` of a request whose access token is in a form-encoded body (RFC 6750 §2.2).
 */
export const bodyTokenDescription =
  "Access tokens are accepted only in the Authorization header, not in the request body"

/**
 * `error_description` of 403 `insufficient_scope` answers (RFC 6750 §3.1).
 */
export const insufficientDescription = "The access token does not grant the scopes this request needs"

/** A scan of the body that found no operations to check. */
export type ScanFailure = Exclude<OperationScan, { _tag: "Operations" }>

export interface Refusals {
  /**
   * A refusal with a Bearer challenge. The status follows from the error code; no code means no token was presented
   * (RFC 6750 §3.1): 401.
   */
  readonly reject: (
    origin: string | null | undefined,
    error: Rejection["error"],
    description: string | undefined,
    scopes: ReadonlyArray<string> | undefined,
    presented?: PresentationScheme,
    extraHeaders?: Readonly<Record<string, string>>,
  ) => Rejection
  /** The scopes a challenge names for `required`, by the configured strategy. */
  readonly challengeScopes: (required: ReadonlyArray<string>, granted: ReadonlyArray<string>) => ReadonlyArray<string>
  /** 400 with the JSON-RPC error body, no challenge: the caller is authenticated. */
  readonly badJsonRpc: (scan: ScanFailure, origin: string | null | undefined) => Rejection
  /** 413 for a body over `maxBodyBytes`, as a JSON-RPC error; the connection is closed. */
  readonly tooLarge: (origin: string | null | undefined) => Rejection
}

export const makeRefusals = (config: Config, cors: Cors): Refusals => {
  const challengeScopes = (required: ReadonlyArray<string>, granted: ReadonlyArray<string>): ReadonlyArray<string> => {
    if (config.strategy === "minimal") return required
    const kept = granted.filter((s) => config.known.has(s))
    const recommended = Scope.union(kept, required)
    if (config.strategy === "recommended") return recommended
    const related: Array<string> = []
    for (const scope of required) for (const r of config.related.get(scope) ?? []) related.push(r)
    return Scope.union(recommended, related)
  }

  const reject: Refusals["reject"] = (origin, error, description, scopes, presented, extraHeaders) => {
    // RFC 6750 §3.1's codes carry their statuses; a presentation scheme's own errors (invalid_dpop_proof,
    // use_dpop_nonce: RFC 9449 §7.1, §9) are 401s, like invalid_token.
    const status = (
      error !== undefined && PROTECTED_RESOURCE_CODES.has(error) && OAuthError.isErrorCode(error)
        ? OAuthError.statusOf(error)
        : 401
    ) as Rejection["status"]
    const scope = scopes === undefined || scopes.length === 0 ? undefined : Scope.format(scopes)
    const params: Challenge.BearerParams = {
      ...(config.realm === undefined ? {} : { realm: config.realm }),
      resource_metadata: config.resourceMetadataUrl,
      ...(scope === undefined ? {} : { scope }),
      ...(error === undefined ? {} : { error }),
      ...(description === undefined ? {} : { error_description: description }),
    }
    let challenge = Challenge.formatBearer(params)
    if (presented !== undefined) {
      // The token came with this scheme: its challenge alone carries the answer.
      challenge = presented.challenge({
        resourceMetadata: config.resourceMetadataUrl,
        ...(config.realm === undefined ? {} : { realm: config.realm }),
        ...(scope === undefined ? {} : { scope }),
        ...(error === undefined ? {} : { error }),
        ...(description === undefined ? {} : { description }),
      })
    } else if (status === 401) {
      for (const scheme of config.schemes) {
        challenge += `, ${scheme.challenge({
          resourceMetadata: config.resourceMetadataUrl,
          ...(config.realm === undefined ? {} : { realm: config.realm }),
          ...(scope === undefined ? {} : { scope }),
        })}`
      }
    }
    const headers: Record<string, string> = {
      ...extraHeaders,
      "www-authenticate": challenge,
      "cache-control": "no-store",
    }
    let body = ""
    if (error !== undefined) {
      headers["content-type"] = "application/json"
      body = JSON.stringify(description === undefined ? { error } : { error, error_description: description })
    }
    cors.headers(origin, headers)
    return {
      status,
      ...(error === undefined ? {} : { error }),
      ...(description === undefined ? {} : { description }),
      ...(scope === undefined ? {} : { scope }),
      headers,
      body,
    }
  }

  const badJsonRpc: Refusals["badJsonRpc"] = (scan, origin) => {
    const headers: Record<string, string> = { "content-type": "application/json", "cache-control": "no-store" }
    cors.headers(origin, headers)
    return { status: 400, headers, body: errorBody(scan) }
  }

  const tooLarge: Refusals["tooLarge"] = (origin) => {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "cache-control": "no-store",
      connection: "close",
    }
    cors.headers(origin, headers)
    const message = new PayloadTooLarge({ limit: config.maxBodyBytes }).message
    return {
      status: 413,
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message } }),
    }
  }

  return { reject, challengeScopes, badJsonRpc, tooLarge }
}

/** A {@link Rejection} as a Web `Response`. */
export const toResponse = (rejection: Rejection): Response =>
  new Response(rejection.body === "" ? null : rejection.body, {
    status: rejection.status,
    headers: rejection.headers,
  })
