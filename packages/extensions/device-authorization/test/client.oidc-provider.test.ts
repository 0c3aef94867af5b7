/**
 * Interop with an independent RFC 8628 implementation: panva's oidc-provider (certified) with its device flow on as
 * the authorization server, its user-code, login and consent pages walked over HTTP by a scripted user, Keyway's
 * device authorization client polling on TestClock, and Keyway's resource server accepting the provider's JWT.
 */
import { createServer } from "node:http"
import { it } from "@effect/vitest"
import { AuthClient, ClientConfig, DiscoveryCache, TokenStore, UserAgent } from "@keyway/client"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { closing, listening, visitor } from "@keyway/testing"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { decodeJwt, exportJWK, generateKeyPair, type JWK } from "jose"
import Provider from "oidc-provider"
import { afterEach, describe, expect } from "vitest"
import { type DeviceCode, deviceAuthorization } from "../src/client.js"

const DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

/** What the provider's endpoints answered, in order. */
interface Answered {
  readonly registrations: Array<unknown>
  readonly polls: Array<{ readonly status: number; readonly error: string | undefined }>
  /** The Authorization headers the MCP server received, and its answers. */
  readonly presented: Array<readonly [string | null, number]>
}

/**
 * oidc-provider with the device flow, dynamic registration and resource indicators (a JWT access token for the MCP
 * server), and Keyway's resource server in front of an MCP endpoint that answers with the token's subject.
 */
const start = async () => {
  const asServer = createServer()
  const issuer = await listening(asServer)
  const rsServer = createServer()
  const resource = `${await listening(rsServer)}/mcp`
  cleanups.push(
    () => closing(asServer),
    () => closing(rsServer),
  )
  const { privateKey } = await generateKeyPair("ES256", { extractable: true })
  const signing: JWK = { ...(await exportJWK(privateKey)), alg: "ES256", use: "sig", kid: "-device" }
  const provider = new Provider(issuer, {
    cookies: { keys: ["a test key that is long enough to sign the cookies"] },
    scopes: ["openid", "offline_access", "notes:read"],
    features: {
      deviceFlow: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => ({
          scope: "notes:read",
          audience: indicator,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "ES256" } },
        }),
      },
    },
    jwks: { keys: [signing] },
    // Its one key is ES256: registered clients get ID tokens signed with it.
    clientDefaults: { id_token_signed_response_alg: "ES256" },
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  })
  const answered: Answered = { registrations: [], polls: [], presented: [] }
  asServer.on("request", (request, response) => {
    if (request.url === "/reg") {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => answered.registrations.push(JSON.parse(Buffer.concat(chunks).toString("utf8"))))
    }
    if (request.url === "/token") {
      const chunks: Array<Buffer> = []
      const write = response.write.bind(response)
      const end = response.end.bind(response)
      response.write = ((chunk: Buffer | string, ...rest: Array<never>) => {
        chunks.push(Buffer.from(chunk))
        return write(chunk, ...rest)
      }) as typeof response.write
      response.end = ((chunk?: Buffer | string, ...rest: Array<never>) => {
        if (chunk !== undefined && typeof chunk !== "function") chunks.push(Buffer.from(chunk))
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as { error?: string }
        answered.polls.push({ status: response.statusCode, error: body.error })
        return end(chunk as never, ...rest)
      }) as typeof response.end
    }
    provider.callback()(request, response)
  })
  const guard = createProtectedResource({
    resource,
    authorizationServers: [issuer],
    verifier: jwt({ jwksUri: `${issuer}/jwks` }),
    scopesSupported: ["notes:read"],
    requiredScopes: ["notes:read"],
  })
  cleanups.push(() => guard.close())
  const protect = guard.protect(async (_request, { token }) =>
    Response.json({ jsonrpc: "2.0", id: 1, result: { subject: token.subject } }),
  )
  rsServer.on(
    "request",
    toNodeListener(async (request) => {
      const response = await protect(request)
      if (new URL(request.url).pathname === "/mcp") {
        answered.presented.push([request.headers.get("authorization"), response.status])
      }
      return response
    }),
  )
  return { issuer, resource, answered }
}

/** Enters the code on the verification page, confirms it, signs in and consents; resolves with the pages' headings. */
const approve = async (code: DeviceCode) => {
  const alice = visitor()
  const entry = await alice.go(code.verificationUri)
  const confirm = await alice.submit(entry, { user_code: code.userCode })
  const login = await alice.submit(confirm, {})
  const consent = await alice.submit(login, { login: "alice", password: "-any password" })
  const done = await alice.submit(consent, {})
  return [entry, confirm, login, consent, done].map(alice.heading)
}

/** Opens the complete URI, and aborts on the confirmation page; resolves with the pages' headings. */
const deny = async (code: DeviceCode) => {
  const alice = visitor()
  const entry = await alice.go(code.verificationUriComplete ?? "")
  const confirm = await alice.submit(entry, {})
  const aborted = await alice.submit(confirm, { abort: "yes" })
  return [confirm, aborted].map(alice.heading).concat(/The Sign-in request was interrupted/.exec(aborted.html)?.[0])
}

