import { thrownBy } from "@keyway/testing"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { type CreateOptions, createAuthClient } from "../src/AuthClient.js"
import { ClientConfig, type ClientOptions, InvalidClientOptions } from "../src/ClientConfig.js"
import { createAuthClient as createNodeAuthClient } from "../src/node/AuthClient.js"
import { memory } from "../src/TokenStore.js"
import { headless } from "../src/UserAgent.js"

/** Options as a JavaScript caller may write them: no types to stop them. */
const untyped = (options: Record<string, unknown>): CreateOptions => options as unknown as CreateOptions

const BACKEND = "a TokenStore backend (an object with get, set and delete functions)"

describe("options refused when the client is created", () => {
  it("the main entry refuses store: { file } and says which entry takes it", () => {
    const error = thrownBy(() => createAuthClient(untyped({ store: { file: "/tmp/keyway-tokens.json" } })))
    expect(error).toBeInstanceOf(InvalidClientOptions)
    expect(error).toMatchObject({
      _tag: "InvalidClientOptions",
      option: "store",
      message: `store: { file } is taken by createAuthClient of @keyway/client/node (the file store needs Node.js); createAuthClient of @keyway/client takes store: "memory" or ${BACKEND}, such as TokenStore.webStorage()`,
    })
  })

  it("refuses an option no entry has, naming the ones it takes", () => {
    const error = thrownBy(() => createAuthClient(untyped({ storage: "memory" })))
    expect(error).toMatchObject({
      option: "storage",
      message:
        'createAuthClient of @keyway/client has no option "storage"; it takes fetch, clientName, clientMetadataUrl, applicationType, clients, askClientInformation, privateKeyJwt, chooseAuthorizationServer, protectedResourceMetadata, scope, offlineAccess, legacyFallback, refreshSkewSeconds, maxStepUpAttempts, discoveryTtlSeconds, extensions, store, userAgent',
    })
  })

  it.each([
    [{ store: "file" }, "store", `store must be "memory" or ${BACKEND}; got "file"`],
    [{ store: { get: () => undefined } }, "store", `store must be "memory" or ${BACKEND}; got an object`],
    [{ fetch: "https://example.com" }, "fetch", 'fetch must be a function; got "https://example.com"'],
    [{ applicationType: "desktop" }, "applicationType", 'applicationType must be "native" or "web"; got "desktop"'],
    [
      { refreshSkewSeconds: -1 },
      "refreshSkewSeconds",
      "refreshSkewSeconds must be a number of seconds (0 or more); got -1",
    ],
    [
      { discoveryTtlSeconds: "300" },
      "discoveryTtlSeconds",
      'discoveryTtlSeconds must be a number of seconds (0 or more); got "300"',
    ],
    [{ maxStepUpAttempts: 1.5 }, "maxStepUpAttempts", "maxStepUpAttempts must be a whole number, 1 or more; got 1.5"],
    [{ offlineAccess: "yes" }, "offlineAccess", 'offlineAccess must be true or false; got "yes"'],
    [{ scope: ["tools:read"] }, "scope", "scope must be a string; got an array"],
    [
      { clients: { issuer: "https://as.example.com" } },
      "clients",
      "clients must be an array of client information; got an object",
    ],
    [{ clients: [{ client_id: "abc" }] }, "clients", "clients[0].issuer is required"],
    [
      { clients: [{ issuer: "https://as.example.com", client_id: "abc", secret: "s" }] },
      "clients",
      'clients[0] has "secret", which client information ({ issuer, client_id, client_secret?, token_endpoint_auth_method?, redirect_uris? }) does not have (it has issuer, client_id, client_secret, token_endpoint_auth_method, client_secret_expires_at, redirect_uris)',
    ],
    [
      { clients: [{ issuer: "https://as.example.com", client_id: "-abc", token_endpoint_auth_method: "basic" }] },
      "clients",
      'clients[0].token_endpoint_auth_method must be one of none, client_secret_basic, client_secret_post, private_key_jwt; got "basic"',
    ],
    [{ privateKeyJwt: { alg: "ES256" } }, "privateKeyJwt", "privateKeyJwt.key is required"],
    [
      { protectedResourceMetadata: { "https://mcp.example.com/mcp": "{}" } },
      "protectedResourceMetadata",
      'protectedResourceMetadata["https://mcp.example.com/mcp"] must be a metadata document (an object); got "{}"',
    ],
    [
      { extensions: [{ strategy: {} }] },
      "extensions",
      "extensions[0] must be an extension (an object with an id); got an object",
    ],
    [
      { userAgent: { redirectUri: "http://127.0.0.1/callback" } },
      "userAgent",
      "userAgent must be a user agent (UserAgent.headless(), UserAgent.testUser(...), UserAgent.redirect(...), or one with an open Effect); got an object",
    ],
  ])("refuses %j with the option and what it must be", (options, option, message) => {
    const error = thrownBy(() => createAuthClient(untyped(options)))
    expect(error).toBeInstanceOf(InvalidClientOptions)
    expect(error).toMatchObject({ option, message })
  })

  it("refuses options that are not an object", () => {
    expect(thrownBy(() => createAuthClient(untyped("my-cli" as never)))).toMatchObject({
      option: "options",
      message: 'createAuthClient of @keyway/client takes an object of options; got "my-cli"',
    })
  })

  it("takes every option it has, and counts one given as undefined as left out", () => {
    const client = createAuthClient(
      untyped({
        clientName: "my-cli",
        store: memory(),
        userAgent: headless(),
        scope: undefined,
        clients: [
          { issuer: "https://as.example.com", client_id: "abc", client_secret: "s", redirect_uris: [] },
          // As a registration response gives it (RFC 7591 §3.2.1): the members the client does not use are let be.
          {
            issuer: "https://as.example.com",
            client_id: "-registered",
            client_id_issued_at: 1_800_000_000,
            client_name: "my-cli",
            grant_types: ["authorization_code", "refresh_token"],
            token_endpoint_auth_method: "none",
          },
        ],
        refreshSkewSeconds: 0,
        maxStepUpAttempts: 1,
      }),
    )
    expect(typeof client.fetch).toBe("function")
  })

  it("the Node.js entry takes store: { file } and refuses a file that is not a path", () => {
    expect(typeof createNodeAuthClient(untyped({ store: { file: "/tmp/keyway-options-test.json" } })).fetch).toBe(
      "function",
    )
    expect(thrownBy(() => createNodeAuthClient(untyped({ store: { file: 42 } })))).toMatchObject({
      option: "store",
      message: "store.file must be the path of the token file (a non-empty string); got 42",
    })
    expect(
      thrownBy(() => createNodeAuthClient(untyped({ store: { file: "/tmp/t.json", mode: 0o644 } }))),
    ).toMatchObject({
      option: "store",
      message: 'store has "mode" beside file; the file store takes { file } only',
    })
    expect(thrownBy(() => createNodeAuthClient(untyped({ store: "disk" })))).toMatchObject({
      option: "store",
      message: `store must be "memory", { file: path } or ${BACKEND}; got "disk"`,
    })
    expect(thrownBy(() => createNodeAuthClient(untyped({ tokens: "/tmp/t.json" })))).toMatchObject({
      option: "tokens",
      message: expect.stringMatching(/^createAuthClient of @keyway\/client\/node has no option "tokens"; it takes /u),
    })
  })
})

