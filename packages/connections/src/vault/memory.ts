/** The memory backend: maps in this process, each method atomic because it runs without yielding. */
import { Effect } from "effect"
import type { Sealed } from "../KeyRing.js"
import type { ConnectionKey } from "../Vault.js"
import type { ConnectionRow, FlowRow, Store } from "./store.js"

interface FlowEntry {
  readonly row: FlowRow
  readonly taken: boolean
}

const id = (key: ConnectionKey): string => JSON.stringify([key.issuer, key.subject, key.provider])

export const memoryStore = (): Store => {
  const connections = new Map<string, ConnectionRow>()
  const flows = new Map<string, FlowEntry>()
  const update = (key: ConnectionKey, when: (row: ConnectionRow) => boolean, change: Partial<ConnectionRow>) =>
    Effect.sync(() => {
      const row = connections.get(id(key))
      if (row === undefined || !when(row)) return false
      connections.set(id(key), { ...row, ...change })
      return true
    })
  const sealedOf = (sealed: Sealed): Sealed => ({ keyId: sealed.keyId, iv: sealed.iv, ciphertext: sealed.ciphertext })
  return {
    getConnection: (key) => Effect.sync(() => connections.get(id(key))),
    listConnections: (issuer, subject) =>
      Effect.sync(() =>
        [...connections.values()]
          .filter((row) => row.issuer === issuer && row.subject === subject)
          .sort((a, b) => (a.provider < b.provider ? -1 : a.provider > b.provider ? 1 : 0)),
      ),
    connectionsNotUnder: (keyId) => Effect.sync(() => [...connections.values()].filter((row) => row.keyId !== keyId)),
    putConnection: (key, sealed, now) =>
      Effect.sync(() => {
        const previous = connections.get(id(key))
        connections.set(id(key), {
          ...key,
          ...sealedOf(sealed),
          status: "connected",
          connectedAt: now,
          updatedAt: now,
          version: (previous?.version ?? 0) + 1,
          lease: null,
          leaseUntil: 0,
        })
      }),
    claim: (key, version, lease, leaseUntil, now) =>
      update(
        key,
        (row) => row.version === version && row.status === "connected" && (row.lease === null || row.leaseUntil <= now),
        { lease, leaseUntil },
      ),
    finish: (key, lease, sealed, status, now) =>
      Effect.suspend(() => {
        const row = connections.get(id(key))
        return update(key, (current) => current.lease === lease, {
          ...(sealed === undefined ? {} : sealedOf(sealed)),
          status,
          updatedAt: now,
          version: (row?.version ?? 0) + 1,
          lease: null,
          leaseUntil: 0,
        })
      }),
    release: (key, lease) => Effect.asVoid(update(key, (row) => row.lease === lease, { lease: null, leaseUntil: 0 })),
    reseal: (key, version, sealed) =>
      update(key, (row) => row.version === version, { ...sealedOf(sealed), version: version + 1 }),
    markBroken: (key, now) =>
      Effect.suspend(() => {
        const row = connections.get(id(key))
        return Effect.asVoid(
          update(key, () => true, {
            status: "broken",
            updatedAt: now,
            version: (row?.version ?? 0) + 1,
            lease: null,
            leaseUntil: 0,
          }),
        )
      }),
    deleteConnection: (key) => Effect.sync(() => connections.delete(id(key))),
    putFlow: (row) =>
      Effect.sync(() => {
        flows.set(row.referenceHash, { row, taken: false })
      }),
    getFlow: (referenceHash, now) =>
      Effect.sync(() => {
        const entry = flows.get(referenceHash)
        return entry === undefined || entry.taken || entry.row.expiresAt <= now ? undefined : entry.row
      }),
    takeFlow: (referenceHash, now) =>
      Effect.sync(() => {
        const entry = flows.get(referenceHash)
        if (entry === undefined || entry.taken || entry.row.expiresAt <= now) return undefined
        flows.set(referenceHash, { row: entry.row, taken: true })
        return entry.row
      }),
    purgeFlows: (now) =>
      Effect.sync(() => {
        let purged = 0
        for (const [hash, entry] of flows)
          if (entry.taken || entry.row.expiresAt <= now) {
            flows.delete(hash)
            purged++
          }
        return purged
      }),
    flowsNotUnder: (keyId) =>
      Effect.sync(() => [...flows.values()].filter((entry) => entry.row.keyId !== keyId).map((entry) => entry.row)),
    resealFlow: (referenceHash, previous, sealed) =>
      Effect.sync(() => {
        const entry = flows.get(referenceHash)
        if (entry === undefined || entry.row.iv !== previous.iv || entry.row.keyId !== previous.keyId) return false
        flows.set(referenceHash, { row: { ...entry.row, ...sealedOf(sealed) }, taken: entry.taken })
        return true
      }),
  }
}
