/**
 * The gallery's server: one small node:http server on loopback that is an MCP server (Streamable HTTP endpoint at
 * `/mcp`) and its authorization server at the same origin, both as a careful deployment serves them — and `Faults`,
 * each switching one part to a misconfiguration seen in the field. With no fault the doctor must find nothing to
 * report; with one, exactly that fault.
 */
import { generateKeyPairSync, randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { closing, listening } from "@keyway/testing"

/** A JSON object as the server sends it. */
export type Document = Record<string, unknown>

/** One part of the server switched to a misconfiguration. Absent: the careful behaviour. */
export interface Faults {
  /** The origin the server says it has (its URLs, the issuer); the test's fetch maps it to the loopback port. */
  readonly publicOrigin?: string
  /** The unauthenticated MCP request's status (401 when absent). */
  readonly unauthenticatedStatus?: number
  /** The `WWW-Authenticate` of the unauthenticated 401, from the metadata URL; `null` sends none. */
  readonly challenge?: (resourceMetadataUrl: string) => string | null
  /** Changes the protected resource metadata document. */
  readonly resourceMetadata?: (document: Document, origin: string) => Document
  /** Where the protected resource metadata is served: both well-known locations (default), or the root one only. */
  readonly resourceMetadataAt?: "both" | "root"
  /**
   * Serves the protected resource metadata only at `http://localhost:<port>`, another origin than the server's
   * `http://127.0.0.1:<port>`, and redirects there.
   */
  readonly resourceMetadataElsewhere?: true
  /** The content type of the protected resource metadata (`application/json` when absent). */
  readonly resourceMetadataContentType?: string
  /** Changes the authorization server metadata document. */
  readonly authorizationServerMetadata?: (document: Document, origin: string) => Document
  /** Which authorization server metadata documents are served (both when absent). */
  readonly authorizationServerMetadataAt?: ReadonlyArray<"oauth-authorization-server" | "openid-configuration">
  /** CORS switched off for the MCP endpoint (`none`), or the 401's `WWW-Authenticate` not exposed (`no-expose`). */
  readonly mcpCors?: "none" | "no-expose"
  /** CORS switched off for the protected resource metadata. */
  readonly resourceMetadataCors?: false
  /** CORS switched off for the authorization server's metadata and endpoints. */
  readonly authorizationServerCors?: false
  /** The JWK Set served at `jwks_uri` (one EC public signing key when absent). */
  readonly jwks?: Document
  /** The registration endpoint's redirect URI rule: the reason a URI is refused, undefined when it is accepted. */
  readonly refuseRedirectUri?: (uri: string) => string | undefined
  /** The authorization and token endpoints answer `invalid_target` to any `resource`. */
  readonly rejectResource?: true
  /** The `Date` header is this far off the real clock, in milliseconds. */
  readonly dateOffsetMs?: number
}

/** A running gallery server. */
export interface GalleryServer {
  /** The MCP server's URL, to give the doctor. */
  readonly url: string
  /** The issuer (the server's origin). */
  readonly origin: string
  /** The fetch to give the doctor: the global one, or one that maps `publicOrigin` to the loopback port. */
  readonly fetch: typeof globalThis.fetch
  readonly close: () => Promise<void>
}

const MCP_PATH = "/mcp"
const PRM = "/.well-known/oauth-protected-resource"
const SCOPES = ["notes:read", "notes:write"]
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"])

/** The careful registration rule: https, loopback http with any port, or a private-use scheme (RFC 8252 §7). */
const redirectUriProblem = (uri: string): string | undefined => {
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return "not an absolute URI"
  }
  if (url.hash !== "") return "has a fragment"
  if (url.protocol === "https:") return undefined
  if (url.protocol === "http:") return LOOPBACK.has(url.hostname) ? undefined : "http is only for loopback"
  return url.protocol.slice(0, -1).includes(".") ? undefined : "not a private-use scheme"
}

const corsHeaders = { "access-control-allow-origin": "*" }

const preflight = (request: IncomingMessage): Record<string, string> => ({
  ...corsHeaders,
  "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
  "access-control-allow-headers":
    request.headers["access-control-request-headers"] ??
    "authorization, content-type, mcp-protocol-version, mcp-session-id, last-event-id",
  "access-control-max-age": "600",
})

const readBody = async (request: IncomingMessage): Promise<string> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString("utf8")
}

