/**
 * The port a vault backend implements: rows as stored (sealed), one statement per method, each atomic on its own.
 * The vault's rules (sealing, freshness, single flight, leases) are written once, in `service.ts`, over this port.
 */
import type { Effect } from "effect"
import type { Sealed } from "../KeyRing.js"
import type { ConnectionKey, ConnectionStatus } from "../Vault.js"
import type { VaultError } from "./errors.js"

/** A connection row. `lease`/`leaseUntil`: the instance refreshing it and until when (seconds) it may. */
export interface ConnectionRow extends Sealed {
  readonly issuer: string
  readonly subject: string
  readonly provider: string
  readonly status: ConnectionStatus
  readonly connectedAt: number
  readonly updatedAt: number
  readonly version: number
  readonly lease: string | null
  readonly leaseUntil: number
}

/** A pending flow row, under the SHA-256 of its reference. */
export interface FlowRow extends Sealed {
  readonly referenceHash: string
  readonly expiresAt: number
}

export interface Store {
  readonly getConnection: (key: ConnectionKey) => Effect.Effect<ConnectionRow | undefined, VaultError>
  readonly listConnections: (issuer: string, subject: string) => Effect.Effect<ReadonlyArray<ConnectionRow>, VaultError>
  /** Rows sealed under another key than `keyId` (for re-encryption). */
  readonly connectionsNotUnder: (keyId: string) => Effect.Effect<ReadonlyArray<ConnectionRow>, VaultError>
  /** Inserts or replaces: status `connected`, connected and updated `now`, version bumped, lease dropped. */
  readonly putConnection: (key: ConnectionKey, sealed: Sealed, now: number) => Effect.Effect<void, VaultError>
  /**
   * Takes the refresh lease when the row is still at `version`, connected and not leased (or its lease ended before
   * `now`); true when taken.
   */
  readonly claim: (
    key: ConnectionKey,
    version: number,
    lease: string,
    leaseUntil: number,
    now: number,
  ) => Effect.Effect<boolean, VaultError>
  /**
   * Ends a lease this instance holds: new tokens (`sealed`) or none, and the status; version bumped. False when the
   * lease was lost (the row was replaced, marked or deleted meanwhile).
   */
  readonly finish: (
    key: ConnectionKey,
    lease: string,
    sealed: Sealed | undefined,
    status: ConnectionStatus,
    now: number,
  ) => Effect.Effect<boolean, VaultError>
  /** Drops a lease this instance holds without changing anything else. */
  readonly release: (key: ConnectionKey, lease: string) => Effect.Effect<void, VaultError>
  /** Replaces the sealed tokens of a row still at `version` (re-encryption); true when replaced. */
  readonly reseal: (key: ConnectionKey, version: number, sealed: Sealed) => Effect.Effect<boolean, VaultError>
  readonly markBroken: (key: ConnectionKey, now: number) => Effect.Effect<void, VaultError>
  readonly deleteConnection: (key: ConnectionKey) => Effect.Effect<boolean, VaultError>
  readonly putFlow: (row: FlowRow) => Effect.Effect<void, VaultError>
  /** The flow when it is not taken and expires after `now`. */
  readonly getFlow: (referenceHash: string, now: number) => Effect.Effect<FlowRow | undefined, VaultError>
  /** Marks the flow taken and returns it, atomically, when it was not taken and expires after `now`. */
  readonly takeFlow: (referenceHash: string, now: number) => Effect.Effect<FlowRow | undefined, VaultError>
  /** Deletes taken flows and flows expired at `now`; how many. */
  readonly purgeFlows: (now: number) => Effect.Effect<number, VaultError>
  readonly flowsNotUnder: (keyId: string) => Effect.Effect<ReadonlyArray<FlowRow>, VaultError>
  /** Replaces the sealed payload of a flow still sealed as `previous`; true when replaced. */
  readonly resealFlow: (referenceHash: string, previous: Sealed, sealed: Sealed) => Effect.Effect<boolean, VaultError>
}
