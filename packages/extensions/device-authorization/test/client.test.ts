/**
 * The device authorization client against a scripted authorization server on loopback: the polling schedule on
 * TestClock (`interval`, `slow_down`), every terminal answer, the deadline, cancellation, and refused responses.
 */
import { it } from "@effect/vitest"
import { AuthClient, ClientConfig, DiscoveryCache, Extension, TokenStore, UserAgent } from "@keyway/client"
import { json, type Listening, listen, type Reply } from "@keyway/testing/peers"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterEach, describe, expect, it as plain } from "vitest"
import { type DeviceCode, deviceAuthorization, printTo } from "../src/client.js"
import { terminalQr } from "../src/internal/qr.js"

const DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
const open: Array<Listening> = []
afterEach(async () => {
  while (open.length > 0) await open.pop()?.close()
})

interface Script {
  /** The answers of the token endpoint to the device code polls, in order; the last one repeats. */
  readonly polls: ReadonlyArray<Reply>
  readonly device?: Reply | ((origin: string) => Reply)
  readonly withoutEndpoint?: boolean
}

/** One peer as MCP server metadata, authorization server, registration, device and token endpoints. */
const peer = async (script: Script) => {
  const seen = { registrations: [] as Array<unknown>, device: [] as Array<string>, polls: [] as Array<number> }
  let clock: () => number = () => 0
  let answered = 0
  const server = await listen((_request, url, body) => {
    const origin = server.origin
    switch (url.pathname) {
      case "/.well-known/oauth-protected-resource/mcp":
        return json(200, { resource: `${origin}/mcp`, authorization_servers: [origin], scopes_supported: ["tools"] })
      case "/.well-known/oauth-authorization-server":
        return json(200, {
          issuer: origin,
          authorization_endpoint: `${origin}/authorize`,
          token_endpoint: `${origin}/token`,
          registration_endpoint: `${origin}/register`,
          ...(script.withoutEndpoint === true ? {} : { device_authorization_endpoint: `${origin}/device` }),
          code_challenge_methods_supported: ["S256"],
          grant_types_supported: [DEVICE_CODE, "refresh_token"],
        })
      case "/register":
        seen.registrations.push(JSON.parse(body))
        return json(201, { client_id: "-device-client", token_endpoint_auth_method: "none", ...JSON.parse(body) })
      case "/device":
        seen.device.push(body)
        if (typeof script.device === "function") return script.device(origin)
        return (
          script.device ??
          json(200, {
            device_code: "-dc",
            user_code: "BDWP-HQPK",
            verification_uri: `${origin}/activate`,
            verification_uri_complete: `${origin}/activate?user_code=BDWP-HQPK`,
            expires_in: 60,
          })
        )
      case "/token": {
        seen.polls.push(clock())
        const reply = script.polls[Math.min(answered, script.polls.length - 1)] as Reply
        answered += 1
        return reply
      }
      default:
        return json(404, {})
    }
  })
  open.push(server)
  return { server, seen, setClock: (now: () => number) => (clock = now) }
}

const pending = json(400, { error: "authorization_pending" })
const tokens = json(200, { access_token: "-at", token_type: "Bearer", expires_in: 3600, refresh_token: "-rt" })

const layer = (extension: ReturnType<typeof deviceAuthorization>) =>
  AuthClient.AuthClient.layer.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        ClientConfig.ClientConfig.layer({ clientName: "device test", extensions: [extension], offlineAccess: false }),
        TokenStore.TokenStore.layerMemory,
        DiscoveryCache.DiscoveryCache.layerMemory,
        UserAgent.UserAgent.layerHeadless(),
      ),
    ),
  )

/**
 * Authorizes against the peer, moving the TestClock one second at a time once the client has settled (no request in
 * flight), until the authorization ends; resolves with its exit.
 */