/** Starts the gallery's server with the given faults on 127.0.0.1. */
export const startGalleryServer = async (faults: Faults = {}): Promise<GalleryServer> => {
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" })
  const jwk = { ...publicKey.export({ format: "jwk" }), kid: "gallery-1", use: "sig", alg: "ES256" }
  const clients = new Map<string, ReadonlyArray<string>>()
  let origin = ""

  const resourceMetadata = (): Document => {
    const document: Document = {
      resource: `${origin}${MCP_PATH}`,
      authorization_servers: [origin],
      scopes_supported: SCOPES,
      bearer_methods_supported: ["header"],
      resource_name: "Gallery notes",
    }
    return faults.resourceMetadata === undefined ? document : faults.resourceMetadata(document, origin)
  }

  const authorizationServerMetadata = (openid: boolean): Document => {
    const document: Document = {
      issuer: origin,
      authorization_endpoint: `${origin}/authorize`,
      token_endpoint: `${origin}/token`,
      registration_endpoint: `${origin}/register`,
      jwks_uri: `${origin}/jwks`,
      scopes_supported: SCOPES,
      response_types_supported: ["code"],
      response_modes_supported: ["query"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      token_endpoint_auth_methods_supported: ["none", "client_secret_basic"],
      code_challenge_methods_supported: ["S256"],
      authorization_response_iss_parameter_supported: true,
      ...(openid ? { subject_types_supported: ["public"], id_token_signing_alg_values_supported: ["ES256"] } : {}),
    }
    return faults.authorizationServerMetadata === undefined
      ? document
      : faults.authorizationServerMetadata(document, origin)
  }

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    if (faults.dateOffsetMs !== undefined) {
      response.setHeader("date", new Date(Date.now() + faults.dateOffsetMs).toUTCString())
    }
    const url = new URL(request.url ?? "/", origin)
    const path = url.pathname
    const send = (status: number, headers: Record<string, string>, body?: string) => {
      response.writeHead(status, headers).end(body)
    }
    const json = (status: number, document: unknown, headers: Record<string, string> = {}) =>
      send(
        status,
        { "content-type": "application/json", "cache-control": "no-store", ...headers },
        JSON.stringify(document),
      )

    if (path === MCP_PATH) {
      const cors = faults.mcpCors === "none" ? {} : corsHeaders
      if (request.method === "OPTIONS") {
        send(faults.mcpCors === "none" ? 405 : 204, faults.mcpCors === "none" ? {} : preflight(request))
        return
      }
      await readBody(request)
      const expose =
        faults.mcpCors === undefined
          ? { "access-control-expose-headers": "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version" }
          : {}
      const status = faults.unauthenticatedStatus ?? 401
      if (status !== 401) {
        json(status, { jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-06-18", capabilities: {} } }, cors)
        return
      }
      const metadataUrl = `${origin}${PRM}${faults.resourceMetadataAt === "root" ? "" : MCP_PATH}`
      const challenge =
        faults.challenge === undefined
          ? `Bearer resource_metadata="${metadataUrl}", scope="notes:read"`
          : faults.challenge(metadataUrl)
      json(
        401,
        { error: "unauthorized" },
        { ...cors, ...expose, ...(challenge === null ? {} : { "www-authenticate": challenge }) },
      )
      return
    }

    if (path === PRM || path === `${PRM}${MCP_PATH}`) {
      const cors = faults.resourceMetadataCors === false ? {} : corsHeaders
      if (request.method === "OPTIONS") {
        send(
          faults.resourceMetadataCors === false ? 405 : 204,
          faults.resourceMetadataCors === false ? {} : preflight(request),
        )
        return
      }
      if (faults.resourceMetadataElsewhere === true && !(request.headers.host ?? "").startsWith("localhost:")) {
        send(301, { location: `${origin.replace("127.0.0.1", "localhost")}${path}`, ...cors })
        return
      }
      if (faults.resourceMetadataAt === "root" && path !== PRM) {
        json(404, { error: "not_found" }, cors)
        return
      }
      send(
        200,
        { "content-type": faults.resourceMetadataContentType ?? "application/json", ...cors },
        JSON.stringify(resourceMetadata()),
      )
      return
    }

    const asCors = faults.authorizationServerCors === false ? {} : corsHeaders
    if (request.method === "OPTIONS") {
      send(
        faults.authorizationServerCors === false ? 405 : 204,
        faults.authorizationServerCors === false ? {} : preflight(request),
      )
      return
    }
    const served = faults.authorizationServerMetadataAt ?? ["oauth-authorization-server", "openid-configuration"]
    if (path === "/.well-known/oauth-authorization-server" || path === "/.well-known/openid-configuration") {
      const kind = path === "/.well-known/openid-configuration" ? "openid-configuration" : "oauth-authorization-server"
      if (!served.includes(kind)) json(404, { error: "not_found" }, asCors)
      else json(200, authorizationServerMetadata(kind === "openid-configuration"), asCors)
      return
    }
    if (path === "/jwks") {
      json(200, faults.jwks ?? { keys: [jwk] }, asCors)
      return
    }
    if (path === "/register" && request.method === "POST") {
      let body: Document
      try {
        body = JSON.parse(await readBody(request)) as Document
      } catch {
        json(400, { error: "invalid_client_metadata", error_description: "the body is not JSON" }, asCors)
        return
      }
      const uris = Array.isArray(body.redirect_uris) ? body.redirect_uris.map(String) : []
      const refuse = faults.refuseRedirectUri ?? redirectUriProblem
      const refused = uris.map((uri) => [uri, refuse(uri)] as const).find(([, problem]) => problem !== undefined)
      if (uris.length === 0 || refused !== undefined) {
        json(
          400,
          {
            error: "invalid_redirect_uri",
            error_description: refused === undefined ? "redirect_uris is required" : `${refused[0]}: ${refused[1]}`,
          },
          asCors,
        )
        return
      }
      const clientId = randomUUID()
      clients.set(clientId, uris)
      json(
        201,
        {
          client_id: clientId,
          client_id_issued_at: Math.floor(Date.now() / 1000),
          redirect_uris: uris,
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code", "refresh_token"],
          response_types: ["code"],
          ...(typeof body.client_name === "string" ? { client_name: body.client_name } : {}),
        },
        asCors,
      )
      return
    }
    if (path === "/authorize" && request.method === "GET") {
      const redirectUri = url.searchParams.get("redirect_uri") ?? ""
      const registered = clients.get(url.searchParams.get("client_id") ?? "")
      const matches =
        registered?.some((uri) => {
          if (uri === redirectUri) return true
          // RFC 8252 §7.3: any port for a loopback redirect URI.
          try {
            const a = new URL(uri)
            const b = new URL(redirectUri)
            return (
              LOOPBACK.has(a.hostname) &&
              a.protocol === "http:" &&
              a.hostname === b.hostname &&
              a.pathname === b.pathname &&
              b.protocol === "http:"
            )
          } catch {
            return false
          }
        }) ?? false
      if (!matches) {
        send(400, { "content-type": "text/html" }, "<p>Unknown client or redirect_uri.</p>")
        return
      }
      const back = (error: string) => {
        const target = new URL(redirectUri)
        target.searchParams.set("error", error)
        const state = url.searchParams.get("state")
        if (state !== null) target.searchParams.set("state", state)
        target.searchParams.set("iss", origin)
        send(302, { location: target.href })
      }
      if (url.searchParams.get("code_challenge") === null || url.searchParams.get("code_challenge_method") !== "S256") {
        back("invalid_request")
        return
      }
      if (faults.rejectResource === true && url.searchParams.has("resource")) {
        back("invalid_target")
        return
      }
      send(
        200,
        { "content-type": "text/html; charset=utf-8" },
        '<form method="post" action="/login"><input name="username"><input name="password" type="password"><button>Sign in</button></form>',
      )
      return
    }
    if (path === "/token" && request.method === "POST") {
      const form = new URLSearchParams(await readBody(request))
      if (faults.rejectResource === true && form.has("resource")) {
        json(400, { error: "invalid_target", error_description: "resource is not supported" }, asCors)
        return
      }
      const grant = form.get("grant_type")
      if (grant === "authorization_code" || grant === "refresh_token") {
        json(400, { error: "invalid_grant", error_description: "unknown code" }, asCors)
      } else if (grant === "client_credentials") {
        json(401, { error: "invalid_client" }, asCors)
      } else {
        json(400, { error: "unsupported_grant_type" }, asCors)
      }
      return
    }
    json(404, { error: "not_found" }, asCors)
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500).end(String(error))
    })
  })
  const loopback = await listening(server)
  origin = faults.publicOrigin ?? loopback
  const doFetch: typeof globalThis.fetch =
    faults.publicOrigin === undefined
      ? globalThis.fetch
      : (input, init) => {
          const target = input instanceof Request ? input.url : String(input)
          const mapped = target.startsWith(origin) ? `${loopback}${target.slice(origin.length)}` : target
          return globalThis.fetch(mapped, init)
        }
  return { url: `${origin}${MCP_PATH}`, origin, fetch: doFetch, close: () => closing(server) }
}
