/**
 * Client registration in the order the MCP specification recommends: pre-registered client information for that
 * authorization server, a client ID metadata document when the server supports it, dynamic client registration,
 * and finally asking the user. Registrations are stored per authorization server and never reused with another.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization/client-registration | MCP client registration}
 * @module
 */
import { SecureUrl, Wire } from "@keyway/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { AuthError } from "./AuthError.js"
import { ClientConfig, type ClientInformation, type TokenEndpointAuthMethod } from "./ClientConfig.js"
import type { DiscoveredAuthorizationServer } from "./Discovery.js"
import type { ClientExtension } from "./Extension.js"
import { isRecord, readJson, requireSecure, send } from "./internal/http.js"
import { clientKey } from "./internal/storage.js"
import { TokenStore } from "./TokenStore.js"

/** The grant types of the authorization code flow: what a registration declares unless a strategy says otherwise. */
const CODE_GRANT_TYPES: ReadonlyArray<string> = ["authorization_code", "refresh_token"]

/**
 * A stored registration is reused only with its issuer, for a redirect URI it covers (when one is needed), for the
 * grant types it was registered for, and while its secret lives.
 */
const isUsable = (
  client: ClientInformation,
  issuer: string,
  redirectUri: string | undefined,
  grantTypes: ReadonlyArray<string>,
  now: number,
): boolean =>
  client.issuer === issuer &&
  (redirectUri === undefined ||
    client.redirect_uris === undefined ||
    SecureUrl.matchRedirectUri(redirectUri, client.redirect_uris) !== undefined) &&
  grantTypes.every((grant) => (client.grant_types ?? CODE_GRANT_TYPES).includes(grant)) &&
  (client.client_secret_expires_at === undefined ||
    client.client_secret_expires_at === 0 ||
    client.client_secret_expires_at * 1000 > now)

/** Whether a URL can be a client ID metadata document URL: https with a path beyond "/". */
const isClientIdUrl = (raw: string): boolean => {
  const url = URL.parse(raw)
  return url !== null && url.protocol === "https:" && url.pathname !== "/" && url.pathname !== "" && url.hash === ""
}

/** The client metadata the extensions add (spread first: the client's own fields win). */
const extensionMetadata = (extensions: ReadonlyArray<ClientExtension>): Record<string, unknown> =>
  Object.assign({}, ...extensions.map((e) => e.clientMetadata ?? {}))

const AUTH_METHODS: ReadonlyArray<string> = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]

const register = Effect.fnUntraced(function* (
  server: DiscoveredAuthorizationServer,
  endpoint: string,
  redirectUri: string | undefined,
  grantTypes: ReadonlyArray<string>,
) {
  const config = yield* ClientConfig
  yield* requireSecure("registration", endpoint, "the registration endpoint")
  // A client registered for grants without a redirect (the device authorization grant) declares no redirect URI
  // and no response type (RFC 7591 §2: response_types go with the authorization endpoint).
  const body = {
    ...extensionMetadata(config.extensions),
    client_name: config.clientName,
    redirect_uris: redirectUri === undefined ? [] : [redirectUri],
    grant_types: [...grantTypes],
    response_types: grantTypes.includes("authorization_code") ? ["code"] : [],
    token_endpoint_auth_method: "none",
    application_type: config.applicationType,
  }
  const response = yield* send(config.fetch, "registration", endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body),
  })
  const json = yield* readJson("registration", endpoint, response)
  if (response.status !== 201 && response.status !== 200) {
    const error = isRecord(json) && typeof json.error === "string" ? json.error : undefined
    const description = isRecord(json) && typeof json.error_description === "string" ? json.error_description : ""
    return yield* new AuthError({
      step: "registration",
      reason: "registration-failed",
      url: endpoint,
      status: response.status,
      ...(error !== undefined ? { error } : {}),
      message: `dynamic client registration at ${endpoint} failed with HTTP ${response.status}${error !== undefined ? ` ${error}` : ""}${description !== "" ? `: ${description}` : ""}; check the redirect URI and application_type, or pre-register the client`,
    })
  }
  const parsed = Wire.validate(Wire.ClientRegistrationResponse, json, "client registration response")
  if (Result.isFailure(parsed)) {
    return yield* new AuthError({
      step: "registration",
      reason: "invalid-document",
      url: endpoint,
      message: `the registration response from ${endpoint} is invalid: ${parsed.failure.message}`,
    })
  }
  const registered = parsed.success
  const method =
    typeof registered.token_endpoint_auth_method === "string" &&
    AUTH_METHODS.includes(registered.token_endpoint_auth_method)
      ? (registered.token_endpoint_auth_method as TokenEndpointAuthMethod)
      : registered.client_secret !== undefined
        ? "client_secret_basic"
        : "none"
  const client: ClientInformation = {
    issuer: server.issuer,
    client_id: registered.client_id,
    token_endpoint_auth_method: method,
    redirect_uris: Array.isArray(registered.redirect_uris)
      ? registered.redirect_uris
      : redirectUri === undefined
        ? []
        : [redirectUri],
    // Kept only when they are not the authorization code flow's, which an absent member means.
    ...(grantTypes === CODE_GRANT_TYPES
      ? {}
      : { grant_types: Array.isArray(registered.grant_types) ? registered.grant_types : grantTypes }),
    ...(registered.client_secret !== undefined ? { client_secret: registered.client_secret } : {}),
    ...(typeof registered.client_secret_expires_at === "number"
      ? { client_secret_expires_at: registered.client_secret_expires_at }
      : {}),
  }
  return client
})

