/**
 * Token revocation: tells the authorization server that a token is no longer needed (logging out), so that it stops
 * working there too and not only in this client's store. The client authenticates as at the token endpoint.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html | RFC 7009 (OAuth 2.0 Token Revocation)}
 * @module
 */
import * as Effect from "effect/Effect"
import { AuthError } from "./AuthError.js"
import { ClientConfig, type ClientInformation } from "./ClientConfig.js"
import type { DiscoveredAuthorizationServer } from "./Discovery.js"
import { discard, isRecord, readJson, requireSecure, send } from "./internal/http.js"
import { authenticate } from "./TokenEndpoint.js"

/**
 * The kind of token revoked, sent as `token_type_hint`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html#section-2.1 | RFC 7009 §2.1}
 */
export type TokenTypeHint = "refresh_token" | "access_token"

/**
 * Revokes one token at the authorization server's `revocation_endpoint`, authenticating as the client does at the
 * token endpoint. A 200 is success, whatever the token was (RFC 7009 §2.2: the server answers 200 for a token that
 * is already invalid too). Fails with `missing-endpoint` when the metadata names no revocation endpoint, and with
 * `oauth-error` (the OAuth error code and HTTP status) when the server refuses.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html#section-2.1 | RFC 7009 §2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html#section-2.2 | RFC 7009 §2.2}
 */
export const revoke = Effect.fn("Revocation.revoke")(function* (
  server: DiscoveredAuthorizationServer,
  client: ClientInformation,
  token: string,
  hint: TokenTypeHint,
) {
  const config = yield* ClientConfig
  const endpoint = server.metadata.revocation_endpoint
  if (typeof endpoint !== "string") {
    return yield* new AuthError({
      step: "revocation",
      reason: "missing-endpoint",
      url: server.metadataUrl ?? server.issuer,
      message: `the authorization server ${server.issuer} publishes no revocation_endpoint in its metadata, so its tokens cannot be revoked there (RFC 7009); they stay valid until they expire`,
    })
  }
  yield* requireSecure("revocation", endpoint, "the revocation endpoint")
  const body = new URLSearchParams({ token, token_type_hint: hint })
  const headers = new Headers({ "content-type": "application/x-www-form-urlencoded", accept: "application/json" })
  yield* authenticate("revocation", client, server, body, headers)
  const response = yield* send(config.fetch, "revocation", endpoint, {
    method: "POST",
    headers,
    body: body.toString(),
  })
  if (response.status === 200) {
    discard(response)
    return
  }
  // An error body that is not JSON still leaves the status to report.
  const json = yield* readJson("revocation", endpoint, response).pipe(Effect.orElseSucceed(() => undefined))
  const error = isRecord(json) && typeof json.error === "string" ? json.error : undefined
  const description = isRecord(json) && typeof json.error_description === "string" ? json.error_description : ""
  return yield* new AuthError({
    step: "revocation",
    reason: "oauth-error",
    url: endpoint,
    status: response.status,
    ...(error !== undefined ? { error } : {}),
    message: `the revocation endpoint ${endpoint} answered HTTP ${response.status} ${error ?? "without an OAuth error code"}${description !== "" ? `: ${description}` : ""} when revoking the ${hint === "refresh_token" ? "refresh" : "access"} token`,
  })
})
