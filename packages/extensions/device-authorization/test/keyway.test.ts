/**
 * Keyway to Keyway: this package's device authorization client (under Keyway's client) against Keyway's authorization
 * server with this package's extension, on a SQLite file, and Keyway's resource server accepting the tokens. A scripted
 * user walks the verification page over HTTP; a 403 `insufficient_scope` starts a second device authorization for the
 * larger scope; the token refreshes without the user; the grant is listed and revoked through the server's stores as
 * `admin grants` does. The client and the server each run on a TestClock, moved together.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { it } from "@effect/vitest"
import { Administration, Storage } from "@keyway/authorization-server"
import { AuthClient, ClientConfig, DiscoveryCache, TokenStore, UserAgent } from "@keyway/client"
import { Grant } from "@keyway/core"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { closing, listening, visitor } from "@keyway/testing"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { decodeJwt } from "jose"
import { afterEach, describe, expect } from "vitest"
import { type DeviceCode, deviceAuthorization } from "../src/client.js"
import { PASSWORD, startDeviceServer } from "./support/asServer.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

/** What the client sent to the authorization server's endpoints and what they answered, in order. */
interface Sent {
  readonly path: string
  readonly form: Record<string, string>
  readonly status: number
  readonly error: string | undefined
}

/**
 * The authorization server (SQLite file, clients of `startDeviceServer`, the resource below) and Keyway's resource
 * server: `tools:read` for every request, `tools:call` more for the tool `run`.
 */
const start = async (options: { readonly registration?: boolean } = {}) => {
  const dir = await mkdtemp(join(tmpdir(), "keyway-device-"))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const rsServer = createServer()
  const resource = `${await listening(rsServer)}/mcp`
  cleanups.push(() => closing(rsServer))
  const as = await startDeviceServer({
    resource,
    storage: Storage.layerSqlite({ path: join(dir, "keyway.db") }),
    ...options,
  })
  cleanups.push(as.close)
  const guard = createProtectedResource({
    resource,
    authorizationServers: [as.issuer],
    verifier: jwt(),
    scopesSupported: ["tools:read", "tools:call"],
    requiredScopes: ["tools:read"],
    toolScopes: { run: ["tools:call"] },
  })
  cleanups.push(() => guard.close())
  rsServer.on(
    "request",
    toNodeListener(
      guard.protect(async (_request, { token }) =>
        Response.json({ jsonrpc: "2.0", id: 1, result: { subject: token.subject, scope: token.scopes.join(" ") } }),
      ),
    ),
  )
  const sent: Array<Sent> = []
  // The client's fetch: every request to the authorization server's form endpoints is recorded with its answer.
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await globalThis.fetch(input, init)
    const url = new URL(input instanceof Request ? input.url : input)
    if (url.origin === new URL(as.url).origin && typeof init?.body === "string") {
      const body = (await response
        .clone()
        .json()
        .catch(() => ({}))) as { error?: string }
      sent.push({
        path: url.pathname,
        form: Object.fromEntries(new URLSearchParams(init.body)),
        status: response.status,
        error: body.error,
      })
    }
    return response
  }
  return { as, resource, sent, fetch }
}

/** Turns of the event loop until `done` holds: loopback requests between the client and the servers complete. */
const until = (done: () => boolean) =>
  Effect.promise(async () => {
    while (!done()) await new Promise<void>((resolve) => setImmediate(resolve))
  })

const call = (client: AuthClient.AuthClient["Service"], resource: string, method: string, tool?: string) =>
  client
    .fetch(resource, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method,
        ...(tool === undefined ? {} : { params: { name: tool } }),
      }),
    })
    .pipe(Effect.flatMap((response) => Effect.promise(async () => [response.status, await response.json()] as const)))

/** The user code as a person might type it: lower case, without the dash (the page normalizes both). */
const typed = (userCode: string) => userCode.replace("-", "").toLowerCase()