/**
 * Obtains client information for an authorization server, in the specification's order: pre-registered (configured,
 * or stored from an earlier registration or user entry with that same issuer), client ID metadata document, dynamic
 * registration, asking the user. New registrations are stored under the issuer.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization/client-registration | MCP client registration}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3 | RFC 7591 §3}
 */
export const obtainClient = Effect.fn("Registration.obtainClient")(function* (
  server: DiscoveredAuthorizationServer,
  redirectUri: string | undefined,
  grantTypes: ReadonlyArray<string> = CODE_GRANT_TYPES,
) {
  const config = yield* ClientConfig
  const store = yield* TokenStore
  const now = yield* Clock.currentTimeMillis
  const configured = config.clients.find((client) => client.issuer === server.issuer)
  if (configured !== undefined) return configured
  const stored = (yield* store.get(clientKey(server.issuer))) as ClientInformation | undefined
  if (stored !== undefined && isUsable(stored, server.issuer, redirectUri, grantTypes, now)) return stored
  if (
    server.metadata.client_id_metadata_document_supported === true &&
    config.clientMetadataUrl !== undefined &&
    isClientIdUrl(config.clientMetadataUrl)
  ) {
    const client: ClientInformation = {
      issuer: server.issuer,
      client_id: config.clientMetadataUrl,
      token_endpoint_auth_method: config.privateKeyJwt !== undefined ? "private_key_jwt" : "none",
    }
    return client
  }
  const endpoint = server.metadata.registration_endpoint
  if (typeof endpoint === "string") {
    const client = yield* register(server, endpoint, redirectUri, grantTypes)
    yield* store.set(clientKey(server.issuer), client)
    return client
  }
  const ask = config.askClientInformation
  if (ask !== undefined) {
    const entered = yield* Effect.promise(() =>
      ask({
        issuer: server.issuer,
        metadata: server.metadata,
        ...(redirectUri === undefined ? {} : { redirectUri }),
      }),
    )
    if (entered !== undefined) {
      const client: ClientInformation = { ...entered, issuer: server.issuer }
      yield* store.set(clientKey(server.issuer), client)
      return client
    }
  }
  return yield* new AuthError({
    step: "registration",
    reason: "no-client",
    url: server.metadataUrl ?? server.issuer,
    message: `no way to obtain a client ID for ${server.issuer}: it supports neither client ID metadata documents (or no https clientMetadataUrl is configured) nor dynamic registration; pre-register a client and pass it in the clients option`,
  })
})

/**
 * Options for {@link buildClientMetadataDocument}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-client-id-metadata-document-00#section-3 | CIMD §3}
 */
export interface ClientMetadataDocumentOptions {
  /** The https URL the document is served at; it becomes the `client_id`. */
  readonly url: string
  readonly clientName: string
  readonly redirectUris: ReadonlyArray<string>
  readonly clientUri?: string
  readonly logoUri?: string
  /** `none` by default; `private_key_jwt` needs `jwks` or `jwksUri`. */
  readonly tokenEndpointAuthMethod?: "none" | "private_key_jwt"
  readonly jwks?: { readonly keys: ReadonlyArray<Record<string, unknown>> }
  readonly jwksUri?: string
  readonly scope?: string
  /**
   * The client's extensions: the client metadata they add (DPoP's `dpop_bound_access_tokens`, RFC 9449 §5.2) goes
   * into the document as into a registration request, never replacing the document's own fields.
   */
  readonly extensions?: ReadonlyArray<ClientExtension>
}

/**
 * Builds a client ID metadata document whose `client_id` is the URL it is served at, and validates it.
 * Throws an {@link AuthError} when the URL is not https with a path or a required field is missing.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-client-id-metadata-document-00#section-3 | CIMD §3}
 */
