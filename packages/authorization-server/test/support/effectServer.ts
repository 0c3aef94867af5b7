import { Clock, Effect, Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import {
  AuthorizationServer,
  type AuthorizationServerInstance,
  type ServerOptions,
  type StorageServices,
} from "../../src/AuthorizationServer.js"
import type { Rotation } from "../../src/KeyRotation.js"
import { listen } from "../../src/NodeServer.js"
import type { StorageError } from "../../src/storage/Errors.js"
import { KeyStore, type SigningKey } from "../../src/storage/Storage.js"
import { UserAuthenticator } from "../../src/UserAuthenticator.js"
import { alicePasswordHash, MCP, type TestServer } from "./server.js"
import { RS_SECRET } from "./tokens.js"

export interface EffectTestServer extends TestServer {
  /** The time of the server's clock, in NumericDate seconds. */
  readonly now: () => number
  /** Moves the server's clock forward, running the background rounds that fall due on the way. */
  readonly adjust: (seconds: number) => Promise<void>
  readonly rotate: () => Promise<Rotation>
  /** Every stored key, oldest first. */
  readonly keys: () => Promise<ReadonlyArray<SigningKey>>
  /** The kids of the JWK Set served at `/jwks`. */
  readonly jwksKids: () => Promise<ReadonlyArray<string>>
}

/**
 * The Effect face on a loopback port, over the given storage: what `createAuthorizationServer` builds, on Effect's
 * `TestClock` set to `startAt` (NumericDate seconds; the real time by default) before anything is built, so every
 * time-driven part (token and code lifetimes, key activation, the rotation schedule, retirement, the purge) moves
 * only with {@link EffectTestServer.adjust}.
 *
 * The issuer is the listener's URL unless `overrides.issuer` names another: that of an instance it stands behind one
 * issuer with (a database serves one issuer). The result's `issuer` is always this instance's own address, where its
 * endpoints answer.
 */
export const startEffectServer = async (
  storage: Layer.Layer<StorageServices, StorageError>,
  overrides: Partial<ServerOptions> = {},
  startAt: number = Math.floor(Date.now() / 1000),
): Promise<EffectTestServer> => {
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const running = await listen((request) => handler(request))
  const options: ServerOptions = {
    issuer: running.url,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => undefined,
    resources: [{ uri: MCP, name: "Example MCP", scopes: { "tools:read": "List the tools", "tools:call": "Call" } }],
    clients: [
      { clientId: "public-app", clientName: "Public App", redirectUris: ["https://app.example.com/callback"] },
      { clientId: "rs", clientSecret: RS_SECRET, redirectUris: [], grantTypes: [] },
    ],
    introspectionClients: ["rs"],
    users: [{ username: "alice", passwordHash: await alicePasswordHash() }],
    ...overrides,
  }
  const runtime = ManagedRuntime.make(
    AuthorizationServer.layer(options).pipe(
      Layer.provideMerge(Layer.merge(storage, UserAuthenticator.layerUsers(options.users ?? []))),
      Layer.provideMerge(Layer.provideMerge(Layer.effectDiscard(TestClock.setTime(startAt * 1000)), TestClock.layer())),
    ),
  )
  handler = (request) => runtime.runPromise(AuthorizationServer.use((s) => s.handle(request)))
  await runtime.runPromise(AuthorizationServer.useSync(() => undefined))
  const server = {
    url: running.url,
    issuer: running.url,
    as: undefined as unknown as AuthorizationServerInstance,
    running,
    close: async () => {
      await running.close()
      await runtime.dispose()
    },
    now: () => Math.floor(runtime.runSync(Clock.currentTimeMillis) / 1000),
    adjust: (seconds: number) => runtime.runPromise(TestClock.adjust(seconds * 1000)),
    rotate: () => runtime.runPromise(AuthorizationServer.use((s) => s.rotateSigningKey)),
    keys: () => runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.list())),
    jwksKids: async () => {
      const response = await fetch(`${running.url}/jwks`)
      const body = (await response.json()) as { keys: ReadonlyArray<{ kid: string }> }
      return body.keys.map((k) => k.kid)
    },
  }
  return server
}
