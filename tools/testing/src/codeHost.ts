/**
 * A third-party "code host" on loopback for connected-account tests and the demo: node-oidc-provider as its
 * authorization server (its own issuer, its own login and consent pages, refresh tokens, revocation, opaque access
 * tokens for its API by resource indicators) and a tiny API beside it that accepts those access tokens (looked up at
 * the provider, as introspection would) and lists the user's repositories.
 *
 * @module
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import Provider from "oidc-provider"

/** Options of {@link startCodeHost}. */
export interface CodeHostOptions {
  /** The one OAuth client at the code host: the MCP server's. */
  readonly clientId: string
  readonly clientSecret: string
  readonly redirectUris: ReadonlyArray<string>
  /** The repositories of each user (by login); a user not named has none. */
  readonly repositories?: Readonly<Record<string, ReadonlyArray<string>>>
  /** Seconds an access token lives at the code host (3600). */
  readonly accessTokenTtl?: number
  /** One readable line per event at the code host (grants, revocations, API calls); never a token. */
  readonly log?: (line: string) => void
}

/** A running code host. */
export interface RunningCodeHost {
  /** The issuer of its authorization server (metadata at `/.well-known/openid-configuration`). */
  readonly issuer: string
  /** Its API: `GET <apiBase>/user`, `GET <apiBase>/repos`, with a Bearer access token. */
  readonly apiBase: string
  /** What happened at the code host so far. */
  readonly counts: { codes: number; refreshes: number; revocations: number; apiCalls: number; refused: number }
  /** Every access and refresh token the code host issued (for tests that check none leaked). */
  readonly issuedTokens: () => ReadonlyArray<string>
  /** Ends every access token issued so far at the code host (as when their lifetime is over); answers how many. */
  readonly expireAccessTokens: () => Promise<number>
  readonly close: () => Promise<void>
}

/** Starts the code host on a free loopback port. */
export const startCodeHost = async (options: CodeHostOptions): Promise<RunningCodeHost> => {
  const log = options.log ?? (() => undefined)
  const http = createServer()
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  const apiBase = `${issuer}/api`
  const counts = { codes: 0, refreshes: 0, revocations: 0, apiCalls: 0, refused: 0 }
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: options.clientId,
        client_secret: options.clientSecret,
        redirect_uris: [...options.redirectUris],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      },
    ],
    cookies: { keys: [crypto.randomUUID()] },
    ttl: {
      AccessToken: options.accessTokenTtl ?? 3600,
      Grant: 86_400,
      IdToken: 600,
      Interaction: 600,
      RefreshToken: 86_400,
      Session: 86_400,
    },
    features: {
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => apiBase,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({ scope: "", audience: resource, accessTokenFormat: "opaque" }),
      },
    },
    // Refresh tokens without `prompt=consent`, which the provider otherwise requires for offline_access.
    issueRefreshToken: async () => true,
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  })
  provider.on("grant.success", (ctx) => {
    const grant = ctx.oidc.params?.grant_type
    if (grant === "refresh_token") counts.refreshes++
    else counts.codes++
    log(`${String(grant)} grant for ${ctx.oidc.client?.clientId ?? "?"}`)
  })
  const issued: Array<string> = []
  const live = new Set<{ readonly jti: string; destroy: () => Promise<void> }>()
  provider.on("access_token.saved", (token) => {
    issued.push(token.jti)
    live.add(token)
  })
  provider.on("refresh_token.saved", (token) => {
    issued.push(token.jti)
  })
  const callback = provider.callback()
  http.on("request", async (req, res) => {
    if (req.url?.startsWith("/api/") !== true) {
      if (req.method === "POST" && req.url === "/token/revocation") {
        counts.revocations++
        log("revocation request (RFC 7009)")
      }
      callback(req, res)
      return
    }
    counts.apiCalls++
    const token = /^Bearer (.+)$/u.exec(req.headers.authorization ?? "")?.[1]
    const found = token === undefined ? undefined : await provider.AccessToken.find(token)
    if (found === undefined || found.isExpired) {
      counts.refused++
      log(`API: ${req.method} ${req.url} refused (invalid_token)`)
      res.writeHead(401, { "content-type": "application/json", "www-authenticate": 'Bearer error="invalid_token"' })
      res.end(JSON.stringify({ error: "invalid_token" }))
      return
    }
    const login = found.accountId
    const body =
      req.url === "/api/user"
        ? { login }
        : req.url === "/api/repos"
          ? (options.repositories?.[login] ?? []).map((name) => ({ name: `${login}/${name}` }))
          : undefined
    log(`API: ${req.method} ${req.url} for ${login} ${body === undefined ? 404 : 200}`)
    res.writeHead(body === undefined ? 404 : 200, { "content-type": "application/json" })
    res.end(JSON.stringify(body ?? { error: "not_found" }))
  })
  return {
    issuer,
    apiBase,
    counts,
    issuedTokens: () => [...issued],
    expireAccessTokens: async () => {
      const ending = [...live]
      live.clear()
      for (const token of ending) await token.destroy()
      log(`${ending.length} access token(s) expired`)
      return ending.length
    },
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections()
        http.close(() => resolve())
      }),
  }
}
