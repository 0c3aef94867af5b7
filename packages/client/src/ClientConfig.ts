/**
 * The configuration of the client: who it is, how it registers, what it asks for, and how it talks HTTP.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-registration-approaches | MCP client registration}
 * @module
 */
import type { Wire } from "@keyway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { ClientExtension } from "./Extension.js"
import type { FetchLike } from "./internal/http.js"
import { problemOf } from "./internal/options.js"

export type { FetchLike } from "./internal/http.js"

/**
 * How the client authenticates at the token endpoint.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2 token_endpoint_auth_method}
 */
export type TokenEndpointAuthMethod = "none" | "client_secret_basic" | "client_secret_post" | "private_key_jwt"

/**
 * Client information for one authorization server: pre-registered, entered by the user, or obtained by dynamic
 * registration. Always bound to the `issuer` that issued it and never used with another one.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization/client-registration#authorization-server-binding | MCP 2026-07-28 authorization server binding}
 */
export interface ClientInformation {
  /** The authorization server's issuer identifier these credentials belong to. */
  readonly issuer: string
  readonly client_id: string
  readonly client_secret?: string
  readonly token_endpoint_auth_method?: TokenEndpointAuthMethod
  /** Seconds since the epoch; 0 or absent means the secret does not expire (RFC 7591 §3.2.1). */
  readonly client_secret_expires_at?: number
  readonly redirect_uris?: ReadonlyArray<string>
  /**
   * The grant types it was registered for (RFC 7591 §2); absent means `authorization_code` and `refresh_token` for a
   * registration kept by the client, and any grant for a configured client.
   */
  readonly grant_types?: ReadonlyArray<string>
}

/**
 * A private key for `private_key_jwt` client authentication (RFC 7523 §2.2).
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#ClientAuthentication | OIDC Core §9}
 */
export interface PrivateKeyJwt {
  /** A private `CryptoKey` (or a key accepted by jose's `SignJWT.sign`). */
  readonly key: CryptoKey
  /** The JWS algorithm, for example "ES256" or "RS256". */
  readonly alg: string
  readonly kid?: string
}

/**
 * What the client knows when it chooses among several authorization servers of a protected resource.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9728.html#section-7.6 | RFC 9728 §7.6}
 */
export interface ChooserContext {
  readonly serverUrl: string
  readonly metadata: Wire.ProtectedResourceMetadata
}

/**
 * What the user is asked when no other registration method applies.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-registration-approaches | MCP client registration, step 4}
 */
export interface AskClientContext {
  readonly issuer: string
  readonly metadata: Wire.AuthorizationServerMetadata
  /** The redirect URI to register; absent for a grant without a redirect (the device authorization grant). */
  readonly redirectUri?: string
}

/**
 * Options of the client.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export interface ClientOptions {
  /** Outbound fetch for discovery, registration, token requests and the MCP requests themselves. */
  readonly fetch?: FetchLike
  /** Shown to users on consent pages and sent in dynamic registration. */
  readonly clientName?: string
  /** The https URL of the client's client ID metadata document; used when the server advertises support. */
  readonly clientMetadataUrl?: string
  /** `application_type` sent in dynamic registration; "native" by default (CLI, desktop, localhost apps). */
  readonly applicationType?: "native" | "web"
  /** Pre-registered client information, each bound to its issuer. */
  readonly clients?: ReadonlyArray<ClientInformation>
  /** Asked when no other registration method applies; return undefined to give up. */
  readonly askClientInformation?: (context: AskClientContext) => Promise<ClientInformation | undefined>
  /** Key for `private_key_jwt` (client ID metadata documents with a jwks, or pre-registered clients). */
  readonly privateKeyJwt?: PrivateKeyJwt
  /** Chooses among several authorization servers; the first by default. */
  readonly chooseAuthorizationServer?: (
    servers: ReadonlyArray<string>,
    context: ChooserContext,
  ) => string | Promise<string>
  /** Protected resource metadata to use, per server URL, when the server publishes none. */
  readonly protectedResourceMetadata?: Readonly<Record<string, Wire.ProtectedResourceMetadata>>
  /** Scopes to request instead of the seed's selection (a space-separated string). */
  readonly scope?: string
  /** Ask for `offline_access` when the authorization server lists it (default true). */
  readonly offlineAccess?: boolean
  /** 2025-03-26 fallback when no protected resource metadata exists (default true). */
  readonly legacyFallback?: boolean
  /** Refresh this many seconds before expiry (default 60). */
  readonly refreshSkewSeconds?: number
  /**
   * Authorizations per resource and operation (JSON-RPC method, and tool name for `tools/call`) before a 403
   * `insufficient_scope` becomes a permanent failure, counting the first authorization the operation triggered with
   * a 401 and every step-up (default 3 in total). The count restarts when the operation succeeds.
   */
  readonly maxStepUpAttempts?: number
  /** How long discovery documents stay fresh when the server sends no Cache-Control max-age (default 300). */
  readonly discoveryTtlSeconds?: number
  /**
   * Extensions (see `Extension`): one of them may replace the authorization code flow with another way of obtaining
   * tokens (client credentials, workload identity federation).
   */
  readonly extensions?: ReadonlyArray<ClientExtension>
}