const run = (origin: string, extension: ReturnType<typeof deviceAuthorization>, setClock: (f: () => number) => void) =>
  Effect.gen(function* () {
    yield* TestClock.testClockWith((clock) => Effect.sync(() => setClock(() => clock.currentTimeMillisUnsafe())))
    const client = yield* AuthClient.AuthClient
    const fiber = yield* Effect.forkChild(Effect.exit(client.authorize(`${origin}/mcp`)))
    for (let second = 0; second < 400; second += 1) {
      yield* Effect.promise(() => settle())
      if (fiber.pollUnsafe() !== undefined) break
      yield* TestClock.adjust("1 second")
    }
    return yield* Fiber.join(fiber)
  }).pipe(Effect.provide(layer(extension)))

/** A few turns of the event loop: loopback requests and their bodies complete, the client reaches its next wait. */
const settle = async () => {
  for (let turn = 0; turn < 40; turn += 1) await new Promise<void>((resolve) => setImmediate(resolve))
}

describe("deviceAuthorization", () => {
  it.effect(
    "registers for the device grant, shows the code, polls every interval while pending, and stores the tokens",
    () =>
      Effect.gen(function* () {
        const { server, seen, setClock } = yield* Effect.promise(() => peer({ polls: [pending, pending, tokens] }))
        const shown: Array<DeviceCode> = []
        const exit = yield* run(server.origin, deviceAuthorization({ show: (code) => void shown.push(code) }), setClock)
        expect(exit._tag).toBe("Success")
        expect(seen.registrations).toEqual([
          {
            client_name: "device test",
            redirect_uris: [],
            grant_types: [DEVICE_CODE, "refresh_token"],
            response_types: [],
            token_endpoint_auth_method: "none",
            application_type: "native",
          },
        ])
        expect(seen.device).toEqual([
          `resource=${encodeURIComponent(`${server.origin}/mcp`)}&scope=tools&client_id=-device-client`,
        ])
        expect(shown).toEqual([
          {
            verificationUri: `${server.origin}/activate`,
            verificationUriComplete: `${server.origin}/activate?user_code=BDWP-HQPK`,
            userCode: "BDWP-HQPK",
            expiresIn: 60,
          },
        ])
        expect(seen.polls).toEqual([5000, 10000, 15000])
      }),
  )

  it.effect("adds 5 seconds to the interval at each slow_down", () =>
    Effect.gen(function* () {
      const slow = json(400, { error: "slow_down" })
      const { server, seen, setClock } = yield* Effect.promise(() => peer({ polls: [slow, pending, slow, tokens] }))
      const exit = yield* run(server.origin, deviceAuthorization({ show: () => undefined }), setClock)
      expect(exit._tag).toBe("Success")
      expect(seen.polls).toEqual([5000, 15000, 25000, 40000])
    }),
  )

  it.effect.each([
    ["access_denied", "authorization-error", "the user denied the device authorization"],
    ["expired_token", "expired", "the device code expired before the user approved it; start again"],
  ])("fails typed on %s", ([code, reason, message]) =>
    Effect.gen(function* () {
      const { server, setClock } = yield* Effect.promise(() => peer({ polls: [pending, json(400, { error: code })] }))
      const exit = yield* run(server.origin, deviceAuthorization({ show: () => undefined }), setClock)
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: { reasons: [{ error: { step: "token", reason, error: code, url: `${server.origin}/token`, message } }] },
      })
    }),
  )

  it.effect("stops at expires_in", () =>
    Effect.gen(function* () {
      const { server, seen, setClock } = yield* Effect.promise(() => peer({ polls: [pending] }))
      const exit = yield* run(server.origin, deviceAuthorization({ show: () => undefined }), setClock)
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: {
          reasons: [
            {
              error: {
                step: "token",
                reason: "expired",
                message: "the user did not approve the device authorization within 60 seconds; start again",
              },
            },
          ],
        },
      })
      expect(seen.polls).toEqual([5000, 10000, 15000, 20000, 25000, 30000, 35000, 40000, 45000, 50000, 55000])
    }),
  )

  it.effect("is cancelled by the caller's AbortSignal", () =>
    Effect.gen(function* () {
      const { server, seen, setClock } = yield* Effect.promise(() => peer({ polls: [pending] }))
      const controller = new AbortController()
      const exit = yield* run(
        server.origin,
        deviceAuthorization({ show: () => undefined, signal: controller.signal }),
        (now) => {
          setClock(now)
        },
      ).pipe(
        Effect.forkChild,
        Effect.tap(() =>
          Effect.promise(async () => {
            while (seen.polls.length < 2) await settle()
            controller.abort()
          }),
        ),
        Effect.flatMap(Fiber.join),
      )
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: {
          reasons: [
            {
              error: {
                step: "token",
                reason: "cancelled",
                message: "the device authorization was cancelled before the user approved it",
              },
            },
          ],
        },
      })
      expect(seen.polls).toEqual([5000, 10000])
    }),
  )

  it.effect("fails with missing-endpoint when the server has no device_authorization_endpoint", () =>
    Effect.gen(function* () {
      const { server, seen, setClock } = yield* Effect.promise(() => peer({ polls: [tokens], withoutEndpoint: true }))
      const exit = yield* run(server.origin, deviceAuthorization({ show: () => undefined }), setClock)
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: {
          reasons: [
            {
              error: {
                step: "authorization",
                reason: "missing-endpoint",
                message: `the authorization server ${server.origin} publishes no device_authorization_endpoint, so the device authorization grant (RFC 8628) cannot be used with it`,
              },
            },
          ],
        },
      })
      expect(seen.registrations).toEqual([])
    }),
  )

  it.effect.each([
    [
      { device_code: "-dc", user_code: "BDWP-HQPK", verification_uri: "http://example.com/activate", expires_in: 60 },
      "insecure-endpoint",
      "has verification_uri http://example.com/activate: the user is only sent to https URLs (or http on a loopback address)",
    ],
    [
      {
        device_code: "-dc",
        user_code: "BDWP-HQPK",
        verification_uri: "https://example.com/a",
        verification_uri_complete: "http://example.com/a?user_code=BDWP-HQPK",
        expires_in: 60,
      },
      "insecure-endpoint",
      "has verification_uri_complete http://example.com/a?user_code=BDWP-HQPK: the user is only sent to https URLs (or http on a loopback address)",
    ],
    [
      { device_code: "-dc", user_code: "BDWP-HQPK", verification_uri: "https://example.com/a", expires_in: 0 },
      "invalid-document",
      'is invalid: device authorization response: "expires_in" must be positive',
    ],
    [
      { user_code: "BDWP-HQPK", verification_uri: "https://example.com/a", expires_in: 60 },
      "invalid-document",
      'is invalid: device authorization response: "device_code" is required',
    ],
    [
      {
        device_code: "-dc",
        user_code: "BDWP-HQPK",
        verification_uri: "https://example.com/a",
        expires_in: 60,
        interval: "5",
      },
      "invalid-document",
      'is invalid: device authorization response: "interval" must be a number',
    ],
  ] as const)("refuses a malformed device authorization response (%j)", ([body, reason, text]) =>
    Effect.gen(function* () {
      const { server, seen, setClock } = yield* Effect.promise(() => peer({ polls: [tokens], device: json(200, body) }))
      const exit = yield* run(server.origin, deviceAuthorization({ show: () => undefined }), setClock)
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: {
          reasons: [
            {
              error: {
                step: "authorization",
                reason,
                url: `${server.origin}/device`,
                message: `the device authorization response from ${server.origin}/device ${text}`,
              },
            },
          ],
        },
      })
      expect(seen.polls).toEqual([])
    }),
  )

  it.effect("fails with the OAuth error the device authorization endpoint answers", () =>
    Effect.gen(function* () {
      const device = json(400, { error: "invalid_scope", error_description: "tools is not offered to -device-client" })
      const { server, seen, setClock } = yield* Effect.promise(() => peer({ polls: [tokens], device }))
      const exit = yield* run(server.origin, deviceAuthorization({ show: () => undefined }), setClock)
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: {
          reasons: [
            {
              error: {
                step: "authorization",
                reason: "oauth-error",
                status: 400,
                error: "invalid_scope",
                url: `${server.origin}/device`,
                message: `the device authorization endpoint ${server.origin}/device answered HTTP 400 invalid_scope: tools is not offered to -device-client`,
              },
            },
          ],
        },
      })
      expect(seen.polls).toEqual([])
    }),
  )

  it.effect("waits one second between polls when the server states an interval of 0", () =>
    Effect.gen(function* () {
      const device = (origin: string) =>
        json(200, {
          device_code: "-dc",
          user_code: "BDWP-HQPK",
          verification_uri: `${origin}/activate`,
          expires_in: 60,
          interval: 0,
        })
      const { server, seen, setClock } = yield* Effect.promise(() =>
        peer({ polls: [pending, pending, tokens], device }),
      )
      const exit = yield* run(server.origin, deviceAuthorization({ show: () => undefined }), setClock)
      expect(exit._tag).toBe("Success")
      expect(seen.polls).toEqual([1000, 2000, 3000])
    }),
  )

  plain("is not declared to MCP servers as an MCP extension", () => {
    expect(Extension.capabilities([deviceAuthorization({ show: () => undefined })])).toEqual({ extensions: {} })
    expect(
      Extension.capabilities([
        deviceAuthorization({ show: () => undefined, when: "no-browser" }),
        { id: "test/ticket", settings: { version: 1 } },
      ]),
    ).toEqual({ extensions: { "test/ticket": { version: 1 } } })
  })
})

