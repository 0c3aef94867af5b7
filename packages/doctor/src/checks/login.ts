/**
 * The login stage (only with `--login`): the whole authorization flow as an MCP client runs it, then what the token
 * says (audience, issuer, scope, lifetime), what the MCP server does with it (a 403 for a tool that needs more
 * scope, an audience check) and the refresh.
 *
 * @module
 */
import { Authorization, createAuthClient, type Discovery, type TokenStore, UserAgent } from "@keyway/client"
import { Challenge, Revision, Scope, Wire } from "@keyway/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { CheckEntry, Exchange, Finding, Status } from "../Finding.js"
import type { Seen } from "../Probe.js"
import type { Stage, Walk } from "../Walk.js"

const MCP_AUTH = "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization"

/** The checks of this stage. */
export const catalog: Readonly<Record<string, CheckEntry>> = {
  "login.flow": {
    title: "The authorization code flow completes",
    why: "Discovery, registration, the authorization request with PKCE and resource, the sign-in and the code exchange must all work for any MCP client to get a token (MCP authorization flow).",
    fix: "Follow the failing step named in the detail; the other findings say which rule it breaks.",
    spec: `${MCP_AUTH}#authorization-flow-steps`,
  },
  "token.audience": {
    title: "The access token's audience is the MCP server",
    why: "MCP servers MUST accept only tokens issued for them (RFC 8707 audience); a token whose aud is not the canonical server URI is refused by a correct server, or, accepted, can be replayed elsewhere.",
    fix: "Issue tokens with aud set to the resource the client requested.",
    spec: `${MCP_AUTH}#token-audience-binding-and-validation`,
  },
  "token.issuer": {
    title: "The access token names its issuer",
    why: "Resource servers check iss against the authorization servers their metadata lists (RFC 9068 §4); a token with another iss is refused.",
    fix: "Sign access tokens with iss equal to the authorization server's issuer identifier.",
    spec: "https://www.rfc-editor.org/rfc/rfc9068.html#section-2.2",
  },
  "token.scope": {
    title: "The token carries a granted scope",
    why: "Clients and servers decide which tools can be called from the granted scope; a token without one makes every scoped tool answer 403 (RFC 6749 §3.3).",
    fix: "Return scope in the token response and in the token, with what the user granted.",
    spec: "https://www.rfc-editor.org/rfc/rfc6749.html#section-3.3",
  },
  "token.lifetime": {
    title: "The access token is short-lived (one hour or less)",
    why: "Public clients hold bearer tokens on user devices; OAuth 2.1 asks for short-lived access tokens with refresh, and a token without expires_in leaves clients guessing (RFC 6749 §5.1).",
    fix: "Issue access tokens for an hour or less with expires_in, and refresh tokens for longer sessions.",
    spec: "https://www.rfc-editor.org/rfc/rfc9700.html#section-2.2.2",
  },
  "mcp.authorized": {
    title: "The MCP server answers initialize and tools/list with the token",
    why: "A server that refuses its own authorization server's token leaves every client in a 401 loop (MCP access token usage).",
    fix: "Accept tokens for the canonical server URI from the authorization servers the metadata lists.",
    spec: `${MCP_AUTH}#access-token-usage`,
  },
  "mcp.audience-check": {
    title: "The MCP server refuses a token for another resource (with --other-resource)",
    why: "MCP servers MUST validate that tokens were issued for them; one that accepts any token of its authorization server is open to token passthrough and confused deputy attacks (MCP security best practices). The doctor obtains a token for the other resource given with --other-resource (served by the same authorization server) and presents it: the server must answer 401 invalid_token (RFC 6750 §3.1).",
    fix: "Verify the token's aud (or the introspection's aud) equals the server's canonical URI.",
    spec: `${MCP_AUTH}#token-audience-binding-and-validation`,
  },
  "mcp.insufficient-scope": {
    title: "A tool needing more scope answers 403 insufficient_scope with scope",
    why: "From 2025-11-25 clients step up on a 403 whose challenge has error=insufficient_scope and scope; without them the user is stuck with a tool that never works (RFC 6750 §3.1).",
    fix: 'Answer 403 with WWW-Authenticate: Bearer error="insufficient_scope", scope="<needed scopes>".',
    spec: `${MCP_AUTH}#scope-challenge-handling`,
  },
  "token.refresh": {
    title: "The refresh token works and rotates",
    why: "OAuth 2.1 §4.3.1 requires refresh tokens of public clients to be sender-constrained or rotated; without a working refresh users sign in again every hour.",
    fix: "Issue a new refresh token with every refresh of a public client and revoke the old one.",
    spec: "https://www.rfc-editor.org/rfc/rfc9700.html#section-4.14.2",
  },
}