describe("Keyway's device authorization client, authorization server and resource server together", () => {
  it.effect(
    "authorizes on the page, steps up with a second device authorization, refreshes alone, and loses the grant to admin revocation",
    () =>
      Effect.gen(function* () {
        const { as, resource, sent, fetch } = yield* Effect.promise(() => start())
        const shown: Array<DeviceCode> = []
        const extension = deviceAuthorization({ show: (code) => void shown.push(code) })
        const layer = AuthClient.AuthClient.layer.pipe(
          Layer.provideMerge(
            Layer.mergeAll(
              ClientConfig.ClientConfig.layer({
                clientName: "-device keyway",
                extensions: [extension],
                fetch,
                clients: [{ issuer: as.issuer, client_id: "-tv" }],
              }),
              TokenStore.TokenStore.layerMemory,
              DiscoveryCache.DiscoveryCache.layerMemory,
              UserAgent.UserAgent.layerHeadless(),
            ),
          ),
        )
        // Both clocks move together: the server measures the polling interval on its own.
        const adjust = (seconds: number) =>
          TestClock.adjust(`${seconds} seconds`).pipe(Effect.andThen(Effect.promise(() => as.adjust(seconds))))
        const alice = visitor()
        const polls = () => sent.filter((s) => s.path === "/token" && s.form.grant_type === Grant.DEVICE_CODE)

        yield* Effect.gen(function* () {
          const client = yield* AuthClient.AuthClient

          // The first request meets the 401; the client shows a code and polls while the user acts.
          const first = yield* Effect.forkChild(call(client, resource, "tools/list"))
          yield* until(() => shown.length === 1)
          expect(shown[0]?.verificationUri).toBe(`${as.issuer}/device`)
          expect(shown[0]?.verificationUriComplete).toBe(`${as.issuer}/device?user_code=${shown[0]?.userCode}`)
          expect(shown[0]?.userCode).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/)
          expect(shown[0]?.expiresIn).toBe(600)
          yield* adjust(5)
          yield* until(() => polls().length === 1)
          expect(polls()[0]).toMatchObject({ status: 400, error: "authorization_pending" })

          const login = yield* Effect.promise(() => alice.go(shown[0]?.verificationUri ?? ""))
          expect(alice.heading(login)).toBe("Sign in")
          const entry = yield* Effect.promise(() => alice.submit(login, { username: "alice", password: PASSWORD }))
          expect(alice.heading(entry)).toBe("Connect a device")
          const consent = yield* Effect.promise(() =>
            alice.submit(entry, { user_code: typed(shown[0]?.userCode ?? "") }),
          )
          expect(consent.status).toBe(200)
          expect(consent.html).toContain("<strong>This request started on another device.</strong>")
          expect(consent.html).toContain('<li data-scope="tools:read">')
          const done = yield* Effect.promise(() => alice.submit(consent, { decision: "approve" }))
          expect(done.html).toContain('<h1 data-finished="approved">Device connected</h1>')

          yield* adjust(5)
          expect(yield* Fiber.join(first)).toEqual([
            200,
            { jsonrpc: "2.0", id: 1, result: { subject: "alice", scope: "tools:read" } },
          ])
          expect(polls().map((p) => [p.status, p.error])).toEqual([
            [400, "authorization_pending"],
            [200, undefined],
          ])
          const tokens = (yield* TokenStore.TokenStore.use((store) => store.get(`tokens:${resource}`))) as
            | { readonly access_token: string }
            | undefined
          expect(decodeJwt(tokens?.access_token ?? "")).toMatchObject({
            iss: as.issuer,
            aud: resource,
            sub: "alice",
            client_id: "-tv",
            scope: "tools:read",
          })

          // The tool needs tools:call: the 403 starts a second device authorization for both scopes.
          const stepUp = yield* Effect.forkChild(call(client, resource, "tools/call", "run"))
          yield* until(() => shown.length === 2)
          const devices = sent.filter((s) => s.path === "/device_authorization")
          expect(devices.map((d) => d.form)).toEqual([
            { resource, scope: "tools:read", client_id: "-tv" },
            { resource, scope: "tools:read tools:call", client_id: "-tv" },
          ])
          yield* adjust(5)
          yield* until(() => polls().length === 3)
          // Signed in already: the page asks for the code at once.
          const again = yield* Effect.promise(() => alice.go(shown[1]?.verificationUriComplete ?? ""))
          expect(alice.heading(again)).toBe("Connect a device")
          const wider = yield* Effect.promise(() => alice.submit(again, { user_code: shown[1]?.userCode ?? "" }))
          expect(wider.html).toContain('<li data-scope="tools:call">')
          const approved = yield* Effect.promise(() => alice.submit(wider, { decision: "approve" }))
          expect(approved.html).toContain('<h1 data-finished="approved">Device connected</h1>')
          yield* adjust(5)
          expect(yield* Fiber.join(stepUp)).toEqual([
            200,
            { jsonrpc: "2.0", id: 1, result: { subject: "alice", scope: "tools:read tools:call" } },
          ])

          // The access token's lifetime runs out: the client refreshes it without the user.
          yield* adjust(300)
          expect(yield* call(client, resource, "tools/list")).toMatchObject([200, { result: { subject: "alice" } }])
          expect(shown).toHaveLength(2)
          expect(sent.filter((s) => s.form.grant_type === "refresh_token").map((s) => s.status)).toEqual([200])

          // admin grants: one grant of alice for -tv, then revoked; the refresh token dies with it.
          const listed = yield* Effect.promise(() =>
            as.run(Storage.GrantStore.use((grants) => grants.listGrants({ client_id: "-tv" }))),
          )
          expect(listed).toMatchObject([
            { subject: "alice", client_id: "-tv", resource, scope: "tools:read tools:call" },
          ])
          const revoked = yield* Effect.promise(() => as.run(Administration.revokeGrants({ client_id: "-tv" })))
          expect(revoked).toEqual(listed.map((g) => g.grant_id))
          expect(
            yield* Effect.promise(() =>
              as.run(Storage.GrantStore.use((grants) => grants.listGrants({ client_id: "-tv" }))),
            ),
          ).toEqual([])

          yield* adjust(300)
          const after = yield* Effect.forkChild(call(client, resource, "tools/list"))
          // The refresh is refused, so the client asks the user again: a third code.
          yield* until(() => shown.length === 3)
          expect(sent.filter((s) => s.form.grant_type === "refresh_token").map((s) => [s.status, s.error])).toEqual([
            [200, undefined],
            [400, "invalid_grant"],
          ])
          yield* Fiber.interrupt(after)
        }).pipe(Effect.provide(layer))
      }),
  )
})

