/**
 * An in-memory vault for the connections' tests until the package's own memory vault is merged: the service's
 * contract (single-use flows, expiry, broken connections, refresh), without encryption or storage.
 */
import { Effect, Option } from "effect"
import {
  type Connection,
  type ConnectionKey,
  type PendingFlow,
  type ProviderTokens,
  RefreshRejected,
  Vault,
} from "../../src/Vault.js"

const id = (key: ConnectionKey) => JSON.stringify([key.issuer, key.subject, key.provider])

export const memoryVault = (): Vault["Service"] & { readonly connections: Map<string, Connection> } => {
  const connections = new Map<string, Connection>()
  const flows = new Map<string, PendingFlow>()
  const usable = (tokens: ProviderTokens, now: number) => tokens.expiresAt === undefined || tokens.expiresAt > now + 30
  return Object.assign(
    Vault.of({
      get: (key) => Effect.sync(() => Option.fromNullishOr(connections.get(id(key)))),
      put: (key, tokens, now) =>
        Effect.sync(() => {
          const old = connections.get(id(key))
          connections.set(id(key), {
            key,
            tokens,
            status: "connected",
            connectedAt: old?.connectedAt ?? now,
            updatedAt: now,
          })
        }),
      token: (key, now, refresh) =>
        Effect.gen(function* () {
          const held = connections.get(id(key))
          if (held === undefined || held.status === "broken") return Option.none()
          if (usable(held.tokens, now)) return Option.some(held.tokens)
          const refreshToken = held.tokens.refreshToken
          if (refreshToken === undefined) return Option.none()
          const fresh = yield* refresh(refreshToken).pipe(
            Effect.tapError((e) =>
              Effect.sync(() => {
                if (e instanceof RefreshRejected)
                  connections.set(id(key), { ...held, status: "broken", updatedAt: now })
              }),
            ),
          )
          const tokens = fresh.refreshToken === undefined ? { ...fresh, refreshToken } : fresh
          connections.set(id(key), { ...held, tokens, updatedAt: now })
          return Option.some(tokens)
        }),
      markBroken: (key, now) =>
        Effect.sync(() => {
          const held = connections.get(id(key))
          if (held !== undefined) connections.set(id(key), { ...held, status: "broken", updatedAt: now })
        }),
      delete: (key) => Effect.sync(() => connections.delete(id(key))),
      list: (issuer, subject) =>
        Effect.sync(() =>
          [...connections.values()].filter((c) => c.key.issuer === issuer && c.key.subject === subject),
        ),
      putFlow: (reference, flow) => Effect.sync(() => void flows.set(reference, flow)),
      getFlow: (reference, now) =>
        Effect.sync(() => Option.fromNullishOr(flows.get(reference)).pipe(Option.filter((f) => f.expiresAt > now))),
      takeFlow: (reference, now) =>
        Effect.sync(() => {
          const flow = flows.get(reference)
          flows.delete(reference)
          return Option.fromNullishOr(flow).pipe(Option.filter((f) => f.expiresAt > now))
        }),
    }),
    { connections },
  )
}