type UserAgentService = UserAgent.UserAgent["Service"]

const finding = (
  walk: Walk,
  check: string,
  status: Status,
  detail: string,
  exchanges: ReadonlyArray<Exchange> = [],
  revisions: ReadonlyArray<Revision.Revision> = walk.revisions,
): Finding => ({ check, status, server: walk.target, revisions, detail, exchanges })

/** An exchange without its body, for answers that carry tokens. */
const withoutBody = (exchange: Exchange): Exchange => {
  const { body: _body, ...rest } = exchange
  return rest
}

/** The claims of a JWT, undefined for an opaque token. */
const claimsOf = (token: string): Record<string, unknown> | undefined => {
  const parts = token.split(".")
  if (parts.length !== 3 || parts[1] === undefined) return undefined
  try {
    const text = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/"))
    const value: unknown = JSON.parse(new TextDecoder().decode(Uint8Array.from(text, (c) => c.charCodeAt(0))))
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined
  } catch {
    return undefined
  }
}

/** A recording fetch for the client: each exchange kept without bodies (they carry codes and tokens). */
const recordingFetch = (walk: Walk, kept: Array<Exchange>): typeof globalThis.fetch => {
  const base = walk.options.fetch ?? globalThis.fetch
  return async (input, init) => {
    const url = input instanceof Request ? input.url : String(input)
    const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase()
    try {
      const response = await base(input, init)
      kept.push({ method, url: url.split("?")[0] ?? url, status: response.status })
      return response
    } catch (e) {
      kept.push({ method, url: url.split("?")[0] ?? url, error: e instanceof Error ? e.message : String(e) })
      throw e
    }
  }
}

/**
 * The revision the MCP requests speak: the newest selected one with the initialize handshake (2026-07-28 replaces
 * it with a per-request envelope), 2025-11-25 when only 2026-07-28 is selected.
 */
const handshakeRevision = (walk: Walk): Revision.Revision =>
  walk.revisions.filter((r) => Revision.compare(r, "2025-11-25") <= 0).at(-1) ?? "2025-11-25"

const mcpRequest = (walk: Walk, token: string, body: Record<string, unknown>, revision: Revision.Revision) =>
  walk.probe.send(walk.target, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
      "mcp-protocol-version": revision,
    },
    body: JSON.stringify({ jsonrpc: "2.0", ...body }),
  })

/** The JSON-RPC message of an answer, JSON or a one-event stream. */
const messageOf = (seen: Seen): Record<string, unknown> | undefined => {
  if (typeof seen.json === "object" && seen.json !== null) return seen.json as Record<string, unknown>
  const data = /^data: ?([^\r\n]*)/m.exec(seen.text)?.[1]
  if (data === undefined) return undefined
  try {
    return JSON.parse(data) as Record<string, unknown>
  } catch {
    return undefined
  }
}

/** Tools whose input schema requires arguments: called with none, they are refused before they run. */
const toolsRequiringArguments = (listed: Record<string, unknown> | undefined): ReadonlyArray<string> => {
  const tools = (listed?.result as { tools?: unknown } | undefined)?.tools
  if (!Array.isArray(tools)) return []
  return tools.flatMap((tool: { name?: unknown; inputSchema?: { required?: unknown } }) =>
    typeof tool.name === "string" && Array.isArray(tool.inputSchema?.required) && tool.inputSchema.required.length > 0
      ? [tool.name]
      : [],
  )
}