/** The client's options with defaults applied. */
export interface ResolvedOptions {
  readonly fetch: FetchLike
  readonly clientName: string
  readonly clientMetadataUrl: string | undefined
  readonly applicationType: "native" | "web"
  readonly clients: ReadonlyArray<ClientInformation>
  readonly askClientInformation: ClientOptions["askClientInformation"]
  readonly privateKeyJwt: PrivateKeyJwt | undefined
  readonly chooseAuthorizationServer: NonNullable<ClientOptions["chooseAuthorizationServer"]>
  readonly protectedResourceMetadata: Readonly<Record<string, Wire.ProtectedResourceMetadata>>
  readonly scope: string | undefined
  readonly offlineAccess: boolean
  readonly legacyFallback: boolean
  readonly refreshSkewSeconds: number
  readonly maxStepUpAttempts: number
  readonly discoveryTtlSeconds: number
  readonly extensions: ReadonlyArray<ClientExtension>
}

/** Applies the defaults. */
const resolve = (options: ClientOptions = {}): ResolvedOptions => ({
  fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
  clientName: options.clientName ?? "Keyway MCP client",
  clientMetadataUrl: options.clientMetadataUrl,
  applicationType: options.applicationType ?? "native",
  clients: options.clients ?? [],
  askClientInformation: options.askClientInformation,
  privateKeyJwt: options.privateKeyJwt,
  chooseAuthorizationServer: options.chooseAuthorizationServer ?? ((servers) => servers[0] ?? ""),
  protectedResourceMetadata: options.protectedResourceMetadata ?? {},
  scope: options.scope,
  offlineAccess: options.offlineAccess ?? true,
  legacyFallback: options.legacyFallback ?? true,
  refreshSkewSeconds: options.refreshSkewSeconds ?? 60,
  maxStepUpAttempts: options.maxStepUpAttempts ?? 3,
  discoveryTtlSeconds: options.discoveryTtlSeconds ?? 300,
  extensions: options.extensions ?? [],
})

/**
 * Options a client cannot be created with: one its entry does not take (such as `store: { file }`, which only
 * `@keyway/client/node` takes), or one of the wrong shape. `option` names the option at fault (a path such as
 * `clients[0].issuer`); `message` says what is wrong and where the option belongs. `createAuthClient` throws it,
 * and {@link ClientConfig.layer} fails with it.
 */
export class InvalidClientOptions extends Schema.TaggedError<InvalidClientOptions>()("InvalidClientOptions", {
  option: Schema.String,
  message: Schema.String,
}) {}

/** Refuses options the configuration does not take, or of the wrong shape (a caller without types, a cast). */
const checked = (options: ClientOptions): ClientOptions => {
  const problem = problemOf(options, "ClientConfig")
  if (problem !== undefined) throw new InvalidClientOptions(problem)
  return options
}

/**
 * The client configuration as an Effect service.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export class ClientConfig extends Context.Service<ClientConfig, ResolvedOptions>()("@keyway/client/ClientConfig") {
  /**
   * The configuration from options, with defaults applied; throws {@link InvalidClientOptions} for an option it does
   * not take or of the wrong shape.
   */
  static readonly make = (options: ClientOptions = {}): ResolvedOptions => {
    return ClientConfig.of(resolve(checked(options)))
  }
  /**
   * A layer from options, with defaults applied; fails with {@link InvalidClientOptions} for an option it does not
   * take (the store and the user agent are layers of their own) or of the wrong shape.
   */
  static readonly layer = (options: ClientOptions = {}): Layer.Layer<ClientConfig, InvalidClientOptions> =>
    Layer.effect(
      ClientConfig,
      Effect.suspend(() => {
        const problem = problemOf(options, "ClientConfig")
        return problem === undefined
          ? Effect.succeed(ClientConfig.of(resolve(options)))
          : Effect.fail(new InvalidClientOptions(problem))
      }),
    )
}
