import { Options } from "@keyway/core"
import { UpstreamApi } from "@keyway/resource-server"
import { thrownBy } from "@keyway/testing"
import { Effect, Exit, Layer } from "effect"
import { generateKeyPair } from "jose"
import { afterEach, describe, expect, it } from "vitest"
import {
  createTokenExchange,
  OnBehalfOf,
  OriginRefused,
  TokenExchangeFailed,
  type TokenExchangeOptions,
} from "../src/resource-server.js"
import {
  countingFetch,
  inbound,
  startDownstream,
  startFakeIssuer,
  startPlainAuthorizationServer,
} from "./support/peers.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const SECRET = "-s3cr3t-s3cr3t-s3cr3t-s3cr3t"
const INBOUND = "-inbound.access.token"
const keys = await generateKeyPair("ES256", { extractable: true })

const failure = async (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => expect.unreachable("the call succeeded"),
    (error: unknown) => error,
  )

describe("createTokenExchange: options", () => {
  it.each<[string, unknown, string]>([
    ["no credential", { clientId: "notes" }, "createTokenExchange: give exactly one of clientSecret and privateKey"],
    [
      "both credentials",
      { clientId: "notes", clientSecret: SECRET, privateKey: { key: keys.privateKey, alg: "ES256" } },
      "createTokenExchange: give exactly one of clientSecret and privateKey",
    ],
    [
      "authMethod with a key",
      { clientId: "notes", privateKey: { key: keys.privateKey, alg: "ES256" }, authMethod: "client_secret_post" },
      "createTokenExchange: authMethod: is for clientSecret only",
    ],
    [
      "a CryptoKey without alg",
      { clientId: "notes", privateKey: { key: keys.privateKey } },
      "createTokenExchange: privateKey.alg: is required unless the JWK names its alg",
    ],
    [
      "a symmetric algorithm",
      { clientId: "notes", privateKey: { key: keys.privateKey, alg: "HS256" } },
      "createTokenExchange: privateKey.alg: HS256 is not an asymmetric JWS algorithm",
    ],
    [
      "an empty client ID",
      { clientId: "", clientSecret: SECRET },
      "createTokenExchange: clientId: Too small: expected string to have >=1 characters",
    ],
    [
      "a negative renewBeforeSeconds",
      { clientId: "notes", clientSecret: SECRET, renewBeforeSeconds: -1 },
      "createTokenExchange: renewBeforeSeconds: Too small: expected number to be >=0",
    ],
    [
      "maxEntries 0",
      { clientId: "notes", clientSecret: SECRET, maxEntries: 0 },
      "createTokenExchange: maxEntries: Too small: expected number to be >0",
    ],
    [
      "an unknown authMethod",
      { clientId: "notes", clientSecret: SECRET, authMethod: "none" },
      'createTokenExchange: authMethod: Invalid option: expected one of "client_secret_basic"|"client_secret_post"',
    ],
    [
      "an unknown option",
      { clientId: "notes", clientSecret: SECRET, audience: "x" },
      'createTokenExchange: Unrecognized key: "audience"',
    ],
  ])("refuses %s, in both faces", async (_, options, message) => {
    const thrown = thrownBy(() => createTokenExchange(options as TokenExchangeOptions))
    expect(thrown).toBeInstanceOf(Options.InvalidOptions)
    expect((thrown as Options.InvalidOptions).message).toBe(message)
    const exit = await Effect.runPromiseExit(
      Effect.provide(
        Effect.gen(function* () {
          return yield* OnBehalfOf
        }),
        OnBehalfOf.layer(options as TokenExchangeOptions),
      ),
    )
    expect(Exit.isFailure(exit)).toBe(true)
    expect(JSON.stringify(exit)).toContain(message.replaceAll('"', '\\"'))
  })

  it("takes a private JWK that names its alg", () => {
    expect(() =>
      createTokenExchange({ clientId: "notes", privateKey: { key: { kty: "EC", crv: "P-256", alg: "ES256" } } }),
    ).not.toThrow()
  })
})

