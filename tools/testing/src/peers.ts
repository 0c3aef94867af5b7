/**
 * Real loopback peers for the client tests: a small OAuth authorization server (metadata, an auto-approving
 * authorization endpoint, a token endpoint that verifies PKCE, client authentication, resource and refresh token
 * rotation, dynamic registration) and an MCP-ish protected resource (protected resource metadata, Bearer checks,
 * 401/403 challenges, per-operation scopes). Both listen on 127.0.0.1 port 0 and can be told to misbehave.
 */
import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Challenge, Pkce, Scope } from "@keyway/core"
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from "jose"

export interface Listening {
  readonly origin: string
  readonly close: () => Promise<void>
}

type Handler = (request: IncomingMessage, url: URL, body: string) => Promise<Reply> | Reply

export interface Reply {
  readonly status: number
  readonly headers?: Record<string, string | ReadonlyArray<string>>
  readonly body?: string
}

export const json = (status: number, value: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(value),
})

export const listen = async (handler: Handler): Promise<Listening> => {
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const url = new URL(request.url ?? "/", `http://${request.headers.host ?? "127.0.0.1"}`)
      Promise.resolve()
        .then(() => handler(request, url, Buffer.concat(chunks).toString("utf8")))
        .then(
          (reply) => {
            response.writeHead(reply.status, reply.headers as Record<string, string | Array<string>>)
            response.end(reply.body)
          },
          (error: unknown) => {
            response.writeHead(500, { "content-type": "text/plain" })
            response.end(String(error))
          },
        )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

export interface RegisteredClient {
  readonly client_id: string
  readonly client_secret?: string
  readonly token_endpoint_auth_method: string
  readonly redirect_uris: ReadonlyArray<string>
  readonly jwks?: JSONWebKeySet
}

interface Code {
  readonly client_id: string
  readonly redirect_uri: string
  readonly challenge: string
  readonly resource: string
  readonly scope: string
  used: boolean
}

export interface IssuedToken {
  readonly token: string
  readonly client_id: string
  readonly resource: string
  readonly scope: string
  readonly expires_at: number
  revoked: boolean
}

export interface AuthorizationServerOptions {
  /** Path of the issuer ("" for an issuer at the origin). */
  readonly issuerPath?: string
  /**
   * Which metadata locations answer; all of the seed's by default. "oauth-root" is the RFC 8414 location at the
   * origin whatever the issuer's path (where 2025-03-26 clients look).
   */
  readonly metadataAt?: ReadonlyArray<"oauth" | "openid" | "openid-appended" | "oauth-root">
  /** Changes the metadata document served (after defaults). */
  readonly metadata?: (metadata: Record<string, unknown>) => Record<string, unknown>
  /** Raw reply for metadata requests, instead of the document. */
  readonly metadataReply?: Reply
  /** Seconds of access token lifetime for the code grant and for the refresh grant. */
  readonly expiresIn?: number
  readonly refreshExpiresIn?: number
  /** Whether to issue refresh tokens (default true). */
  readonly refreshTokens?: boolean
  /** Whether authorization responses carry iss: "yes" (default when advertised), "no", or a value to send. */
  readonly iss?: "yes" | "no" | { readonly value: string }
  /** Rewrites the query of the redirect back to the client. */
  readonly tamperRedirect?: (params: URLSearchParams) => void
  /** Raw reply for the authorization endpoint. */
  readonly authorizeReply?: (url: URL) => Reply | undefined
  /** Raw reply for token requests (after validation succeeds). */
  readonly tokenReply?: (grant: string, normal: Record<string, unknown>) => Reply | undefined
  /** Raw reply for registration requests. */
  readonly registerReply?: (requested: Record<string, unknown>) => Reply | undefined
  /** Pre-registered clients. */
  readonly clients?: ReadonlyArray<RegisteredClient>
  /** Client ID metadata documents the server may "fetch" (url -> document), standing in for real https hosts. */
  readonly clientIdDocuments?: Readonly<Record<string, { redirect_uris: ReadonlyArray<string>; jwks?: JSONWebKeySet }>>
  /** Holds refresh responses until the returned promise resolves. */
  readonly refreshGate?: () => Promise<void>
}

export interface AuthorizationServerPeer extends Listening {
  readonly issuer: string
  readonly registrations: Array<Record<string, unknown>>
  readonly authorizations: Array<URLSearchParams>
  readonly tokenRequests: Array<{ grant: string; params: URLSearchParams; authorization: string | undefined }>
  readonly tokens: Map<string, IssuedToken>
  readonly clients: Map<string, RegisteredClient>
  readonly metadataRequests: Array<string>
  /** Every request path, in order. */
  readonly paths: Array<string>
  refreshes: number
  /** Token lookup for the resource server. */
  readonly lookup: (token: string) => IssuedToken | undefined
}

const isLoopbackRedirect = (registered: string, requested: string): boolean => {
  const a = URL.parse(registered)
  const b = URL.parse(requested)
  if (a === null || b === null) return false
  // RFC 8252 §7.3: any port for loopback IP redirect URIs.
  return (
    a.protocol === "http:" &&
    a.hostname === "127.0.0.1" &&
    b.hostname === "127.0.0.1" &&
    a.pathname === b.pathname &&
    a.search === b.search
  )
}

const redirectAllowed = (client: RegisteredClient, uri: string): boolean =>
  client.redirect_uris.some((registered) => registered === uri || isLoopbackRedirect(registered, uri))

const oauthError = (status: number, error: string, description: string): Reply =>
  json(status, { error, error_description: description }, { "cache-control": "no-store" })

export interface AuthorizationServerParts {
  readonly handler: Handler
  readonly attach: (listening: Listening) => AuthorizationServerPeer
}

export const startAuthorizationServer = async (
  options: AuthorizationServerOptions = {},
): Promise<AuthorizationServerPeer> => {
  const parts = makeAuthorizationServer(options)
  return parts.attach(await listen(parts.handler))
}

export const makeAuthorizationServer = (options: AuthorizationServerOptions = {}): AuthorizationServerParts => {
  const paths: Array<string> = []
  const state = {
    registrations: [] as Array<Record<string, unknown>>,
    authorizations: [] as Array<URLSearchParams>,
    tokenRequests: [] as Array<{ grant: string; params: URLSearchParams; authorization: string | undefined }>,
    tokens: new Map<string, IssuedToken>(),
    refreshTokens: new Map<string, { client_id: string; resource: string; scope: string; used: boolean }>(),
    codes: new Map<string, Code>(),
    clients: new Map<string, RegisteredClient>((options.clients ?? []).map((c) => [c.client_id, c])),
    metadataRequests: [] as Array<string>,
    refreshes: 0,
  }
  let issuer = ""
  const issuerPath = options.issuerPath ?? ""
  const metadataAt = options.metadataAt ?? ["oauth", "openid", "openid-appended"]

  const metadata = (): Record<string, unknown> => {
    const base: Record<string, unknown> = {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      registration_endpoint: `${issuer}/register`,
      response_types_supported: ["code"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      code_challenge_methods_supported: ["S256"],
      token_endpoint_auth_methods_supported: ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"],
      scopes_supported: ["tools:read", "tools:write", "admin", "offline_access"],
      authorization_response_iss_parameter_supported: true,
    }
    return options.metadata ? options.metadata(base) : base
  }

  const clientFor = (clientId: string): RegisteredClient | undefined => {
    const known = state.clients.get(clientId)
    if (known !== undefined) return known
    const document = options.clientIdDocuments?.[clientId]
    if (document === undefined) return undefined
    return {
      client_id: clientId,
      token_endpoint_auth_method: document.jwks !== undefined ? "private_key_jwt" : "none",
      redirect_uris: document.redirect_uris,
      ...(document.jwks !== undefined ? { jwks: document.jwks } : {}),
    }
  }

  const authenticate = async (
    params: URLSearchParams,
    authorization: string | undefined,
  ): Promise<RegisteredClient | Reply> => {
    let clientId = params.get("client_id") ?? undefined
    let secret: string | undefined
    let method = "none"
    if (authorization?.startsWith("Basic ")) {
      const decoded = Buffer.from(authorization.slice(6), "base64").toString("utf8")
      const colon = decoded.indexOf(":")
      clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " "))
      secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " "))
      method = "client_secret_basic"
    } else if (params.has("client_assertion")) {
      method = "private_key_jwt"
    } else if (params.has("client_secret")) {
      secret = params.get("client_secret") ?? undefined
      method = "client_secret_post"
    }
    const client = clientId === undefined ? undefined : clientFor(clientId)
    if (client === undefined) return oauthError(401, "invalid_client", "unknown client")
    if (client.token_endpoint_auth_method !== method) {
      return oauthError(401, "invalid_client", `client must authenticate with ${client.token_endpoint_auth_method}`)
    }
    if (method === "client_secret_basic" || method === "client_secret_post") {
      if (secret !== client.client_secret) return oauthError(401, "invalid_client", "wrong secret")
    }
    if (method === "private_key_jwt") {
      if (params.get("client_assertion_type") !== "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") {
        return oauthError(401, "invalid_client", "bad assertion type")
      }
      try {
        const { payload } = await jwtVerify(params.get("client_assertion") ?? "", createLocalJWKSet(client.jwks!), {
          issuer: client.client_id,
          subject: client.client_id,
          audience: issuer,
        })
        if (typeof payload.jti !== "string") return oauthError(401, "invalid_client", "assertion without jti")
      } catch (error) {
        return oauthError(401, "invalid_client", `bad assertion: ${String(error)}`)
      }
    }
    return client
  }

  const issue = (grant: string, client_id: string, resource: string, scope: string): Reply => {
    const token = `at-${randomUUID()}`
    const lifetime =
      grant === "refresh_token" ? (options.refreshExpiresIn ?? options.expiresIn ?? 3600) : (options.expiresIn ?? 3600)
    state.tokens.set(token, {
      token,
      client_id,
      resource,
      scope,
      expires_at: Date.now() + lifetime * 1000,
      revoked: false,
    })
    const body: Record<string, unknown> = { access_token: token, token_type: "Bearer", expires_in: lifetime, scope }
    if (options.refreshTokens ?? true) {
      const refresh = `rt-${randomUUID()}`
      state.refreshTokens.set(refresh, { client_id, resource, scope, used: false })
      body.refresh_token = refresh
    }
    return options.tokenReply?.(grant, body) ?? json(200, body, { "cache-control": "no-store" })
  }

  const wellKnown = (suffix: string): ReadonlyArray<string> => {
    const paths: Array<string> = []
    if (metadataAt.includes("oauth")) paths.push(`/.well-known/oauth-authorization-server${issuerPath}`)
    if (metadataAt.includes("openid")) paths.push(`/.well-known/openid-configuration${issuerPath}`)
    if (metadataAt.includes("openid-appended") && issuerPath !== "") {
      paths.push(`${issuerPath}/.well-known/openid-configuration`)
    }
    if (metadataAt.includes("oauth-root")) paths.push("/.well-known/oauth-authorization-server")
    return suffix === "" ? paths : paths
  }

  const handler: Handler = async (request, url, body) => {
    const path = url.pathname
    paths.push(path)
    if (wellKnown("").includes(path)) {
      state.metadataRequests.push(path)
      return options.metadataReply ?? json(200, metadata())
    }
    if (path === `${issuerPath}/register` && request.method === "POST") {
      const requested = JSON.parse(body) as Record<string, unknown>
      state.registrations.push(requested)
      const raw = options.registerReply?.(requested)
      if (raw !== undefined) return raw
      const method =
        typeof requested.token_endpoint_auth_method === "string" ? requested.token_endpoint_auth_method : "none"
      const client: RegisteredClient = {
        client_id: `dcr-${randomUUID()}`,
        token_endpoint_auth_method: method,
        redirect_uris: (requested.redirect_uris as Array<string>) ?? [],
        ...(method === "none" ? {} : { client_secret: `secret-${randomUUID()}` }),
      }
      state.clients.set(client.client_id, client)
      return json(201, {
        ...requested,
        client_id: client.client_id,
        client_id_issued_at: Math.floor(Date.now() / 1000),
        ...(client.client_secret !== undefined
          ? { client_secret: client.client_secret, client_secret_expires_at: 0 }
          : {}),
      })
    }
    if (path === `${issuerPath}/authorize`) {
      state.authorizations.push(url.searchParams)
      const raw = options.authorizeReply?.(url)
      if (raw !== undefined) return raw
      const params = url.searchParams
      const client = clientFor(params.get("client_id") ?? "")
      const redirectUri = params.get("redirect_uri") ?? ""
      if (client === undefined || !redirectAllowed(client, redirectUri)) {
        return { status: 400, headers: { "content-type": "text/plain" }, body: "unknown client or redirect_uri" }
      }
      const back = new URL(redirectUri)
      const reply = new URLSearchParams()
      if (
        params.get("response_type") !== "code" ||
        params.get("code_challenge_method") !== "S256" ||
        params.get("code_challenge") === null
      ) {
        reply.set("error", "invalid_request")
        reply.set("error_description", "PKCE S256 is required")
      } else {
        const code = `code-${randomUUID()}`
        state.codes.set(code, {
          client_id: client.client_id,
          redirect_uri: redirectUri,
          challenge: params.get("code_challenge") ?? "",
          resource: params.get("resource") ?? "",
          scope: params.get("scope") ?? "",
          used: false,
        })
        reply.set("code", code)
      }
      const st = params.get("state")
      if (st !== null) reply.set("state", st)
      const advertised = metadata().authorization_response_iss_parameter_supported === true
      const iss = options.iss ?? (advertised ? "yes" : "no")
      if (iss === "yes") reply.set("iss", issuer)
      else if (typeof iss === "object") reply.set("iss", iss.value)
      options.tamperRedirect?.(reply)
      back.search = reply.toString()
      return { status: 302, headers: { location: back.href } }
    }
    if (path === `${issuerPath}/token` && request.method === "POST") {
      const params = new URLSearchParams(body)
      const grant = params.get("grant_type") ?? ""
      state.tokenRequests.push({ grant, params, authorization: request.headers.authorization })
      const client = await authenticate(params, request.headers.authorization)
      if ("status" in client) return client
      if (grant === "authorization_code") {
        const code = state.codes.get(params.get("code") ?? "")
        if (code === undefined || code.used || code.client_id !== client.client_id) {
          return oauthError(400, "invalid_grant", "unknown or used code")
        }
        code.used = true
        if (params.get("redirect_uri") !== code.redirect_uri) return oauthError(400, "invalid_grant", "redirect_uri")
        if (!(await Pkce.verifyS256(params.get("code_verifier") ?? "", code.challenge))) {
          return oauthError(400, "invalid_grant", "PKCE verification failed")
        }
        if (params.get("resource") !== code.resource) return oauthError(400, "invalid_target", "resource differs")
        return issue(grant, client.client_id, code.resource, code.scope)
      }
      if (grant === "refresh_token") {
        state.refreshes++
        if (options.refreshGate !== undefined) await options.refreshGate()
        const refresh = state.refreshTokens.get(params.get("refresh_token") ?? "")
        if (refresh === undefined || refresh.used || refresh.client_id !== client.client_id) {
          return oauthError(400, "invalid_grant", "unknown or reused refresh token")
        }
        // Rotation: a refresh token works once.
        refresh.used = true
        if (params.get("resource") !== refresh.resource) return oauthError(400, "invalid_target", "resource differs")
        return issue(grant, client.client_id, refresh.resource, refresh.scope)
      }
      return oauthError(400, "unsupported_grant_type", grant)
    }
    return { status: 404, headers: { "content-type": "text/plain" }, body: "Not Found" }
  }
  const attach = (listening: Listening): AuthorizationServerPeer => {
    issuer = `${listening.origin}${issuerPath}`
    return {
      ...listening,
      issuer,
      paths,
      registrations: state.registrations,
      authorizations: state.authorizations,
      tokenRequests: state.tokenRequests,
      tokens: state.tokens,
      clients: state.clients,
      metadataRequests: state.metadataRequests,
      get refreshes() {
        return state.refreshes
      },
      set refreshes(value: number) {
        state.refreshes = value
      },
      lookup: (token) => state.tokens.get(token),
    }
  }
  return { handler, attach }
}