const tokenChecks = (walk: Walk, tokens: TokenStore.Tokens, now: number, findings: Array<Finding>) => {
  const claims = claimsOf(tokens.access_token)
  if (claims === undefined) {
    findings.push(
      finding(
        walk,
        "token.audience",
        "warn",
        "the access token is opaque (not a JWT): its audience cannot be read here; the MCP server checks below show whether it is bound",
      ),
    )
  } else {
    const aud = claims.aud
    const audiences = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : []
    findings.push(
      finding(
        walk,
        "token.audience",
        audiences.includes(tokens.resource) ? "pass" : "fail",
        audiences.includes(tokens.resource)
          ? `aud is ${JSON.stringify(aud)}, the resource ${tokens.resource}`
          : `aud is ${JSON.stringify(aud ?? null)} but the token was requested for ${tokens.resource}`,
      ),
    )
    findings.push(
      finding(
        walk,
        "token.issuer",
        claims.iss === tokens.issuer ? "pass" : "fail",
        claims.iss === tokens.issuer
          ? `iss is "${tokens.issuer}"`
          : `iss is ${JSON.stringify(claims.iss ?? null)} but the token came from ${tokens.issuer}`,
      ),
    )
  }
  findings.push(
    finding(
      walk,
      "token.scope",
      tokens.scope === "" ? "warn" : "pass",
      tokens.scope === "" ? "the token response granted no scope" : `granted scope "${tokens.scope}"`,
    ),
  )
  // Rule: public clients should hold access tokens for an hour at most; no lifetime at all is a warning too.
  const lifetime = tokens.expires_at === undefined ? undefined : Math.round((tokens.expires_at - now) / 1000)
  findings.push(
    finding(
      walk,
      "token.lifetime",
      lifetime !== undefined && lifetime <= 3600 ? "pass" : "warn",
      lifetime === undefined
        ? "the token response has no expires_in"
        : `the access token lives ${lifetime} seconds${lifetime > 3600 ? ", more than an hour" : ""}`,
    ),
  )
}

const mcpChecks = async (walk: Walk, tokens: TokenStore.Tokens, findings: Array<Finding>) => {
  const revision = handshakeRevision(walk)
  const initialize = await mcpRequest(
    walk,
    tokens.access_token,
    {
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: revision,
        capabilities: {},
        clientInfo: { name: "keyway-doctor", version: "1" },
      },
    },
    revision,
  )
  const listed = await mcpRequest(walk, tokens.access_token, { id: 2, method: "tools/list", params: {} }, revision)
  const authorized = initialize.status === 200 && listed.status === 200
  findings.push(
    finding(
      walk,
      "mcp.authorized",
      authorized ? "pass" : "fail",
      `initialize answered HTTP ${initialize.status ?? "nothing"}, tools/list HTTP ${listed.status ?? "nothing"}`,
      [initialize.exchange, listed.exchange],
    ),
  )
  if (!authorized) return
  const scopeRevisions = walk.revisions.filter((r) => Revision.features(r).scopeChallenges)
  if (scopeRevisions.length === 0) return
  for (const [i, name] of toolsRequiringArguments(messageOf(listed)).entries()) {
    const called = await mcpRequest(
      walk,
      tokens.access_token,
      { id: 3 + i, method: "tools/call", params: { name, arguments: {} } },
      revision,
    )
    if (called.status !== 403) continue
    const parsed = Challenge.fromHeaders(called.headers)
    const params = Result.isSuccess(parsed) ? parsed.success : undefined
    const good = params?.error === "insufficient_scope" && params.scope !== undefined && params.scope !== ""
    findings.push(
      finding(
        walk,
        "mcp.insufficient-scope",
        good ? "pass" : "fail",
        good
          ? `tools/call ${name} with scope "${tokens.scope}" answered 403 insufficient_scope asking for "${params?.scope}"`
          : `tools/call ${name} with scope "${tokens.scope}" answered 403 with WWW-Authenticate ${JSON.stringify(called.headers.get("www-authenticate"))}, not insufficient_scope with scope`,
        [called.exchange],
        scopeRevisions,
      ),
    )
    return
  }
}

/** What a try for a token for the other resource gave: the token, or why none came. */
type OtherToken =
  | { readonly token: string; readonly how: string }
  | { readonly token?: undefined; readonly refused: string }

/** A refresh with `resource` = the other resource: RFC 8707 §2.2 allows any resource within the grant. */
const refreshForOther = async (
  walk: Walk,
  tokens: TokenStore.Tokens,
  refreshToken: string | undefined,
  other: string,
  exchanges: Array<Exchange>,
): Promise<OtherToken> => {
  const endpoint = tokens.token_endpoint
  if (refreshToken === undefined || endpoint === undefined || tokens.client_id === undefined) {
    return { refused: "no refresh token to try" }
  }
  const seen = await walk.probe.send(endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: refreshToken,
      client_id: tokens.client_id,
      resource: other,
    }).toString(),
  })
  exchanges.push(withoutBody(seen.exchange))
  const answer = seen.json as { access_token?: unknown; error?: unknown } | undefined
  if (seen.status === 200 && typeof answer?.access_token === "string") {
    return { token: answer.access_token, how: "by a refresh" }
  }
  return {
    refused: `the refresh answered HTTP ${seen.status ?? "nothing"}${typeof answer?.error === "string" ? ` ${answer.error}` : ""}`,
  }
}