describe("onBehalfOf: discovery refusals", () => {
  const exchangeWith = (extra: Partial<TokenExchangeOptions> = {}) =>
    createTokenExchange({ clientId: "notes-server", clientSecret: SECRET, ...extra } as TokenExchangeOptions)

  it("refuses an issuer whose metadata does not list the token exchange grant", async () => {
    const as = await startPlainAuthorizationServer()
    cleanups.push(as.close)
    const error = await failure(
      exchangeWith().token(inbound(as.issuer, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect(error).toBeInstanceOf(TokenExchangeFailed)
    expect(error).toMatchObject({ reason: "grant-unsupported", issuer: as.issuer })
    expect((error as TokenExchangeFailed).message).toBe(
      `the authorization server ${as.issuer} does not list urn:ietf:params:oauth:grant-type:token-exchange in grant_types_supported`,
    )
  })

  it("refuses metadata for another issuer", async () => {
    const peer = await startFakeIssuer(() => ({
      issuer: "https://elsewhere.example.com",
      token_endpoint: "https://elsewhere.example.com/token",
    }))
    cleanups.push(peer.close)
    const error = await failure(
      exchangeWith().token(inbound(peer.origin, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect(error).toMatchObject({ reason: "discovery" })
    expect((error as TokenExchangeFailed).message).toBe(
      `the authorization server metadata at ${peer.origin}/.well-known/oauth-authorization-server has issuer "https://elsewhere.example.com" but "${peer.origin}" was expected (compared exactly, without normalisation); refusing to use it`,
    )
  })

  it("refuses a token endpoint that is plain http off loopback, and sends nothing there", async () => {
    const peer = await startFakeIssuer((origin) => ({ issuer: origin, token_endpoint: "http://as.example.com/token" }))
    cleanups.push(peer.close)
    const error = await failure(
      exchangeWith().token(inbound(peer.origin, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect((error as TokenExchangeFailed).message).toBe(
      `the token endpoint http://as.example.com/token of ${peer.origin} is neither https nor loopback http; the token is not sent there`,
    )
  })

  it("refuses an issuer without metadata", async () => {
    const peer = await startFakeIssuer(() => ({}))
    cleanups.push(peer.close)
    const issuer = `${peer.origin}/tenant`
    const error = await failure(
      exchangeWith().token(inbound(issuer, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect(error).toMatchObject({ reason: "discovery", issuer })
    expect((error as TokenExchangeFailed).message).toBe(`no authorization server metadata found for ${issuer}`)
  })

  it("refuses an inbound token without an issuer", async () => {
    const error = await failure(
      exchangeWith().token(inbound(undefined, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect(error).toMatchObject({ reason: "no-issuer" })
    expect((error as TokenExchangeFailed).message).toBe("the inbound token names no issuer; it cannot be exchanged")
  })

  it("refuses when no listed client authentication method fits, before sending anything", async () => {
    const peer = await startFakeIssuer((origin) => ({
      issuer: origin,
      token_endpoint: `${origin}/token`,
      token_endpoint_auth_methods_supported: ["private_key_jwt"],
    }))
    cleanups.push(peer.close)
    const error = await failure(
      exchangeWith().token(inbound(peer.origin, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect(error).toMatchObject({ reason: "client-authentication" })
    expect((error as TokenExchangeFailed).message).toBe(
      `the authorization server ${peer.origin} accepts private_key_jwt at its token endpoint, but notes-server authenticates with a client secret`,
    )
    expect(peer.seen.filter((s) => s.path === "/token")).toEqual([])
  })

  it("refuses a key whose algorithm the server does not list", async () => {
    const peer = await startFakeIssuer((origin) => ({
      issuer: origin,
      token_endpoint: `${origin}/token`,
      token_endpoint_auth_methods_supported: ["private_key_jwt"],
      token_endpoint_auth_signing_alg_values_supported: ["RS256"],
    }))
    cleanups.push(peer.close)
    const exchange = createTokenExchange({
      clientId: "notes-server",
      privateKey: { key: keys.privateKey, alg: "ES256" },
    })
    const error = await failure(
      exchange.token(inbound(peer.origin, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect((error as TokenExchangeFailed).message).toBe(
      `the authorization server ${peer.origin} accepts private_key_jwt (signed with RS256) at its token endpoint, but notes-server authenticates with private_key_jwt (ES256)`,
    )
  })

  it("keeps an issuer's metadata but not a failure", async () => {
    const peer = await startFakeIssuer((origin) => ({
      issuer: origin,
      token_endpoint: `${origin}/token`,
      grant_types_supported: ["urn:ietf:params:oauth:grant-type:token-exchange"],
    }))
    cleanups.push(peer.close)
    const exchange = exchangeWith()
    const target = { resource: "https://calendar.example.com/api" }
    for (const accessToken of [INBOUND, `${INBOUND}-2`]) {
      const error = await failure(exchange.token(inbound(peer.origin, accessToken), target))
      expect(error).toMatchObject({ reason: "refused", status: 400, error: "invalid_grant" })
    }
    expect(peer.seen.map((s) => s.path)).toEqual(["/.well-known/oauth-authorization-server", "/token", "/token"])
  })
})

describe("onBehalfOf: token endpoint answers", () => {
  const grantListed = (origin: string) => ({
    issuer: origin,
    token_endpoint: `${origin}/token`,
    grant_types_supported: ["urn:ietf:params:oauth:grant-type:token-exchange"],
  })

  it("refuses a token type other than Bearer", async () => {
    const peer = await startFakeIssuer(grantListed, () => ({
      status: 200,
      body: {
        access_token: "-exchanged",
        token_type: "DPoP",
        issued_token_type: "urn:ietf:params:oauth:token-type:access_token",
      },
    }))
    cleanups.push(peer.close)
    const exchange = createTokenExchange({ clientId: "notes-server", clientSecret: SECRET })
    const error = await failure(
      exchange.token(inbound(peer.origin, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect(error).toMatchObject({ reason: "unsupported-token-type", status: 200 })
    expect((error as TokenExchangeFailed).message).toBe(
      `the token response from ${peer.origin}/token has token_type "DPoP"; only Bearer tokens can be used`,
    )
  })

  it("refuses an answer without issued_token_type", async () => {
    const peer = await startFakeIssuer(grantListed, () => ({
      status: 200,
      body: { access_token: "-exchanged", token_type: "Bearer" },
    }))
    cleanups.push(peer.close)
    const exchange = createTokenExchange({ clientId: "notes-server", clientSecret: SECRET })
    const error = await failure(
      exchange.token(inbound(peer.origin, INBOUND), { resource: "https://calendar.example.com/api" }),
    )
    expect(error).toMatchObject({ reason: "invalid-response" })
    expect((error as TokenExchangeFailed).message).toBe(
      `the token response from ${peer.origin}/token has issued_token_type null, not urn:ietf:params:oauth:token-type:access_token`,
    )
  })

  it("sends the exchange request with client_secret_post when that is all the server lists", async () => {
    const peer = await startFakeIssuer(
      (origin) => ({ ...grantListed(origin), token_endpoint_auth_methods_supported: ["client_secret_post"] }),
      () => ({ status: 400, body: { error: "invalid_target", error_description: "no such resource" } }),
    )
    cleanups.push(peer.close)
    const exchange = createTokenExchange({ clientId: "notes-server", clientSecret: SECRET })
    const error = await failure(
      exchange.token(inbound(peer.origin, INBOUND), {
        resource: "https://calendar.example.com/api",
        scope: "calendar:read",
      }),
    )
    expect(error).toMatchObject({
      reason: "refused",
      status: 400,
      error: "invalid_target",
      description: "no such resource",
    })
    const sent = peer.seen.find((s) => s.path === "/token")
    expect(sent?.authorization).toBeUndefined()
    expect(Object.fromEntries(new URLSearchParams(sent?.body))).toEqual({
      grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
      resource: "https://calendar.example.com/api",
      scope: "calendar:read",
      subject_token: INBOUND,
      subject_token_type: "urn:ietf:params:oauth:token-type:access_token",
      client_id: "notes-server",
      client_secret: SECRET,
    })
  })
})

describe("onBehalfOf: what is never sent", () => {
  const setup = async () => {
    const downstream = await startDownstream()
    cleanups.push(downstream.close)
    const counting = countingFetch()
    const exchange = createTokenExchange({ clientId: "notes-server", clientSecret: SECRET, fetch: counting.fetch })
    const call = exchange.onBehalfOf(inbound("https://as.example.com", INBOUND), {
      resource: `${downstream.origin}/api`,
    })
    return { downstream, counting, call }
  }

  it("refuses a URL at another origin, with nothing sent", async () => {
    const { downstream, counting, call } = await setup()
    const other = "http://127.0.0.2:1/api/events"
    const error = await failure(call(other))
    expect(error).toBeInstanceOf(OriginRefused)
    expect((error as OriginRefused).message).toBe(
      `Refusing to send the token for ${downstream.origin}/api to ${other}: not at its origin`,
    )
    expect(downstream.seen).toEqual([])
    expect(counting.count("/.well-known/oauth-authorization-server")).toBe(0)
  })

  it.each<[string, (origin: string) => [string, RequestInit], string]>([
    [
      "a caller-supplied Authorization header",
      (o) => [`${o}/api/events`, { headers: { authorization: "Bearer mine" } }],
      "Refusing to send a caller-supplied Authorization header upstream: the upstream client uses its own token",
    ],
    [
      "the inbound token in the URL",
      (o) => [`${o}/api/events?token=${INBOUND}`, {}],
      "Refusing to send the inbound access token upstream (found in the url)",
    ],
    [
      "the inbound token in a header",
      (o) => [`${o}/api/events`, { headers: { "x-user-token": INBOUND } }],
      "Refusing to send the inbound access token upstream (found in the header)",
    ],
    [
      "the inbound token in the body",
      (o) => [`${o}/api/events`, { method: "POST", body: JSON.stringify({ token: INBOUND }) }],
      "Refusing to send the inbound access token upstream (found in the body)",
    ],
  ])("refuses %s, with nothing sent", async (_, request, message) => {
    const { downstream, counting, call } = await setup()
    const [url, init] = request(downstream.origin)
    const error = await failure(call(url, init))
    expect(error).toBeInstanceOf(UpstreamApi.TokenPassthroughRefused)
    expect((error as Error).message).toBe(message)
    expect(downstream.seen).toEqual([])
    expect(counting.count("/.well-known/oauth-authorization-server")).toBe(0)
  })
})

describe("OnBehalfOf.layer", () => {
  it("provides the service", async () => {
    const service = await Effect.runPromise(
      Effect.provide(
        Effect.gen(function* () {
          return yield* OnBehalfOf
        }),
        Layer.fresh(OnBehalfOf.layer({ clientId: "notes", clientSecret: SECRET })),
      ),
    )
    expect(typeof service.onBehalfOf).toBe("function")
  })
})
