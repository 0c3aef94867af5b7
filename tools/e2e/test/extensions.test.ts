import { createServer } from "node:http"
import {
  AuthorizationServer,
  createAuthorizationServer,
  NodeServer,
  Extension as ServerExtension,
  Storage,
  UserAuthenticator,
} from "@keyway/authorization-server"
import {
  AuthClient,
  AuthError,
  ClientConfig,
  createAuthClient,
  DiscoveryCache,
  Extension,
  TokenStore,
  UserAgent,
} from "@keyway/client"
import { OAuthError } from "@keyway/core"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { closing, listening } from "@keyway/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import { decodeJwt } from "jose"
import { afterEach, describe, expect, it } from "vitest"

/**
 * A made-up extension on both sides, to show the seams: a grant that trades a ticket for a token without client
 * authentication, a client-authentication method by header, a token binding, a metadata field, and a client strategy
 * with a request decorator.
 */
const GRANT = "urn:keyway:test:ticket"

const serverExtension: ServerExtension.AuthorizationServerExtension = {
  id: "test/ticket",
  metadata: () => ({ ticket_grant_supported: true, grant_types_supported: [GRANT] }),
  clientAuthenticationMethods: [
    {
      name: "test_header",
      present: (request) => request.headers.has("x-test-client"),
      authenticate: (context) => context.lookup(context.request.headers.get("x-test-client") ?? ""),
    },
  ],
  tokenRequest: ({ form }) =>
    Effect.succeed(form.get("bind") === undefined ? undefined : { claims: { cnf: { test: form.get("bind") } } }),
  grants: [
    {
      grantType: GRANT,
      clientAuthentication: "optional",
      accepts: (form) => form.has("ticket"),
      handle: (context) =>
        Effect.gen(function* () {
          const ticket = context.form.get("ticket") ?? ""
          if (!/^ticket-[a-z]+$/.test(ticket)) {
            return yield* Effect.fail(OAuthError.make("invalid_grant", "the ticket is not valid"))
          }
          const fresh = yield* context.rememberJti("test/ticket", ticket, context.now + 60)
          if (!fresh) return yield* Effect.fail(OAuthError.make("invalid_grant", "the ticket was already used"))
          const resource = yield* context.resource(context.form.get("resource"))
          return yield* context.issue({
            subject: ticket.slice("ticket-".length),
            clientId: context.client?.client_id ?? "ticket-holder",
            resource: resource.uri,
            scope: "notes:read",
            claims: { ticket: true, iss: "https://forged.example" },
          })
        }),
    },
  ],
}

const clientExtension = (ticket: () => string, seen: Array<string>): Extension.ClientExtension => ({
  id: "test/ticket",
  settings: { version: 1 },
  decorate: (request) =>
    Effect.sync(() => {
      seen.push(`${request.kind} ${request.method} ${new URL(request.url).pathname}`)
      request.headers.set("x-decorated", request.kind)
    }),
  strategy: {
    unattended: true,
    stepUp: false,
    acquire: (context) =>
      context
        .tokenRequest(
          new URLSearchParams({ grant_type: GRANT, ticket: ticket(), resource: context.resource, bind: "k1" }),
        )
        .pipe(Effect.map((response) => ({ response }))),
  },
})

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

interface World {
  readonly issuer: string
  readonly mcp: string
  /** The x-decorated header of each MCP request. */
  readonly decorated: Array<string | null>
}

/** A Keyway authorization server (plain face, or the Effect face with `Extensions.layer`) and a protected MCP server. */
const world = async (face: "plain" | "effect"): Promise<World> => {
  const asServer = createServer()
  const rsServer = createServer()
  const issuer = await listening(asServer)
  const mcp = `${await listening(rsServer)}/mcp`
  const options = {
    issuer,
    resources: [{ uri: mcp, scopes: { "notes:read": "Read notes" } }],
    clients: [
      { clientId: "header-client", redirectUris: [], tokenEndpointAuthMethod: "none" as const, grantTypes: [GRANT] },
    ],
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
  }
  let handler: (request: Request) => Promise<Response>
  if (face === "plain") {
    const server = createAuthorizationServer({ ...options, extensions: [serverExtension] })
    handler = server.handler
    cleanups.push(() => server.close())
  } else {
    const layer = AuthorizationServer.AuthorizationServer.layer(options).pipe(
      Layer.provide(ServerExtension.Extensions.layer([serverExtension])),
      Layer.provideMerge(Layer.merge(Storage.layerMemory, UserAuthenticator.UserAuthenticator.layerUsers([]))),
    )
    const runtime = ManagedRuntime.make(layer)
    handler = (request) => runtime.runPromise(AuthorizationServer.AuthorizationServer.use((s) => s.handle(request)))
    cleanups.push(() => runtime.dispose())
  }
  asServer.on("request", NodeServer.toNodeListener(handler, { publicUrl: issuer }))
  const decorated: Array<string | null> = []
  const guard = createProtectedResource({
    resource: mcp,
    authorizationServers: [issuer],
    verifier: jwt({ jwksUri: `${issuer}/jwks` }),
    scopesSupported: ["notes:read"],
  })
  rsServer.on(
    "request",
    toNodeListener(
      guard.protect(async (request, { token }) => {
        decorated.push(request.headers.get("x-decorated"))
        return Response.json({ subject: token.subject, cnf: token.claims.cnf, ticket: token.claims.ticket })
      }),
    ),
  )
  cleanups.push(async () => {
    await Promise.all([closing(asServer), closing(rsServer)])
    await guard.close()
  })
  return { issuer, mcp, decorated }
}