describe("a device client that registers itself", () => {
  it.effect("registers for the device and refresh grants only, then is authorized on the page", () =>
    Effect.gen(function* () {
      const { as, resource, sent, fetch } = yield* Effect.promise(() => start({ registration: true }))
      const registrations: Array<Record<string, unknown>> = []
      const recording = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const url = new URL(input instanceof Request ? input.url : input)
        if (url.pathname === "/register" && typeof init?.body === "string") registrations.push(JSON.parse(init.body))
        return fetch(input, init)
      }
      const shown: Array<DeviceCode> = []
      const layer = AuthClient.AuthClient.layer.pipe(
        Layer.provideMerge(
          Layer.mergeAll(
            ClientConfig.ClientConfig.layer({
              clientName: "-device self-registered",
              extensions: [deviceAuthorization({ show: (code) => void shown.push(code) })],
              fetch: recording,
            }),
            TokenStore.TokenStore.layerMemory,
            DiscoveryCache.DiscoveryCache.layerMemory,
            UserAgent.UserAgent.layerHeadless(),
          ),
        ),
      )
      const adjust = (seconds: number) =>
        TestClock.adjust(`${seconds} seconds`).pipe(Effect.andThen(Effect.promise(() => as.adjust(seconds))))
      const alice = visitor()
      yield* Effect.gen(function* () {
        const client = yield* AuthClient.AuthClient
        const first = yield* Effect.forkChild(call(client, resource, "tools/list"))
        yield* until(() => shown.length === 1)
        expect(registrations).toEqual([
          expect.objectContaining({
            client_name: "-device self-registered",
            grant_types: [Grant.DEVICE_CODE, "refresh_token"],
            redirect_uris: [],
            response_types: [],
            token_endpoint_auth_method: "none",
          }),
        ])
        const login = yield* Effect.promise(() => alice.go(shown[0]?.verificationUriComplete ?? ""))
        const entry = yield* Effect.promise(() => alice.submit(login, { username: "alice", password: PASSWORD }))
        const consent = yield* Effect.promise(() => alice.submit(entry, { user_code: shown[0]?.userCode ?? "" }))
        expect(consent.html).toContain("-device self-registered")
        yield* Effect.promise(() => alice.submit(consent, { decision: "approve" }))
        yield* adjust(5)
        expect(yield* Fiber.join(first)).toEqual([
          200,
          { jsonrpc: "2.0", id: 1, result: { subject: "alice", scope: "tools:read" } },
        ])
        expect(sent.filter((s) => s.path === "/token").map((s) => [s.status, s.error])).toEqual([[200, undefined]])
      }).pipe(Effect.provide(layer))
    }),
  )
})
