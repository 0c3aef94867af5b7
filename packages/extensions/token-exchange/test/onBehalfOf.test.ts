import { createServer } from "node:http"
import { createAuthorizationServer, NodeServer, UserAuthenticator } from "@keyway/authorization-server"
import { Grant } from "@keyway/core"
import { createProtectedResource, jwt, type ProtectedResource } from "@keyway/resource-server"
import { closing, listening } from "@keyway/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as TestClock from "effect/testing/TestClock"
import { decodeJwt, exportJWK, generateKeyPair } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { tokenExchange } from "../src/authorization-server.js"
import { createTokenExchange, OnBehalfOf, TokenExchangeFailed } from "../src/resource-server.js"
import { startDownstream } from "./support/peers.js"
import { MCP, PASSWORD, SECRET, signIn, type TestServer } from "./support/server.js"

const keys = await generateKeyPair("ES256", { extractable: true })
const publicJwk = { ...(await exportJWK(keys.publicKey)), kid: "k1", alg: "ES256" }

interface World {
  readonly issuer: string
  /** The downstream API (a resource of the authorization server) and a second one. */
  readonly api: string
  readonly other: string
  readonly downstream: Awaited<ReturnType<typeof startDownstream>>
  /** The token exchange requests the authorization server received. */
  readonly exchanges: Array<URLSearchParams>
  readonly user: (scope?: string) => Promise<ProtectedResource.Authenticated>
  readonly close: () => Promise<void>
}

/**
 * A Keyway authorization server with the token exchange grant, a downstream API on loopback that records what it
 * receives, and the MCP server's resource server that verifies alice's token: the `Authenticated` it gives is what
 * an MCP server's handler has.
 */
const startWorld = async (): Promise<World> => {
  const server = createServer()
  const issuer = await listening(server)
  const downstream = await startDownstream()
  const api = `${downstream.origin}/api`
  const other = `${downstream.origin}/other`
  const scopes = { "files:read": "Read your files", "files:write": "Write your files" }
  const exchanges = [{ from: MCP, to: api, scopes: { "files:read": "notes:read", "files:write": "notes:write" } }]
  const as = createAuthorizationServer({
    issuer,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => undefined,
    resources: [
      { uri: MCP, name: "Notes", scopes: { "notes:read": "Read your notes", "notes:write": "Write your notes" } },
      { uri: api, name: "Files", scopes },
      { uri: other, name: "Other files", scopes },
    ],
    users: [{ username: "alice", passwordHash: await UserAuthenticator.hashPassword(PASSWORD), subject: "alice" }],
    clients: [
      { clientId: "chat", clientName: "Chat", redirectUris: ["http://127.0.0.1/callback"] },
      { clientId: "notes-server", clientSecret: SECRET, redirectUris: [], grantTypes: [Grant.TOKEN_EXCHANGE] },
      {
        clientId: "notes-signer",
        tokenEndpointAuthMethod: "private_key_jwt",
        jwks: { keys: [publicJwk] },
        redirectUris: [],
        grantTypes: [Grant.TOKEN_EXCHANGE],
      },
    ],
    extensions: [
      tokenExchange({
        clients: {
          "notes-server": { exchanges: [...exchanges, { ...exchanges[0]!, to: other }] },
          "notes-signer": { exchanges },
        },
      }),
    ],
  })
  const seen: Array<URLSearchParams> = []
  server.on(
    "request",
    NodeServer.toNodeListener(
      async (request) => {
        if (new URL(request.url).pathname === "/token") {
          const form = new URLSearchParams(await request.clone().text())
          if (form.get("grant_type") === Grant.TOKEN_EXCHANGE) seen.push(form)
        }
        return as.handler(request)
      },
      { publicUrl: issuer },
    ),
  )
  const mcp = createProtectedResource({
    resource: MCP,
    authorizationServers: [issuer],
    verifier: jwt({ jwksUri: `${issuer}/jwks` }),
  })
  const testServer = { issuer } as TestServer
  return {
    issuer,
    api,
    other,
    downstream,
    exchanges: seen,
    user: async (scope = "notes:read notes:write") => {
      const tokens = await signIn(testServer, scope)
      const result = await mcp.authenticate(
        new Request(MCP, { method: "POST", headers: { authorization: `Bearer ${tokens.access_token}` } }),
      )
      if (!result.ok) throw new Error(`the MCP server refused alice's token: ${result.response.status}`)
      return { token: result.token, accessToken: result.accessToken }
    },
    close: async () => {
      await downstream.close()
      await closing(server)
      await as.close()
    },
  }
}