/**
 * A second authorization for the other resource, with the same registered client and user agent (a test user or
 * browser already signed in), the granted scope, PKCE and the callback checked as the client checks it.
 */
const authorizeForOther = async (
  walk: Walk,
  tokens: TokenStore.Tokens,
  userAgent: UserAgentService,
  other: string,
  exchanges: Array<Exchange>,
  kept: Array<Exchange>,
): Promise<OtherToken> => {
  const found = walk.authorizationServers.get(tokens.issuer)
  const metadata = Wire.validate(Wire.AuthorizationServerMetadata, found?.metadata, "authorization server metadata")
  const endpoint = tokens.token_endpoint
  if (Result.isFailure(metadata) || endpoint === undefined || tokens.client_id === undefined) {
    return { refused: "no authorization server metadata for a second authorization" }
  }
  const server: Discovery.DiscoveredAuthorizationServer = {
    issuer: tokens.issuer,
    metadata: metadata.success,
    metadataUrl: found?.metadataUrl,
  }
  const clientId = tokens.client_id
  const start = kept.length
  const callback = Effect.gen(function* () {
    const session = yield* userAgent.open
    return yield* Effect.gen(function* () {
      const request = yield* Authorization.buildRequest({
        resource: {
          serverUrl: other,
          resource: other,
          metadata: undefined,
          metadataUrl: undefined,
          issuer: tokens.issuer,
          legacy: false,
        },
        server,
        client: { issuer: tokens.issuer, client_id: clientId },
        redirectUri: session.redirectUri,
        scope: Scope.parse(tokens.scope),
      })
      const code = yield* Authorization.validateCallback(yield* session.run(request.url), request.pending)
      return { code, pending: request.pending }
    }).pipe(Effect.ensuring(session.close))
  })
  let got: { readonly code: string; readonly pending: TokenStore.Pending }
  try {
    got = await Effect.runPromise(callback)
  } catch (e) {
    return { refused: `a second authorization failed: ${e instanceof Error ? e.message : String(e)}` }
  } finally {
    exchanges.push(...kept.slice(start))
  }
  const seen = await walk.probe.send(endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: got.code,
      code_verifier: got.pending.code_verifier,
      redirect_uri: got.pending.redirect_uri,
      client_id: clientId,
      resource: other,
    }).toString(),
  })
  exchanges.push(withoutBody(seen.exchange))
  const answer = seen.json as { access_token?: unknown; error?: unknown } | undefined
  if (seen.status === 200 && typeof answer?.access_token === "string") {
    return { token: answer.access_token, how: "by a second authorization" }
  }
  return {
    refused: `the code exchange of a second authorization answered HTTP ${seen.status ?? "nothing"}${typeof answer?.error === "string" ? ` ${answer.error}` : ""}`,
  }
}

/**
 * The audience check, only with `otherResource`: a token for that other resource of the same authorization server
 * (by a refresh, else by a second authorization), presented to the MCP server, must get a 401 `invalid_token`.
 */
const audienceCheck = async (
  walk: Walk,
  tokens: TokenStore.Tokens,
  refreshToken: string | undefined,
  userAgent: UserAgentService,
  kept: Array<Exchange>,
  findings: Array<Finding>,
) => {
  const other = walk.options.otherResource
  if (other === undefined) return
  const exchanges: Array<Exchange> = []
  const refreshed = await refreshForOther(walk, tokens, refreshToken, other, exchanges)
  const obtained =
    refreshed.token === undefined ? await authorizeForOther(walk, tokens, userAgent, other, exchanges, kept) : refreshed
  if (obtained.token === undefined) {
    findings.push(
      finding(
        walk,
        "mcp.audience-check",
        "warn",
        `the authorization server issues no token for ${other} (${refreshed.token === undefined ? `${refreshed.refused}; ` : ""}${obtained.refused}), so the audience check could not be tried`,
        exchanges,
      ),
    )
    return
  }
  const revision = handshakeRevision(walk)
  const listed = await mcpRequest(walk, obtained.token, { id: 1, method: "tools/list", params: {} }, revision)
  exchanges.push(listed.exchange)
  const parsed = Challenge.fromHeaders(listed.headers)
  const error = Result.isSuccess(parsed) ? parsed.success?.error : undefined
  const refused = listed.status === 401 && error === "invalid_token"
  const answered = `tools/list answered HTTP ${listed.status ?? "nothing"}`
  findings.push(
    finding(
      walk,
      "mcp.audience-check",
      refused ? "pass" : "fail",
      refused
        ? `a token for ${other} (obtained ${obtained.how}) was refused with 401 invalid_token`
        : listed.status !== undefined && listed.status >= 200 && listed.status < 300
          ? `a token for ${other} (obtained ${obtained.how}) was accepted (${answered}): the server does not check the token's audience`
          : `a token for ${other} (obtained ${obtained.how}) was not refused with 401 invalid_token: ${answered}${listed.headers.get("www-authenticate") === null ? "" : ` with WWW-Authenticate ${JSON.stringify(listed.headers.get("www-authenticate"))}`}`,
      exchanges,
    ),
  )
}