export const buildClientMetadataDocument = (options: ClientMetadataDocumentOptions): Wire.ClientIdMetadataDocument => {
  const method = options.tokenEndpointAuthMethod ?? "none"
  const document: Record<string, unknown> = {
    ...extensionMetadata(options.extensions ?? []),
    client_id: options.url,
    client_name: options.clientName,
    redirect_uris: [...options.redirectUris],
    // The grant types the extensions' strategies use with this client (the device authorization grant) besides the
    // authorization code flow's.
    grant_types: [
      ...new Set([...CODE_GRANT_TYPES, ...(options.extensions ?? []).flatMap((e) => e.strategy?.grantTypes ?? [])]),
    ],
    response_types: ["code"],
    token_endpoint_auth_method: method,
    ...(options.clientUri !== undefined ? { client_uri: options.clientUri } : {}),
    ...(options.logoUri !== undefined ? { logo_uri: options.logoUri } : {}),
    ...(options.jwks !== undefined ? { jwks: options.jwks } : {}),
    ...(options.jwksUri !== undefined ? { jwks_uri: options.jwksUri } : {}),
    ...(options.scope !== undefined ? { scope: options.scope } : {}),
  }
  if (method === "private_key_jwt" && options.jwks === undefined && options.jwksUri === undefined) {
    throw new AuthError({
      step: "registration",
      reason: "invalid-input",
      url: options.url,
      message: `a client ID metadata document using private_key_jwt needs jwks or jwksUri`,
    })
  }
  const result = Wire.validateClientIdMetadataDocument(document, options.url)
  if (Result.isFailure(result)) {
    throw new AuthError({
      step: "registration",
      reason: "invalid-document",
      url: options.url,
      message: `the client ID metadata document for ${options.url} is invalid: ${result.failure.message}`,
    })
  }
  return result.success
}

/**
 * A Web-standard handler that serves a client ID metadata document at its URL's path (GET and HEAD), with a
 * short public cache lifetime; any other path answers 404 and any other method 405.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-client-id-metadata-document-00#section-4 | CIMD §4}
 */
export const clientMetadataDocumentHandler = (
  document: Wire.ClientIdMetadataDocument,
  options: { readonly maxAgeSeconds?: number } = {},
): ((request: Request) => Promise<Response>) => {
  const path = new URL(document.client_id).pathname
  const body = JSON.stringify(document)
  return async (request) => {
    if (new URL(request.url).pathname !== path) return new Response("Not Found", { status: 404 })
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("Method Not Allowed", { status: 405, headers: { allow: "GET, HEAD" } })
    }
    return new Response(request.method === "HEAD" ? null : body, {
      status: 200,
      headers: {
        "content-type": "application/json",
        "cache-control": `public, max-age=${options.maxAgeSeconds ?? 3600}`,
      },
    })
  }
}

/**
 * The client information that was used to obtain tokens, for refreshing them: configured, stored, or the client ID
 * metadata document URL; undefined when none with that issuer and client ID is held any more.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization/client-registration#authorization-server-binding | MCP 2026-07-28 authorization server binding}
 */
export const findClient = Effect.fn("Registration.findClient")(function* (issuer: string, clientId: string) {
  const config = yield* ClientConfig
  const store = yield* TokenStore
  const configured = config.clients.find((client) => client.issuer === issuer && client.client_id === clientId)
  if (configured !== undefined) return configured
  const stored = (yield* store.get(clientKey(issuer))) as ClientInformation | undefined
  if (stored !== undefined && stored.issuer === issuer && stored.client_id === clientId) return stored
  if (config.clientMetadataUrl === clientId) {
    const client: ClientInformation = {
      issuer,
      client_id: clientId,
      token_endpoint_auth_method: config.privateKeyJwt !== undefined ? "private_key_jwt" : "none",
    }
    return client
  }
  return undefined
})

/**
 * Forgets the stored registration of a client the authorization server refused as unknown (`invalid_client`: it lost
 * or removed the registration), so that the next authorization registers anew; true when one was stored and is now
 * gone. A configured client is never forgotten: it is the caller's to fix.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.2 | RFC 6749 §5.2 (invalid_client)}
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization/client-registration | MCP client registration}
 */
export const forgetClient = Effect.fn("Registration.forgetClient")(function* (client: ClientInformation) {
  const config = yield* ClientConfig
  const store = yield* TokenStore
  if (
    config.clients.some(
      (configured) => configured.issuer === client.issuer && configured.client_id === client.client_id,
    )
  ) {
    return false
  }
  const stored = (yield* store.get(clientKey(client.issuer))) as ClientInformation | undefined
  if (stored?.client_id !== client.client_id) return false
  yield* store.delete(clientKey(client.issuer))
  return true
})