describe("printTo", () => {
  const code: DeviceCode = {
    verificationUri: "https://as.example/device",
    verificationUriComplete: "https://as.example/device?user_code=BDWP-HQPK",
    userCode: "BDWP-HQPK",
    expiresIn: 600,
  }
  const capture = (isTTY: boolean | undefined) => {
    const written: Array<string> = []
    return { written, stream: { write: (text: string) => written.push(text), isTTY } }
  }

  plain("prints the URI, the code and, on a terminal, the QR code of the complete URI below them", () => {
    const { written, stream } = capture(true)
    printTo(stream)(code)
    expect(written).toEqual([
      [
        "To authorize, visit https://as.example/device and enter the code BDWP-HQPK",
        "or open https://as.example/device?user_code=BDWP-HQPK",
        "or scan:",
        terminalQr("https://as.example/device?user_code=BDWP-HQPK"),
        "(the code expires in 10 minutes)",
        "",
      ].join("\n"),
    ])
  })

  plain.each([false, undefined])("prints no QR code when the stream is not a terminal (isTTY %s)", (isTTY) => {
    const { written, stream } = capture(isTTY)
    printTo(stream)({ ...code, expiresIn: 90 })
    expect(written).toEqual([
      "To authorize, visit https://as.example/device and enter the code BDWP-HQPK\nor open https://as.example/device?user_code=BDWP-HQPK\n(the code expires in 90 seconds)\n",
    ])
  })

  plain("prints no QR code without a complete URI, or with one too long for a QR code", () => {
    const { written, stream } = capture(true)
    printTo(stream)({ ...code, verificationUriComplete: undefined })
    const long = `https://as.example/device?user_code=BDWP-HQPK&pad=${"a".repeat(300)}`
    printTo(stream)({ ...code, verificationUriComplete: long })
    expect(written).toEqual([
      "To authorize, visit https://as.example/device and enter the code BDWP-HQPK\n(the code expires in 10 minutes)\n",
      `To authorize, visit https://as.example/device and enter the code BDWP-HQPK\nor open ${long}\n(the code expires in 10 minutes)\n`,
    ])
  })
})