const refreshCheck = async (walk: Walk, tokens: TokenStore.Tokens, findings: Array<Finding>) => {
  const endpoint = tokens.token_endpoint
  if (tokens.refresh_token === undefined || endpoint === undefined || tokens.client_id === undefined) {
    findings.push(finding(walk, "token.refresh", "warn", "the token response has no refresh token"))
    return
  }
  const seen = await walk.probe.send(endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: tokens.client_id,
      resource: tokens.resource,
    }).toString(),
  })
  const answer = seen.json as { access_token?: unknown; refresh_token?: unknown; error?: unknown } | undefined
  const exchanges = [withoutBody(seen.exchange)]
  if (seen.status !== 200 || typeof answer?.access_token !== "string") {
    findings.push(
      finding(
        walk,
        "token.refresh",
        "fail",
        `the refresh answered HTTP ${seen.status ?? "nothing"}${typeof answer?.error === "string" ? ` ${answer.error}` : ""}`,
        exchanges,
      ),
    )
    return
  }
  const rotated = typeof answer.refresh_token === "string" && answer.refresh_token !== tokens.refresh_token
  findings.push(
    finding(
      walk,
      "token.refresh",
      rotated ? "pass" : "fail",
      rotated
        ? "the refresh issued a new access token and a new refresh token"
        : "the refresh issued a new access token but kept the same refresh token (no rotation for a public client)",
      exchanges,
    ),
  )
  walk.token = {
    accessToken: answer.access_token,
    ...(typeof answer.refresh_token === "string" ? { refreshToken: answer.refresh_token } : {}),
  }
}

/** The login checks, on the MCP server given. */
export const stage: Stage = {
  name: "login",
  catalog,
  run: async (walk) => {
    const login = walk.options.login
    if (login === undefined) return []
    const kept: Array<Exchange> = []
    const fetch = recordingFetch(walk, kept)
    const userAgent =
      login.kind === "test-user"
        ? UserAgent.testUser({ username: login.username, password: login.password, fetch })
        : (await import("@keyway/client/node")).UserAgent.browser()
    const client = createAuthClient({ clientName: "keyway-doctor", fetch, userAgent })
    const findings: Array<Finding> = []
    // The scope of the first 401 (what a client asks for first), so that a tool needing more can show its 403.
    const parsed = Challenge.parse(walk.unauthenticated?.wwwAuthenticate)
    const scope = Result.isSuccess(parsed) ? Challenge.bearer(parsed.success)?.scope : undefined
    let tokens: TokenStore.Tokens
    try {
      tokens = await client.authorize(walk.target, scope === undefined ? {} : { scope })
    } catch (e) {
      findings.push(finding(walk, "login.flow", "fail", e instanceof Error ? e.message : String(e), kept.slice(-20)))
      return findings
    } finally {
      await client.dispose()
    }
    const now = (walk.options.now ?? Date.now)()
    findings.push(
      finding(
        walk,
        "login.flow",
        "pass",
        `signed in at ${tokens.issuer} and received a ${tokens.token_type} token for ${tokens.resource}`,
        [...kept],
      ),
    )
    walk.token = {
      accessToken: tokens.access_token,
      ...(tokens.refresh_token === undefined ? {} : { refreshToken: tokens.refresh_token }),
      scope: tokens.scope,
      ...(tokens.expires_at === undefined ? {} : { expiresIn: Math.round((tokens.expires_at - now) / 1000) }),
    }
    tokenChecks(walk, tokens, now, findings)
    await mcpChecks(walk, tokens, findings)
    // The refresh first: the audience check spends the refresh token it leaves (a rotating server revokes the old).
    await refreshCheck(walk, tokens, findings)
    await audienceCheck(walk, tokens, walk.token.refreshToken, userAgent, kept, findings)
    return findings
  },
}
