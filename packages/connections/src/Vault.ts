/**
 * The token vault: the tokens each user holds at each third-party provider, encrypted at rest, refreshed once however
 * many calls need them at the same time, marked broken when the provider refuses the refresh token, and deleted on
 * disconnect. Also the pending connect flows (single use, short-lived), so that several instances of one MCP server on
 * one database share them.
 *
 * @module
 */
import { Context, type Effect, Layer, type Option } from "effect"
import type { KeyRing } from "./KeyRing.js"
import type { RefreshRejected, VaultError } from "./vault/errors.js"
import { memoryStore } from "./vault/memory.js"
import { makeVault, type VaultOptions } from "./vault/service.js"

export { RefreshRejected, VaultError } from "./vault/errors.js"
export type { VaultOptions } from "./vault/service.js"

/**
 * Whose tokens at which provider: the MCP user as the MCP authorization server knows them (`iss` and `sub` of the
 * verified MCP access token) and the configured provider's ID.
 */
export interface ConnectionKey {
  readonly issuer: string
  readonly subject: string
  readonly provider: string
}

/**
 * The tokens a provider's token endpoint answered (RFC 6749 §5.1), as kept in the vault.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.1 | RFC 6749 §5.1}
 */
export interface ProviderTokens {
  readonly accessToken: string
  readonly tokenType: string
  readonly refreshToken?: string
  /** Seconds since the epoch; absent when the provider gave no `expires_in`. */
  readonly expiresAt?: number
  /** The granted scope, space-separated, when the provider said. */
  readonly scope?: string
}

/** `connected`: usable; `broken`: the provider refused the refresh token, so the user must connect again. */
export type ConnectionStatus = "connected" | "broken"

/** A stored connection, decrypted. */
export interface Connection {
  readonly key: ConnectionKey
  readonly tokens: ProviderTokens
  readonly status: ConnectionStatus
  /** Seconds since the epoch. */
  readonly connectedAt: number
  readonly updatedAt: number
}

/**
 * A connect flow in progress: what the callback needs to finish it. Stored under the SHA-256 of its opaque reference,
 * its secrets encrypted like the tokens.
 */
export interface PendingFlow {
  readonly key: ConnectionKey
  /** The MCP elicitation this flow completes. */
  readonly elicitationId: string
  /** The `state` sent to the provider (bound to this flow and its user). */
  readonly state: string
  /** The PKCE `code_verifier` (RFC 7636). */
  readonly codeVerifier: string
  /** The redirect URI sent in the authorization request. */
  readonly redirectUri: string
  /** The provider's issuer, when it has one (checked against `iss` in the response, RFC 9207). */
  readonly issuer?: string
  /** Seconds since the epoch. */
  readonly expiresAt: number
}

/**
 * The vault service. Every method is one transaction; records are encrypted with AES-256-GCM under the key ring's
 * current key and name their key.
 */
export class Vault extends Context.Service<
  Vault,
  {
    readonly get: (key: ConnectionKey) => Effect.Effect<Option.Option<Connection>, VaultError>
    /** Stores (or replaces) the tokens of a connection, status `connected`. */
    readonly put: (key: ConnectionKey, tokens: ProviderTokens, now: number) => Effect.Effect<void, VaultError>
    /**
     * An access token usable until at least `now + skew`: the stored one, or a refreshed one. Concurrent calls for
     * one key share one `refresh` (single flight, across the instances sharing the database). `refresh` receives the
     * refresh token and answers the provider's new tokens (a response without a refresh token keeps the old one);
     * when it fails with {@link RefreshRejected} the connection is marked broken and the failure is returned.
     * `Option.none()` when there is no usable connection (none, broken, or expired without a refresh token).
     */
    readonly token: <E>(
      key: ConnectionKey,
      now: number,
      refresh: (refreshToken: string) => Effect.Effect<ProviderTokens, RefreshRejected | E>,
    ) => Effect.Effect<Option.Option<ProviderTokens>, VaultError | RefreshRejected | E>
    readonly markBroken: (key: ConnectionKey, now: number) => Effect.Effect<void, VaultError>
    /** Deletes the connection; true when there was one. */
    readonly delete: (key: ConnectionKey) => Effect.Effect<boolean, VaultError>
    /** The user's connections (status and dates, no tokens are needed by callers but they are decrypted anyway). */
    readonly list: (issuer: string, subject: string) => Effect.Effect<ReadonlyArray<Connection>, VaultError>
    /** Stores a pending flow under its opaque reference (hashed inside). */
    readonly putFlow: (reference: string, flow: PendingFlow) => Effect.Effect<void, VaultError>
    /** Reads a pending flow without consuming it (the connect page shows it before sending the user on). */
    readonly getFlow: (reference: string, now: number) => Effect.Effect<Option.Option<PendingFlow>, VaultError>
    /** Takes a pending flow: single use; none when unknown, expired or already taken. */
    readonly takeFlow: (reference: string, now: number) => Effect.Effect<Option.Option<PendingFlow>, VaultError>
    /** Deletes the flows taken or expired at `now`; answers how many. */
    readonly purgeFlows: (now: number) => Effect.Effect<number, VaultError>
    /**
     * Re-encrypts under the key ring's current key every record sealed under an older one (connections and flows),
     * so that the older key can then leave the ring; answers how many records were rewritten. Records written after
     * a rotation use the current key anyway.
     */
    readonly reencrypt: () => Effect.Effect<number, VaultError>
  }
>()("@keyway/connections/Vault") {
  /** A vault in this process's memory (tests, a single instance that may lose its connections on restart). */
  static readonly layerMemory = (keyRing: KeyRing, options: VaultOptions = {}): Layer.Layer<Vault> =>
    Layer.sync(Vault, () => memoryVault(keyRing, options))
}

/** The in-memory vault as a plain service value (what {@link Vault.layerMemory} provides). */
export const memoryVault = (keyRing: KeyRing, options: VaultOptions = {}): Vault["Service"] =>
  makeVault(memoryStore(), keyRing, options)