const layer = (extension: ReturnType<typeof deviceAuthorization>) =>
  AuthClient.AuthClient.layer.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        ClientConfig.ClientConfig.layer({ clientName: "-device interop", extensions: [extension] }),
        TokenStore.TokenStore.layerMemory,
        DiscoveryCache.DiscoveryCache.layerMemory,
        UserAgent.UserAgent.layerHeadless(),
      ),
    ),
  )

/** Turns of the event loop until `done` holds: loopback requests between the client and the peers complete. */
const until = (done: () => boolean) =>
  Effect.promise(async () => {
    while (!done()) await new Promise<void>((resolve) => setImmediate(resolve))
  })

/**
 * An MCP request through the client, which meets the 401, runs the device flow and retries: the user acts on the
 * pages once the code is shown and the first poll has been answered pending; then the next poll is made.
 */
const scenario = (user: (code: DeviceCode) => Promise<ReadonlyArray<string | undefined>>) =>
  Effect.gen(function* () {
    const { issuer, resource, answered } = yield* Effect.promise(start)
    let shown: DeviceCode | undefined
    const extension = deviceAuthorization({
      show: (code) => {
        shown = code
      },
    })
    return yield* Effect.gen(function* () {
      const client = yield* AuthClient.AuthClient
      const fiber = yield* Effect.forkChild(
        client
          .fetch(resource, {
            method: "POST",
            headers: { "content-type": "application/json", accept: "application/json" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
          })
          .pipe(
            Effect.flatMap((response) => Effect.promise(async () => [response.status, await response.json()])),
            Effect.exit,
          ),
      )
      const ended = () => fiber.pollUnsafe() !== undefined
      yield* until(() => shown !== undefined || ended())
      yield* TestClock.adjust("5 seconds")
      yield* until(() => answered.polls.length === 1 || ended())
      if (ended()) {
        const early = yield* Fiber.join(fiber)
        return yield* Effect.die(new Error(`the request ended before the user acted: ${JSON.stringify(early)}`))
      }
      const pages = yield* Effect.promise(() => user(shown as DeviceCode))
      yield* TestClock.adjust("5 seconds")
      const exit = yield* Fiber.join(fiber)
      return { issuer, resource, answered, shown: shown as DeviceCode, pages, exit }
    }).pipe(Effect.provide(layer(extension)))
  })

describe("oidc-provider's device flow and Keyway's device authorization client and resource server", () => {
  it.effect(
    "registers for the device grant, polls pending until the user approves on the provider's pages, and the resource server accepts the token",
    () =>
      Effect.gen(function* () {
        const { issuer, resource, answered, shown, pages, exit } = yield* scenario(approve)
        expect(answered.registrations).toEqual([
          {
            client_name: "-device interop",
            redirect_uris: [],
            grant_types: [DEVICE_CODE, "refresh_token"],
            response_types: [],
            token_endpoint_auth_method: "none",
            application_type: "native",
          },
        ])
        expect(shown.verificationUri).toBe(`${issuer}/device`)
        expect(shown.verificationUriComplete).toBe(`${issuer}/device?user_code=${shown.userCode}`)
        expect(shown.expiresIn).toBe(600)
        expect(pages).toEqual(["Sign-in", "Confirm Device", "Sign-in", "Authorize", "Sign-in Success"])
        expect(answered.polls).toEqual([
          { status: 400, error: "authorization_pending" },
          { status: 200, error: undefined },
        ])
        expect(exit).toMatchObject({ _tag: "Success", value: [200, { result: { subject: "alice" } }] })
        expect(
          answered.presented.map(([authorization, status]) => [authorization?.split(" ")[0] ?? null, status]),
        ).toEqual([
          [null, 401],
          ["Bearer", 200],
        ])
        const token = answered.presented[1]?.[0]?.slice("Bearer ".length) ?? ""
        expect(decodeJwt(token)).toMatchObject({ iss: issuer, aud: resource, sub: "alice", scope: "notes:read" })
      }),
  )

  it.effect("fails with access_denied when the user aborts on the provider's confirmation page", () =>
    Effect.gen(function* () {
      const { issuer, answered, pages, exit } = yield* scenario(deny)
      expect(pages).toEqual(["Confirm Device", "Sign-in", "The Sign-in request was interrupted"])
      expect(answered.polls).toEqual([
        { status: 400, error: "authorization_pending" },
        { status: 400, error: "access_denied" },
      ])
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: {
          reasons: [
            {
              error: {
                step: "token",
                reason: "authorization-error",
                error: "access_denied",
                url: `${issuer}/token`,
                message: "the user denied the device authorization",
              },
            },
          ],
        },
      })
    }),
  )
})
