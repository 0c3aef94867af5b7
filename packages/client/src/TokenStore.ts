/**
 * Where the client keeps tokens, client registrations and pending authorizations: in memory, in the browser's Web
 * Storage, or in a store of your own. The owner-only JSON file needs Node.js and is in `@keyway/client/node`.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1 (token storage)}
 * @module
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { isPendingKey } from "./internal/storage.js"

/**
 * A key-value store of JSON values. Implement these three methods to keep the client's state anywhere.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export interface Backend {
  readonly get: (key: string) => Promise<unknown>
  readonly set: (key: string, value: unknown) => Promise<void>
  readonly delete: (key: string) => Promise<void>
}

/**
 * The tokens held for one MCP server, with the absolute expiry and the scope actually granted.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.1 | RFC 6749 §5.1}
 */
export interface Tokens {
  readonly access_token: string
  /** `Bearer`, or the type an extension accepted for it (`DPoP`, RFC 9449 §5). */
  readonly token_type: string
  readonly refresh_token?: string
  /** Milliseconds since the epoch; absent when the server gave no lifetime. */
  readonly expires_at?: number
  /** The granted scope (the requested one when the server did not say otherwise, RFC 6749 §5.1). */
  readonly scope: string
  /** The resource the token was issued for, exactly as the protected resource metadata published it. */
  readonly resource: string
  /** The issuer of the authorization server that issued the token. */
  readonly issuer: string
  /** The client the tokens were issued to; absent for tokens obtained without one (workload identity federation). */
  readonly client_id?: string
  /**
   * The token endpoint of the issuer's validated metadata when the tokens were obtained, so that a refresh (after a
   * restart too) needs no new discovery. Absent in tokens stored by earlier versions: those refresh after discovery.
   */
  readonly token_endpoint?: string
  /** True when the authorization server was found by the 2025-03-26 fallback (refresh finds it the same way). */
  readonly legacy?: boolean
  /** Milliseconds since the epoch. */
  readonly obtained_at: number
}

/**
 * The state of an authorization request between its start and its callback (two-phase flows persist it).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4}
 */
export interface Pending {
  readonly state: string
  readonly code_verifier: string
  /** The issuer recorded from validated metadata before redirecting. */
  readonly issuer: string
  readonly iss_parameter_supported: boolean
  readonly redirect_uri: string
  readonly resource: string
  readonly scope: string
  readonly client_id: string
  readonly server: string
  /** True when the authorization server was found by the 2025-03-26 fallback. */
  readonly legacy?: boolean
  readonly created_at: number
}

/**
 * The client's storage as an Effect service.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export class TokenStore extends Context.Service<
  TokenStore,
  {
    readonly get: (key: string) => Effect.Effect<unknown>
    readonly set: (key: string, value: unknown) => Effect.Effect<void>
    readonly delete: (key: string) => Effect.Effect<void>
  }
>()("@keyway/client/TokenStore") {
  /** A store over any {@link Backend}. */
  static readonly layerBackend = (backend: Backend): Layer.Layer<TokenStore> =>
    Layer.succeed(TokenStore, fromBackend(backend))
  /** A store that lives as long as the process. */
  static readonly layerMemory: Layer.Layer<TokenStore> = Layer.sync(TokenStore, () => fromBackend(memory()))
  /** A store in the browser's Web Storage; see {@link webStorage}. */
  static readonly layerWebStorage = (options: WebStorageOptions = {}): Layer.Layer<TokenStore> =>
    Layer.sync(TokenStore, () => fromBackend(webStorage(options)))
}

/**
 * Wraps a {@link Backend} as the {@link TokenStore} service.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export const fromBackend = (backend: Backend): TokenStore["Service"] =>
  TokenStore.of({
    get: (key) => Effect.promise(() => backend.get(key)),
    set: (key, value) => Effect.promise(() => backend.set(key, value)),
    delete: (key) => Effect.promise(() => backend.delete(key)),
  })

/**
 * An in-memory backend. Values are copied in and out, so callers never share mutable state with the store.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export const memory = (): Backend => {
  const entries = new Map<string, string>()
  return {
    get: async (key) => {
      const value = entries.get(key)
      return value === undefined ? undefined : (JSON.parse(value) as unknown)
    },
    set: async (key, value) => {
      entries.set(key, JSON.stringify(value))
    },
    delete: async (key) => {
      entries.delete(key)
    },
  }
}

/**
 * Options of {@link webStorage}.
 *
 * @see {@link https://html.spec.whatwg.org/multipage/webstorage.html | HTML Web Storage}
 */
export interface WebStorageOptions {
  /** Where tokens and registrations go: `localStorage` by default; `sessionStorage` keeps them for the tab only. */
  readonly storage?: Storage
  /** Where pending authorizations (`state`, PKCE verifier) go: `sessionStorage` by default. */
  readonly pendingStorage?: Storage
  /** Prefix of every key, so that several clients (or apps) on one origin keep apart; "keyway:" by default. */
  readonly prefix?: string
}

/**
 * A backend in the browser's Web Storage, for web apps with a public client: tokens and client registrations in
 * `localStorage` (they survive reloads and are shared by the origin's tabs), pending authorizations, whose `state`
 * and PKCE verifier only need to survive the round trip to the authorization server, in the tab's `sessionStorage`.
 *
 * The tradeoffs: any script running on the origin can read Web Storage, so a cross-site scripting flaw exposes the
 * tokens; a browser cannot keep a client secret, so use a public client (no secret, PKCE only); and ask an
 * authorization server that rotates refresh tokens (OAuth 2.1 requires rotation or sender-constrained refresh
 * tokens for public clients), so that a stolen refresh token is detected at its next use. Pass
 * `storage: sessionStorage` to keep tokens for the tab's lifetime only. The {@link memory} store does not fit the
 * redirect agent: the pending authorization must survive the page's navigation to the callback.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-browser-based-apps#section-8 | OAuth 2.0 for Browser-Based Applications §8 (token storage)}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.3.1 | OAuth 2.1 §4.3.1 (refresh token rotation)}
 */
export const webStorage = (options: WebStorageOptions = {}): Backend => {
  const prefix = options.prefix ?? "keyway:"
  // Looked up on use, not at construction, so that a module loaded where there is no Web Storage still loads.
  const storageFor = (key: string): Storage =>
    isPendingKey(key)
      ? (options.pendingStorage ?? globalThis.sessionStorage)
      : (options.storage ?? globalThis.localStorage)
  return {
    get: async (key) => {
      const value = storageFor(key).getItem(prefix + key)
      return value === null ? undefined : (JSON.parse(value) as unknown)
    },
    set: async (key, value) => {
      storageFor(key).setItem(prefix + key, JSON.stringify(value))
    },
    delete: async (key) => {
      storageFor(key).removeItem(prefix + key)
    },
  }
}
