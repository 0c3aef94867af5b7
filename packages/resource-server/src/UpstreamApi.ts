/**
 * Calls to upstream APIs made by a protected MCP server. The server acts as an OAuth client of the upstream with
 * its own token (client credentials grant) and refuses to send the token it received: MCP forbids token
 * passthrough.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.2 | OAuth 2.1 §4.2 (client credentials)}
 */
import { ClientAuth, Passthrough, TokenResponse } from "@keyway/core"
import { Cache, Cause, Duration, Effect, Exit, Result, Schema } from "effect"
import type { Authenticated } from "./ProtectedResource.js"

/**
 * The request would carry the inbound access token (or a caller-chosen Authorization header) upstream; it is not
 * sent.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#token-passthrough | MCP: Token Passthrough}
 */
export class TokenPassthroughRefused extends Schema.TaggedError<TokenPassthroughRefused>()("TokenPassthroughRefused", {
  /** Where the token was found: "authorization", "url", "header" or "body". */
  where: Schema.Literals(["authorization", "url", "header", "body"]),
}) {
  override get message(): string {
    return this.where === "authorization"
      ? "Refusing to send a caller-supplied Authorization header upstream: the upstream client uses its own token"
      : `Refusing to send the inbound access token upstream (found in the ${this.where})`
  }
}

/**
 * The upstream authorization server did not issue a token.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2}
 */
export class UpstreamTokenError extends Schema.TaggedError<UpstreamTokenError>()("UpstreamTokenError", {
  status: Schema.Number,
  error: Schema.String,
  description: Schema.optional(Schema.String),
}) {
  override get message(): string {
    return `The upstream token endpoint answered ${this.status} ${this.error}${this.description === undefined ? "" : `: ${this.description}`}`
  }
}

/**
 * Options of {@link createUpstreamApiClient}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4 | RFC 6749 §4.4}
 */
export interface UpstreamApiClientOptions {
  /** The upstream authorization server's token endpoint. */
  readonly tokenEndpoint: string
  readonly clientId: string
  readonly clientSecret: string
  /** How to authenticate at the token endpoint. Default `client_secret_basic`. */
  readonly authMethod?: "client_secret_basic" | "client_secret_post"
  /** Scopes to request. */
  readonly scopes?: ReadonlyArray<string>
  /** RFC 8707 `resource` of the upstream API. */
  readonly resource?: string
  /** Renew this many seconds before `expires_in` runs out. Default 30. */
  readonly renewBeforeSeconds?: number
  /** The fetch to use; the global one by default. */
  readonly fetch?: typeof globalThis.fetch
}

/**
 * A fetch for upstream APIs that authenticates with the server's own token.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#access-token-privilege-restriction | MCP: Access Token Privilege Restriction}
 */
export interface UpstreamApiClient {
  /**
   * Sends the request with the server's own Bearer token. Pass the inbound authentication as `inbound`: the call
   * is refused with {@link TokenPassthroughRefused} if that token appears anywhere in the request. A caller-supplied
   * Authorization header is always refused.
   */
  readonly fetch: (input: string | URL, init?: RequestInit, inbound?: Authenticated | string) => Promise<Response>
  /** The current upstream access token (fetched or renewed as needed). */
  readonly token: () => Promise<string>
}

const formEncode = ClientAuth.formUrlEncode

/**
 * Creates an {@link UpstreamApiClient}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4 | RFC 6749 §4.4}
 */
export const createUpstreamApiClient = (options: UpstreamApiClientOptions): UpstreamApiClient => {
  const doFetch = options.fetch ?? globalThis.fetch
  const renewMs = (options.renewBeforeSeconds ?? 30) * 1000

  const requestToken = async (): Promise<{ readonly token: string; readonly lifetimeMs: number }> => {
    const form = [`grant_type=client_credentials`]
    if (options.scopes !== undefined && options.scopes.length > 0)
      form.push(`scope=${formEncode(options.scopes.join(" "))}`)
    if (options.resource !== undefined) form.push(`resource=${formEncode(options.resource)}`)
    const auth = ClientAuth.apply(options.authMethod ?? "client_secret_basic", {
      clientId: options.clientId,
      clientSecret: options.clientSecret,
    })
    const headers: Record<string, string> = {
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
      ...auth.headers,
    }
    for (const [name, value] of Object.entries(auth.form)) form.push(`${name}=${formEncode(value)}`)
    const response = await doFetch(options.tokenEndpoint, {
      method: "POST",
      headers,
      body: form.join("&"),
      redirect: "manual",
    })
    const json: unknown = await response.json().catch(() => undefined)
    const processed = TokenResponse.process(options.tokenEndpoint, response.status, json)
    if (Result.isFailure(processed)) {
      const problem = processed.failure
      // An error response is reported as the endpoint gave it; any other problem as invalid_response, saying why.
      const description = problem.reason === "error-response" ? problem.description : problem.message
      throw new UpstreamTokenError({
        status: response.status,
        error: problem.error ?? "invalid_response",
        ...(description === undefined ? {} : { description }),
      })
    }
    return {
      token: processed.success.access_token,
      lifetimeMs: processed.success.expires_in === undefined ? 300_000 : processed.success.expires_in * 1000,
    }
  }

  // The one upstream token: fetched once for concurrent callers, kept until `renewBeforeSeconds` before it expires
  // (by the Effect Clock), never kept after a failure.
  const tokens = Effect.runSync(
    Cache.makeWith((_: "token") => Effect.tryPromise({ try: requestToken, catch: (error) => error }), {
      capacity: 1,
      timeToLive: (exit) => (Exit.isSuccess(exit) ? Duration.millis(Math.max(0, exit.value.lifetimeMs - renewMs)) : 0),
    }),
  )
  // A failure rejects with what the token request threw (UpstreamTokenError, or the fetch error).
  const run = <A>(effect: Effect.Effect<A, unknown>): Promise<A> =>
    Effect.runPromiseExit(effect).then((exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      throw Cause.squash(exit.cause)
    })

  const token = (): Promise<string> => run(Effect.map(Cache.get(tokens, "token"), (t) => t.token))
  const renew = (): Promise<void> => run(Cache.invalidate(tokens, "token"))

  const upstreamFetch = async (
    input: string | URL,
    init: RequestInit = {},
    inbound?: Authenticated | string,
  ): Promise<Response> => {
    const headers = new Headers(init.headers)
    if (headers.has("authorization")) throw new TokenPassthroughRefused({ where: "authorization" })
    const inboundToken = typeof inbound === "string" ? inbound : inbound?.accessToken
    if (inboundToken !== undefined) {
      const found = Passthrough.find(inboundToken, { url: input, headers, body: init.body })
      if (found !== undefined) throw new TokenPassthroughRefused({ where: found })
    }
    const send = async (): Promise<Response> => {
      const own = await token()
      if (own === inboundToken) throw new TokenPassthroughRefused({ where: "authorization" })
      const outgoing = new Headers(headers)
      outgoing.set("authorization", `Bearer ${own}`)
      return doFetch(input, { ...init, headers: outgoing })
    }
    const response = await send()
    const replayable = init.body === undefined || init.body === null || typeof init.body === "string"
    if (response.status === 401 && replayable) {
      // The upstream may have revoked or rotated our token early: get a new one once. The body is let go of, never
      // waited for: a caller's fetch that keeps a clone (a logging wrapper) holds its cancellation open.
      response.body?.cancel().catch(() => undefined)
      await renew()
      return send()
    }
    return response
  }

  return { fetch: upstreamFetch, token }
}
