/**
 * The one error family of the client: every failure names the step of the flow it happened in, the URL involved,
 * a machine-readable reason, and a message that says what to fix.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-flow-steps | MCP authorization flow}
 * @module
 */
import type { TokenResponse } from "@keyway/core"
import * as Schema from "effect/Schema"

/**
 * The step of the flow an error belongs to.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-flow-steps | MCP authorization flow}
 */
export const Step = Schema.Literals([
  "protected-resource-metadata",
  "authorization-server-metadata",
  "registration",
  "authorization",
  "callback",
  "token",
  "refresh",
  "step-up",
  "request",
  "revocation",
])

/** The step of the flow an error belongs to. */
export type Step = typeof Step.Type

/**
 * Why a step failed.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3 | RFC 9728 §3.3} (resource-mismatch),
 * {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3 | RFC 8414 §3.3} (issuer-mismatch),
 * {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4} (iss-*)
 */
export const Reason = Schema.Literals([
  "invalid-input",
  "network-error",
  "http-error",
  "not-found",
  "invalid-json",
  "invalid-document",
  "resource-mismatch",
  "no-authorization-servers",
  "issuer-mismatch",
  "pkce-unsupported",
  "missing-endpoint",
  "insecure-endpoint",
  "registration-failed",
  "no-client",
  "interaction-required",
  "user-agent-failed",
  "redirect-loop",
  "state-missing",
  "state-mismatch",
  "iss-missing",
  "iss-mismatch",
  "iss-unexpected",
  "code-missing",
  "expired",
  "authorization-error",
  "oauth-error",
  "missing-access-token",
  "unsupported-token-type",
  "invalid-grant",
  "step-up-limit",
  "insufficient-scope",
  "unauthorized",
  "cancelled",
])

/** Why a step failed. */
export type Reason = typeof Reason.Type

/**
 * A failure of the MCP authorization flow.
 *
 * `step` and `reason` are stable, `url` is the endpoint or document involved, `message` explains what to fix.
 * `error` carries the OAuth error code when a peer returned one, `status` the HTTP status when one applies.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#error-handling | MCP authorization: error handling}
 */
export class AuthError extends Schema.TaggedError<AuthError>()("AuthError", {
  step: Step,
  reason: Reason,
  url: Schema.String,
  message: Schema.String,
  error: Schema.optionalKey(Schema.String),
  status: Schema.optionalKey(Schema.Number),
}) {}

/** Whether a value is an {@link AuthError}. */
export const isAuthError = (u: unknown): u is AuthError => u instanceof AuthError

/**
 * The error of a token response core's {@link TokenResponse.process} refused: an error response is `invalid-grant`
 * for `invalid_grant` and `oauth-error` otherwise, with its status and code; a token exchange's unexpected
 * `issued_token_type` is `unsupported-token-type`; the other reasons are the same. `message` replaces the problem's.
 */
export const fromTokenResponseProblem = (
  step: Step,
  problem: TokenResponse.TokenResponseProblem,
  message: string = problem.message,
): AuthError =>
  new AuthError({
    step,
    reason:
      problem.reason === "error-response"
        ? problem.error === "invalid_grant"
          ? "invalid-grant"
          : "oauth-error"
        : problem.reason === "unexpected-issued-token-type"
          ? "unsupported-token-type"
          : problem.reason,
    url: problem.url,
    message,
    ...(problem.reason === "error-response" ? { status: problem.status } : {}),
    ...(problem.error === undefined ? {} : { error: problem.error }),
  })