describe("the extension seams, both roles together over HTTP", () => {
  it.each(["plain", "effect"] as const)(
    "%s face: the grant, its metadata, the binding and the decorator",
    async (face) => {
      const w = await world(face)
      const metadata = (await (await fetch(`${w.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
        string,
        unknown
      >
      expect(metadata.grant_types_supported).toEqual(["authorization_code", "refresh_token", GRANT])
      expect(metadata.ticket_grant_supported).toBe(true)
      expect(metadata.token_endpoint_auth_methods_supported).toContain("test_header")

      const seen: Array<string> = []
      const extension = clientExtension(() => "ticket-alice", seen)
      const call = (fetch: (input: string, init: RequestInit) => Promise<Response>) =>
        fetch(w.mcp, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
      let body: unknown
      if (face === "plain") {
        const auth = createAuthClient({ extensions: [extension] })
        cleanups.push(() => auth.dispose())
        const response = await call(auth.fetch)
        expect(response.status).toBe(200)
        body = await response.json()
        const token = (await auth.tokens(w.mcp))!
        expect(token.client_id).toBeUndefined()
        // The server's own claims cannot be replaced by a grant's.
        expect(decodeJwt(token.access_token).iss).toBe(w.issuer)
      } else {
        const layer = AuthClient.AuthClient.layer.pipe(
          Layer.provide(Extension.Extensions.layer([extension])),
          Layer.provide(
            Layer.mergeAll(
              ClientConfig.ClientConfig.layer(),
              TokenStore.TokenStore.layerMemory,
              DiscoveryCache.DiscoveryCache.layerMemory,
              Layer.succeed(UserAgent.UserAgent, UserAgent.headless()),
            ),
          ),
        )
        const response = await Effect.runPromise(
          AuthClient.AuthClient.use((client) =>
            client.fetch(w.mcp, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }),
          ).pipe(Effect.provide(layer)),
        )
        expect(response.status).toBe(200)
        body = await response.json()
      }
      expect(body).toEqual({ subject: "alice", cnf: { test: "k1" }, ticket: true })
      // The first request went without a token (401), so it was not decorated.
      expect(seen).toEqual(["token POST /token", "resource POST /mcp"])
      expect(w.decorated).toEqual(["resource"])
      expect(Extension.capabilities([extension])).toEqual({ extensions: { "test/ticket": { version: 1 } } })
    },
  )

  it("a grant handler's refusal reaches the client as a typed error with its code; a used ticket is refused", async () => {
    const w = await world("plain")
    const auth = createAuthClient({ extensions: [clientExtension(() => "bad ticket", [])] })
    cleanups.push(() => auth.dispose())
    const error = await auth
      .fetch(w.mcp, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AuthError.AuthError)
    expect(error).toMatchObject({ step: "token", reason: "invalid-grant", error: "invalid_grant", status: 400 })
    const once = new URLSearchParams({ grant_type: GRANT, ticket: "ticket-bob", resource: w.mcp })
    const post = () =>
      fetch(`${w.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: once,
      })
    expect((await post()).status).toBe(200)
    const replay = await post()
    expect(replay.status).toBe(400)
    expect(await replay.json()).toEqual({ error: "invalid_grant", error_description: "the ticket was already used" })
  })

  it("a registered client-authentication method authenticates; a second method at once is refused", async () => {
    const w = await world("plain")
    const request = (headers: Record<string, string>, extra: Record<string, string> = {}) =>
      fetch(`${w.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
        body: new URLSearchParams({
          grant_type: GRANT,
          ticket: `ticket-${crypto.randomUUID().replace(/[^a-z]/g, "")}`,
          resource: w.mcp,
          ...extra,
        }),
      })
    const ok = await request({ "x-test-client": "header-client" })
    expect(ok.status).toBe(200)
    expect(decodeJwt(((await ok.json()) as { access_token: string }).access_token).client_id).toBe("header-client")
    const unknown = await request({ "x-test-client": "nobody" })
    expect(unknown.status).toBe(401)
    expect(await unknown.json()).toEqual({ error: "invalid_client", error_description: "client authentication failed" })
    const two = await request({ "x-test-client": "header-client" }, { client_secret: "x", client_id: "header-client" })
    expect(two.status).toBe(400)
    expect(await two.json()).toEqual({
      error: "invalid_request",
      error_description: "more than one client authentication method was used",
    })
  })

  it("a grant no handler accepts is unsupported_grant_type", async () => {
    const w = await world("plain")
    const response = await fetch(`${w.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: GRANT, client_id: "header-client", resource: w.mcp }),
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "unsupported_grant_type",
      error_description: `grant_type ${GRANT} is not supported`,
    })
  })
})
