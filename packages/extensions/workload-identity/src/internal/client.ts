import { KeywayAuthError as AuthError, type Extension } from "@keyway/client"
import { Grant } from "@keyway/core"
import { Effect } from "effect"

/**
 * What an assertion is minted for: the authorization server (its issuer identifier and token endpoint, either of
 * which the server accepts as the `aud`) and the MCP server the token is for.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3 item 3}
 */
export interface AssertionContext {
  /** The authorization server's issuer identifier. */
  readonly issuer: string
  /** The authorization server's token endpoint URL (the audience the extension names). */
  readonly tokenEndpoint: string
  /** The MCP server's resource identifier (RFC 8707). */
  readonly resource: string
}

/**
 * Where the workload's JWT comes from: a fixed string, or a function asked for one at every token request (for
 * example one that mints a JWT for the given audience, or `assertionFile` of the `./node` entry, which reads a
 * rotated token file).
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx#jwt-provisioning | MCP WIF: JWT provisioning}
 */
export type AssertionSource = string | ((context: AssertionContext) => string | Promise<string>)

/**
 * Options of {@link workloadIdentity}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 */
export interface WorkloadIdentityOptions {
  /** The workload's JWT. */
  readonly assertion: AssertionSource
}

/** How many rejected assertions are remembered (the oldest is forgotten first). */
const REMEMBERED = 64

const trailer = "; the workload assertion is not sent again (a rejected assertion is never replayed)"

/**
 * The workload identity federation extension of the client: tokens are obtained with
 * `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, the workload's JWT as `assertion`, `resource`, and
 * `scope` when one is selected; without client ID or client authentication. It is unattended (a token is obtained
 * again before the current one expires) and does not step up on `insufficient_scope`.
 *
 * Each assertion gets one attempt: once the authorization server refused it (or the request failed), the same
 * assertion is never sent again; asking for a token with it fails with `AuthError` reason `invalid-grant` and no
 * `status`, without a request, until the source gives a new one. A refusal is the `AuthError` of the token request,
 * its `error` the server's code (`invalid_grant`, `invalid_scope`, `unauthorized_client`, `invalid_target`, ...),
 * and it is never followed by another grant: with this extension the client never falls back to the authorization
 * code flow.
 *
 * Add it with `createAuthClient({ extensions: [workloadIdentity(...)] })` or, on the Effect face,
 * `Extension.Extensions.layer([workloadIdentity(...)])`; declare it to MCP servers with `Extension.capabilities`.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx | MCP workload identity federation}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.1 | RFC 7523 §2.1}
 */
export const workloadIdentity = (options: WorkloadIdentityOptions): Extension.ClientExtension => {
  const rejected = new Set<string>()
  const remember = (assertion: string) => {
    rejected.add(assertion)
    for (const oldest of rejected) {
      if (rejected.size <= REMEMBERED) break
      rejected.delete(oldest)
    }
  }
  const source = options.assertion

  const acquire = Effect.fn("WorkloadIdentity.acquire")(function* (context: Extension.AcquireContext) {
    const tokenEndpoint = context.server.metadata.token_endpoint as string
    const fail = (message: string) =>
      new AuthError({ step: "token", reason: "invalid-input", url: tokenEndpoint, message })
    const assertion =
      typeof source === "string"
        ? source
        : yield* Effect.tryPromise({
            try: async () => source({ issuer: context.server.issuer, tokenEndpoint, resource: context.resource }),
            catch: (cause) =>
              fail(
                `the workload assertion could not be obtained: ${cause instanceof Error ? cause.message : String(cause)}`,
              ),
          })
    if (typeof assertion !== "string" || assertion.trim() === "") {
      return yield* fail("the workload assertion source gave no JWT")
    }
    const jwt = assertion.trim()
    if (rejected.has(jwt)) {
      return yield* new AuthError({
        step: "token",
        reason: "invalid-grant",
        url: tokenEndpoint,
        message: `the authorization server ${context.server.issuer} already refused this workload assertion and it is never sent twice; a new assertion is needed (mint one, or wait for the platform to rotate the token)`,
      })
    }
    const body = new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion: jwt, resource: context.resource })
    if (context.scope !== undefined) body.set("scope", context.scope)
    const response = yield* context.tokenRequest(body).pipe(
      Effect.mapError((error) => {
        remember(jwt)
        return new AuthError({
          step: error.step,
          reason: error.reason,
          url: error.url,
          message: `${error.message}${trailer}`,
          ...(error.error === undefined ? {} : { error: error.error }),
          ...(error.status === undefined ? {} : { status: error.status }),
        })
      }),
    )
    return { response, ...(context.scope === undefined ? {} : { requestedScope: context.scope }) }
  })

  return {
    id: Grant.extensions.workloadIdentity,
    strategy: { unattended: true, stepUp: false, acquire },
  }
}