describe("the Effect face's configuration", () => {
  const configured = Effect.gen(function* () {
    return yield* ClientConfig
  })
  const failure = (options: Record<string, unknown>) =>
    Effect.runPromise(Effect.flip(Effect.provide(configured, ClientConfig.layer(options as ClientOptions))))

  it("fails the layer with the typed error, and says the store and the user agent are layers of their own", async () => {
    expect(await failure({ store: { file: "/tmp/t.json" } })).toMatchObject({
      _tag: "InvalidClientOptions",
      option: "store",
      message:
        "store is not a ClientConfig option: on the Effect face the store is a layer of its own (TokenStore.layerMemory, TokenStore.layerWebStorage, TokenStore.layerBackend, or TokenStore.layerFile from @keyway/client/node)",
    })
    expect(await failure({ userAgent: headless() })).toMatchObject({
      option: "userAgent",
      message:
        "userAgent is not a ClientConfig option: on the Effect face the user agent is a layer of its own (UserAgent.layerHeadless, UserAgent.layerTestUser, UserAgent.layerRedirect, or UserAgent.layerBrowser from @keyway/client/node)",
    })
    expect(await failure({ clientName: 7 })).toMatchObject({
      option: "clientName",
      message: "clientName must be a string; got 7",
    })
    expect(await failure({ legacyFallbak: false })).toMatchObject({
      option: "legacyFallbak",
      message: expect.stringMatching(/^ClientConfig has no option "legacyFallbak"; it takes fetch, /u),
    })
  })

  it("make throws the same error", () => {
    expect(thrownBy(() => ClientConfig.make({ maxStepUpAttempts: 0 }))).toMatchObject({
      _tag: "InvalidClientOptions",
      option: "maxStepUpAttempts",
      message: "maxStepUpAttempts must be a whole number, 1 or more; got 0",
    })
  })

  it("builds the configuration from good options", async () => {
    const config = await Effect.runPromise(
      Effect.provide(configured, ClientConfig.layer({ clientName: "effect face" })),
    )
    expect(config.clientName).toBe("effect face")
  })
})