export interface ResourceServerOptions {
  /** The MCP endpoint path (default "/mcp"). */
  readonly path?: string
  /** Authorization servers listed in the metadata (default the peer's issuer, set later with `use`). */
  readonly authorizationServers?: () => ReadonlyArray<string>
  /** Where metadata is served: path-specific, root, both (default), or nowhere. */
  readonly metadataAt?: ReadonlyArray<"path" | "root">
  /** Changes the metadata document served. */
  readonly metadata?: (metadata: Record<string, unknown>) => Record<string, unknown>
  /** Raw reply for metadata requests. */
  readonly metadataReply?: Reply
  /** Whether the 401 challenge carries resource_metadata (default true). */
  readonly advertiseMetadata?: boolean
  /** Scope put in the 401 challenge. */
  readonly challengeScope?: string
  /** Scopes listed in scopes_supported (default ["tools:read"]). */
  readonly scopesSupported?: ReadonlyArray<string> | undefined
  /** Scopes required per operation ("initialize", "tools/call write", ...). */
  readonly required?: Readonly<Record<string, string>>
  /** Operations that answer a bare 403 (no challenge). */
  readonly plainForbidden?: ReadonlyArray<string>
  /** Answers every unauthenticated request with a redirect to this URL. */
  readonly redirectTo?: string
  /** Operations that answer 403 insufficient_scope whatever the token. */
  readonly alwaysForbidden?: ReadonlyArray<string>
  /** Validates tokens (normally the authorization server peer's lookup). */
  readonly lookup: (token: string) => IssuedToken | undefined
}