describe("onBehalfOf against a Keyway authorization server with the token exchange grant", () => {
  let world: World
  beforeAll(async () => {
    world = await startWorld()
  })
  afterAll(async () => {
    await world?.close()
  })

  it.each([
    ["client_secret_basic", { clientId: "notes-server", clientSecret: SECRET }],
    ["private_key_jwt", { clientId: "notes-signer", privateKey: { key: keys.privateKey, alg: "ES256", kid: "k1" } }],
  ] as const)("exchanges alice's token and calls the API with the exchanged one (%s)", async (_, options) => {
    const auth = await world.user()
    const before = world.downstream.seen.length
    const exchange = createTokenExchange(options)
    const files = exchange.onBehalfOf(auth, { resource: world.api, scope: "files:read" })
    const response = await files(`${world.api}/files?folder=-x`, { headers: { "x-trace": "1" } })
    expect(response.status).toBe(200)
    const got = world.downstream.seen.slice(before)
    expect(got).toHaveLength(1)
    const sent = got[0]!
    expect(sent.path).toBe("/api/files")
    const bearer = /^Bearer (.+)$/.exec(sent.authorization ?? "")?.[1] ?? ""
    expect(decodeJwt(bearer)).toMatchObject({
      iss: world.issuer,
      sub: "alice",
      aud: world.api,
      client_id: options.clientId,
      scope: "files:read",
      act: { sub: options.clientId },
    })
    // The user's token went to its issuer as the subject token, never downstream.
    expect(JSON.stringify(got)).not.toContain(auth.accessToken)
    expect(world.exchanges.at(-1)?.get("subject_token")).toBe(auth.accessToken)
    expect(await exchange.token(auth, { resource: world.api, scope: "files:read" })).toBe(bearer)
  })

  it("exchanges once for two calls, and once for concurrent first calls", async () => {
    const auth = await world.user()
    const exchange = createTokenExchange({ clientId: "notes-server", clientSecret: SECRET })
    const target = { resource: world.api, scope: "files:read" }
    const before = world.exchanges.length
    const [a, b, c] = await Promise.all([
      exchange.token(auth, target),
      exchange.token(auth, target),
      exchange.onBehalfOf(auth, target)(`${world.api}/files`),
    ])
    expect(a).toBe(b)
    expect(c.status).toBe(200)
    expect(await exchange.token(auth, target)).toBe(a)
    expect(world.exchanges.length - before).toBe(1)
  })

  it("keeps one token per target: another resource, another scope, another inbound token", async () => {
    const alice = await world.user()
    const again = await world.user()
    const exchange = createTokenExchange({ clientId: "notes-server", clientSecret: SECRET })
    const before = world.exchanges.length
    const tokens = await Promise.all([
      exchange.token(alice, { resource: world.api, scope: "files:read" }),
      exchange.token(alice, { resource: world.api, scope: "files:write" }),
      exchange.token(alice, { resource: world.other, scope: "files:read" }),
      exchange.token(again, { resource: world.api, scope: "files:read" }),
    ])
    expect(new Set(tokens).size).toBe(4)
    expect(world.exchanges.length - before).toBe(4)
    expect(decodeJwt(tokens[2]!).aud).toBe(world.other)
    expect(decodeJwt(tokens[1]!).scope).toBe("files:write")
  })

  it("reports the authorization server's refusal with its status, error and description, and keeps no failure", async () => {
    const auth = await world.user("notes:read")
    const exchange = createTokenExchange({ clientId: "notes-server", clientSecret: SECRET })
    const before = world.exchanges.length
    for (let i = 0; i < 2; i++) {
      const error = await exchange.token(auth, { resource: world.api, scope: "files:write" }).then(
        () => expect.unreachable("the exchange succeeded"),
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(TokenExchangeFailed)
      const failed = error as TokenExchangeFailed
      const description = `the scope files:write may not be obtained for ${world.api} from this subject_token`
      expect({ ...failed }).toMatchObject({ reason: "refused", status: 400, error: "invalid_scope", description })
      expect(failed.message).toBe(
        `the token endpoint ${world.issuer}/token answered HTTP 400 invalid_scope: ${description}`,
      )
    }
    expect(world.exchanges.length - before).toBe(2)
  })

  it("exchanges again once the token is within renewBeforeSeconds of its expiry (Effect face, TestClock)", async () => {
    const auth = await world.user()
    const runtime = ManagedRuntime.make(
      Layer.merge(
        OnBehalfOf.layer({ clientId: "notes-server", clientSecret: SECRET, renewBeforeSeconds: 60 }),
        TestClock.layer(),
      ),
    )
    try {
      const target = { resource: world.api, scope: "files:read" }
      await runtime.runPromise(TestClock.setTime(Date.now()))
      const get = () =>
        runtime.runPromise(
          Effect.gen(function* () {
            return yield* (yield* OnBehalfOf).tokenEffect(auth, target)
          }),
        )
      const before = world.exchanges.length
      const first = await get()
      const lifetime = first.expiresIn as number
      await runtime.runPromise(TestClock.adjust(`${lifetime - 61} seconds`))
      expect((await get()).accessToken).toBe(first.accessToken)
      expect(world.exchanges.length - before).toBe(1)
      await runtime.runPromise(TestClock.adjust("2 seconds"))
      await get()
      expect(world.exchanges.length - before).toBe(2)
    } finally {
      await runtime.dispose()
    }
  })
})
