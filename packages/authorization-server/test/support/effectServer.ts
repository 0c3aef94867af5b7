import { Effect, Layer, ManagedRuntime } from "effect"
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
  readonly rotate: () => Promise<Rotation>
  /** Every stored key, oldest first. */
  readonly keys: () => Promise<ReadonlyArray<SigningKey>>
  /** The kids of the JWK Set served at `/jwks`. */
  readonly jwksKids: () => Promise<ReadonlyArray<string>>
}

/**
 * The Effect face on a loopback port, over the given storage and clock: what `createAuthorizationServer` builds,
 * with an injectable clock for the time-driven parts (key activation, rotation schedule, retirement).
 */
export const startEffectServer = async (
  storage: Layer.Layer<StorageServices, StorageError>,
  clock: Layer.Layer<never>,
  overrides: Partial<Omit<ServerOptions, "issuer">> = {},
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
      Layer.provide(clock),
    ),
  )
  handler = (request) => runtime.runPromise(AuthorizationServer.use((s) => s.handle(request)))
  await runtime.runPromise(AuthorizationServer.useSync(() => undefined))
  const server = {
    url: running.url,
    issuer: options.issuer,
    as: undefined as unknown as AuthorizationServerInstance,
    running,
    close: async () => {
      await running.close()
      await runtime.dispose()
    },
    rotate: () => runtime.runPromise(AuthorizationServer.use((s) => s.rotateSigningKey)),
    keys: () => runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.list())),
    jwksKids: async () => {
      const response = await fetch(`${options.issuer}/jwks`)
      const body = (await response.json()) as { keys: ReadonlyArray<{ kid: string }> }
      return body.keys.map((k) => k.kid)
    },
  }
  return server
}