export interface ResourceServerPeer extends Listening {
  readonly url: string
  readonly requests: Array<{ authorization: string | undefined; status: number; operation: string }>
  readonly metadataRequests: Array<string>
}

const operation = (body: string): string => {
  try {
    const message = JSON.parse(body) as { method?: string; params?: { name?: string } }
    if (message.method === "tools/call" && typeof message.params?.name === "string") {
      return `tools/call ${message.params.name}`
    }
    return message.method ?? "*"
  } catch {
    return "*"
  }
}

export interface ResourceServerParts {
  readonly handler: Handler
  /** Whether a request path belongs to the resource server (its endpoint or its metadata). */
  readonly owns: (path: string) => boolean
  readonly attach: (listening: Listening) => ResourceServerPeer
}

export const startResourceServer = async (options: ResourceServerOptions): Promise<ResourceServerPeer> => {
  const parts = makeResourceServer(options)
  return parts.attach(await listen(parts.handler))
}

export const makeResourceServer = (options: ResourceServerOptions): ResourceServerParts => {
  const path = options.path ?? "/mcp"
  const metadataAt = options.metadataAt ?? ["path", "root"]
  const requests: Array<{ authorization: string | undefined; status: number; operation: string }> = []
  const metadataRequests: Array<string> = []
  let origin = ""
  const resource = () => `${origin}${path}`
  const metadataPath = `/.well-known/oauth-protected-resource${path}`
  const metadataUrl = () =>
    `${origin}${metadataAt.includes("path") ? metadataPath : "/.well-known/oauth-protected-resource"}`
  const document = (): Record<string, unknown> => {
    const base: Record<string, unknown> = {
      resource: resource(),
      authorization_servers: options.authorizationServers?.() ?? [],
      ...(options.scopesSupported === undefined && "scopesSupported" in options
        ? {}
        : { scopes_supported: options.scopesSupported ?? ["tools:read"] }),
      bearer_methods_supported: ["header"],
    }
    return options.metadata ? options.metadata(base) : base
  }
  const challenge = (params: Challenge.BearerParams) => Challenge.formatBearer(params)
  const handler: Handler = (request, url, body) => {
    if (
      (url.pathname === metadataPath && metadataAt.includes("path")) ||
      (url.pathname === "/.well-known/oauth-protected-resource" && metadataAt.includes("root"))
    ) {
      metadataRequests.push(url.pathname)
      return options.metadataReply ?? json(200, document())
    }
    if (url.pathname !== path) return { status: 404, body: "Not Found" }
    const op = operation(body)
    const authorization = request.headers.authorization
    const record = (status: number) => requests.push({ authorization, status, operation: op })
    const advertise = options.advertiseMetadata ?? true
    const base: Challenge.BearerParams = {
      ...(advertise ? { resource_metadata: metadataUrl() } : {}),
    }
    const token = authorization?.startsWith("Bearer ") ? authorization.slice(7) : undefined
    if (options.redirectTo !== undefined) {
      record(307)
      return { status: 307, headers: { location: options.redirectTo } }
    }
    if (token === undefined) {
      record(401)
      return {
        status: 401,
        headers: {
          "www-authenticate": challenge({
            ...base,
            ...(options.challengeScope !== undefined ? { scope: options.challengeScope } : {}),
          }),
        },
        body: "",
      }
    }
    const issued = options.lookup(token)
    if (issued === undefined || issued.revoked || issued.expires_at <= Date.now() || issued.resource !== resource()) {
      record(401)
      return {
        status: 401,
        headers: { "www-authenticate": challenge({ ...base, error: "invalid_token" }) },
        body: "",
      }
    }
    if (options.plainForbidden?.includes(op)) {
      record(403)
      return { status: 403, body: "forbidden" }
    }
    const needed = options.required?.[op]
    const forbidden = options.alwaysForbidden?.includes(op) ?? false
    if (forbidden || (needed !== undefined && !Scope.containsAll(Scope.parse(issued.scope), Scope.parse(needed)))) {
      record(403)
      return {
        status: 403,
        headers: {
          "www-authenticate": challenge({
            ...base,
            scope: needed ?? "admin",
            error: "insufficient_scope",
            error_description: "more scope needed",
          }),
        },
        body: "",
      }
    }
    record(200)
    const id = (() => {
      try {
        return (JSON.parse(body) as { id?: unknown }).id ?? null
      } catch {
        return null
      }
    })()
    return json(200, { jsonrpc: "2.0", id, result: { operation: op, scope: issued.scope } })
  }
  const owns = (p: string) => p === path || p.startsWith("/.well-known/oauth-protected-resource")
  const attach = (listening: Listening): ResourceServerPeer => {
    origin = listening.origin
    return { ...listening, url: resource(), requests, metadataRequests }
  }
  return { handler, owns, attach }
}

/** A 2025-03-26 style server: the MCP endpoint and its authorization server share one origin. */
export const startCombined = async (
  asOptions: AuthorizationServerOptions,
  rsOptions: Omit<ResourceServerOptions, "lookup">,
): Promise<{ as: AuthorizationServerPeer; rs: ResourceServerPeer }> => {
  const asParts = makeAuthorizationServer(asOptions)
  let lookup: ResourceServerOptions["lookup"] = () => undefined
  const rsParts = makeResourceServer({ ...rsOptions, lookup: (token) => lookup(token) })
  const listening = await listen((request, url, body) =>
    rsParts.owns(url.pathname) ? rsParts.handler(request, url, body) : asParts.handler(request, url, body),
  )
  const as = asParts.attach(listening)
  lookup = as.lookup
  return { as, rs: rsParts.attach(listening) }
}

/** A JSON-RPC request body. */
export const rpc = (method: string, params: Record<string, unknown> = {}, id = 1): string =>
  JSON.stringify({ jsonrpc: "2.0", id, method, params })
