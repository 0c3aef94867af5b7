import { TokenExchange } from "@keyway/core"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type NodeAuthenticated, protectNode } from "../src/node/index.js"
import { listen, type RunningServer } from "../src/node/Node.js"
import {
  type Authenticated,
  createProtectedResource,
  InvalidConfiguration,
  ProtectedResource,
  type ProtectedResourceOptions,
  type ProtectedResourceService,
} from "../src/ProtectedResource.js"
import { custom, introspection, jwt, TokenVerifier } from "../src/TokenVerifier.js"
import {
  accessToken,
  type IntrospectionState,
  makeKey,
  now,
  type Running,
  type SigningKey,
  startIntrospection,
  startJwks,
} from "./helpers.js"

const ISSUER = "https://as.example.com"
const RESOURCE = "https://mcp.example.com/mcp"
const METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

type Jwks = Awaited<ReturnType<typeof startJwks>>

let jwks: Jwks
let key: SigningKey
let is: Running & { state: IntrospectionState; url: string }
const running: Array<RunningServer> = []

const options = (extra: Partial<ProtectedResourceOptions> = {}): ProtectedResourceOptions => ({
  resource: RESOURCE,
  authorizationServers: [ISSUER],
  verifier: jwt({ jwksUri: jwks.url, jwksCooldownMs: 60_000 }),
  scopesSupported: ["mcp:tools"],
  requiredScopes: ["mcp:tools"],
  ...extra,
})

// What a handler sees of the verified token, the same for every face.
const seenBy = (auth: Authenticated) => ({
  subject: auth.token.subject ?? null,
  hasActors: "actors" in auth.token,
  actors: auth.token.actors ?? null,
})

const webEcho = (_request: Request, auth: Authenticated): Response => Response.json(seenBy(auth))

const nodeEcho: Parameters<typeof protectNode>[1] = (_req, res, auth: NodeAuthenticated) => {
  const text = JSON.stringify(seenBy(auth))
  res.writeHead(200, { "content-type": "application/json" }).end(text)
}

// A protected resource served by `protect()` and by `protectNode`, each on its own loopback server.
const serveBoth = async (extra: Partial<ProtectedResourceOptions> = {}) => {
  const web = await listen(createProtectedResource(options(extra)).protect(webEcho), {
    publicUrl: "https://mcp.example.com",
  })
  const node = await listen(protectNode(createProtectedResource(options(extra)), nodeEcho), {
    publicUrl: "https://mcp.example.com",
  })
  running.push(web, node)
  return [web, node] as const
}

const token = (extra: Record<string, unknown>) => accessToken(key, ISSUER, RESOURCE, "mcp:tools", extra)

const call = (server: RunningServer, access: string) =>
  fetch(`${server.url}/mcp`, { headers: { authorization: `Bearer ${access}` } })

const refusedChallenge = (description: string) =>
  `Bearer resource_metadata="${METADATA_URL}", scope="mcp:tools", error="invalid_token", error_description="${description}"`

// The exact 401 of a refused delegated token, from every server given.
const expectRefused = async (servers: ReadonlyArray<RunningServer>, access: string, description: string) => {
  for (const server of servers) {
    const response = await call(server, access)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(refusedChallenge(description))
    expect(await response.json()).toEqual({ error: "invalid_token", error_description: description })
  }
}

const NOT_ACCEPTED = "Delegated access tokens (with an act claim) are not accepted by this resource"

let plain: ReadonlyArray<RunningServer>
let one: ReadonlyArray<RunningServer>
let two: ReadonlyArray<RunningServer>

beforeAll(async () => {
  key = await makeKey("k1")
  jwks = await startJwks([key])
  is = await startIntrospection()
  plain = await serveBoth()
  one = await serveBoth({ delegation: { actors: ["notes-server", "-dash-first"] } })
  two = await serveBoth({ delegation: { actors: ["notes-server", "gateway"], maxChain: 2 } })
})

afterAll(async () => {
  for (const r of running.splice(0)) await r.close()
  await jwks.close()
  await is.close()
})

describe("a token without act", () => {
  it("is accepted as before, without actors, with or without the delegation option", async () => {
    const access = await token({})
    for (const server of [...plain, ...one]) {
      const response = await call(server, access)
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({ subject: "user-1", hasActors: false, actors: null })
    }
  })
})

describe("delegated tokens refused", () => {
  it("without the delegation option, any act", async () => {
    await expectRefused(plain, await token({ act: { sub: "notes-server" } }), NOT_ACCEPTED)
  })

  it.each([
    ["not an object", "notes-server", "act must be a JSON object"],
    ["an empty sub", { sub: "" }, "act.sub must be a non-empty string"],
    [
      "a prior actor without sub",
      { sub: "notes-server", act: { iss: ISSUER } },
      "act.act.sub must be a non-empty string",
    ],
    ["a numeric client_id", { sub: "notes-server", client_id: 7 }, "act.client_id must be a string"],
  ])("a malformed act: %s", async (_name, act, problem) => {
    await expectRefused(one, await token({ act }), `The act claim of the access token is malformed: ${problem}`)
  })

  it("a chain deeper than core reads is malformed", async () => {
    let act: Record<string, unknown> = { sub: "notes-server" }
    for (let i = 0; i < TokenExchange.MAX_CHAIN; i++) act = { sub: "notes-server", act }
    await expectRefused(
      two,
      await token({ act }),
      "The act claim of the access token is malformed: the act chain is longer than 16",
    )
  })

  it("a chain longer than maxChain", async () => {
    const act = { sub: "notes-server", act: { sub: "gateway" } }
    await expectRefused(
      one,
      await token({ act }),
      "The delegation chain of the access token has 2 actors; this resource accepts at most 1",
    )
    const three = { sub: "notes-server", act: { sub: "gateway", act: { sub: "notes-server" } } }
    await expectRefused(
      two,
      await token({ act: three }),
      "The delegation chain of the access token has 3 actors; this resource accepts at most 2",
    )
  })

  it("an actor not in actors, current or prior, named in the description", async () => {
    await expectRefused(
      one,
      await token({ act: { sub: "intruder" } }),
      "The actor 'intruder' is not accepted by this resource",
    )
    await expectRefused(
      two,
      await token({ act: { sub: "notes-server", act: { sub: "intruder" } } }),
      "The actor 'intruder' is not accepted by this resource",
    )
    await expectRefused(
      one,
      await token({ act: { sub: "-dash-second" } }),
      "The actor '-dash-second' is not accepted by this resource",
    )
  })

  it("an actor ID with control characters, quotes or a huge length is never echoed raw", async () => {
    // Long, yet within the request header size node:http accepts.
    const hostile = `evil\u0000\r\n"quoted"\\${"x".repeat(5_000)}`
    const description = `The actor 'evil?  'quoted'/${"x".repeat(48)}...' is not accepted by this resource`
    await expectRefused(one, await token({ act: { sub: hostile } }), description)
    await expectRefused(
      one,
      await token({ act: { sub: "caf\u00e9\u{1F600}" } }),
      "The actor 'caf??' is not accepted by this resource",
    )
  })
})

describe("delegated tokens accepted", () => {
  it("a chain of one, through protect() and protectNode, also when cached", async () => {
    const access = await token({ act: { sub: "notes-server" } })
    for (const server of one) {
      for (let i = 0; i < 2; i++) {
        const response = await call(server, access)
        expect(response.status).toBe(200)
        expect(await response.json()).toEqual({
          subject: "user-1",
          hasActors: true,
          actors: [{ sub: "notes-server" }],
        })
      }
    }
  })

  it("a chain of two with maxChain 2, current actor first, with their iss and client_id", async () => {
    const act = { sub: "gateway", client_id: "gw-client", act: { sub: "notes-server", iss: ISSUER } }
    const access = await token({ act })
    for (const server of two) {
      const response = await call(server, access)
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({
        subject: "user-1",
        hasActors: true,
        actors: [
          { sub: "gateway", client_id: "gw-client" },
          { sub: "notes-server", iss: ISSUER },
        ],
      })
    }
  })

  it("an actor ID beginning with -", async () => {
    const response = await call(one[0]!, await token({ act: { sub: "-dash-first" } }))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ subject: "user-1", hasActors: true, actors: [{ sub: "-dash-first" }] })
  })
})

describe("every verifier", () => {
  const req = (access: string) => new Request(RESOURCE, { headers: { authorization: `Bearer ${access}` } })

  it("introspection answering act (RFC 8693 §4.1)", async () => {
    const resource = createProtectedResource(
      options({
        verifier: introspection({
          endpoint: is.url,
          clientAuth: { method: "client_secret_basic", clientId: "rs", clientSecret: "s3cret" },
        }),
        delegation: { actors: ["notes-server"] },
      }),
    )
    const answer = (act: unknown) => ({
      active: true,
      iss: ISSUER,
      aud: RESOURCE,
      sub: "user-1",
      client_id: "notes-server",
      scope: "mcp:tools",
      exp: now() + 600,
      act,
    })
    is.state.answers["-delegated"] = answer({ sub: "notes-server" })
    is.state.answers["-intruder"] = answer({ sub: "intruder" })
    const accepted = await resource.authenticate(req("-delegated"))
    expect(accepted.ok && accepted.token.actors).toEqual([{ sub: "notes-server" }])
    const refused = await resource.authenticate(req("-intruder"))
    expect(refused.ok).toBe(false)
    if (!refused.ok) {
      expect(refused.response.status).toBe(401)
      expect(refused.response.headers.get("www-authenticate")).toBe(
        refusedChallenge("The actor 'intruder' is not accepted by this resource"),
      )
    }
  })

  it("a custom verifier: judged on its claims; actors it sets itself without act are dropped", async () => {
    const calls: Array<string> = []
    const verifier = custom((access) => {
      calls.push(access)
      const base = { scopes: ["mcp:tools"], audience: [RESOURCE], expiresAt: now() + 600 }
      if (access === "claimed") return { ...base, claims: {}, actors: [{ sub: "forged" }] }
      return { ...base, claims: { act: { sub: access } } }
    })
    const without = createProtectedResource(options({ verifier }))
    const refused = await without.authenticate(req("notes-server"))
    expect(!refused.ok && refused.response.headers.get("www-authenticate")).toBe(refusedChallenge(NOT_ACCEPTED))
    const claimed = await without.authenticate(req("claimed"))
    expect(claimed.ok && "actors" in claimed.token).toBe(false)
    const withDelegation = createProtectedResource(options({ verifier, delegation: { actors: ["notes-server"] } }))
    calls.length = 0
    for (let i = 0; i < 2; i++) {
      const accepted = await withDelegation.authenticate(req("notes-server"))
      expect(accepted.ok && accepted.token.actors).toEqual([{ sub: "notes-server" }])
    }
    // The second answer came from the verified-token cache, actors included.
    expect(calls).toEqual(["notes-server"])
  })
})

describe("Effect face", () => {
  const layer = (delegation: ProtectedResourceOptions["delegation"]) =>
    ProtectedResource.layer({
      resource: RESOURCE,
      authorizationServers: [ISSUER],
      ...(delegation === undefined ? {} : { delegation }),
    }).pipe(
      Layer.provide(
        TokenVerifier.layerJwt({ audience: RESOURCE, issuers: [ISSUER], jwksUri: jwks.url, jwksCooldownMs: 60_000 }),
      ),
    )
  const authenticate = (access: string) =>
    Effect.gen(function* () {
      const pr = yield* ProtectedResource
      return yield* pr.authenticateEffect({
        method: "GET",
        url: RESOURCE,
        authorization: `Bearer ${access}`,
        contentType: null,
      })
    })

  it("authenticateEffect exposes the actors, and fails with the refusal", async () => {
    const access = await token({ act: { sub: "gateway", act: { sub: "notes-server" } } })
    const accepted = await Effect.runPromise(
      authenticate(access).pipe(Effect.provide(layer({ actors: ["gateway", "notes-server"], maxChain: 2 }))),
    )
    expect(accepted.token.actors).toEqual([{ sub: "gateway" }, { sub: "notes-server" }])
    const refused = await Effect.runPromise(
      Effect.flip(authenticate(access)).pipe(Effect.provide(layer({ actors: ["gateway"], maxChain: 2 }))),
    )
    expect(refused.message).toBe("401 invalid_token: The actor 'notes-server' is not accepted by this resource")
    const undelegated = await Effect.runPromise(
      Effect.flip(authenticate(access)).pipe(Effect.provide(layer(undefined))),
    )
    expect(undelegated.message).toBe(`401 invalid_token: ${NOT_ACCEPTED}`)
  })
})

describe("configuration", () => {
  const base = { resource: RESOURCE, authorizationServers: [ISSUER] }
  it.each([
    [{ actors: [] }, "delegation.actors must name at least one actor"],
    [{ actors: ["notes-server", ""] }, 'delegation.actors has an actor that is not a non-empty string: ""'],
    [{ actors: ["notes-server"], maxChain: 0 }, "delegation.maxChain must be an integer from 1 to 16, not 0"],
    [{ actors: ["notes-server"], maxChain: 17 }, "delegation.maxChain must be an integer from 1 to 16, not 17"],
    [{ actors: ["notes-server"], maxChain: 1.5 }, "delegation.maxChain must be an integer from 1 to 16, not 1.5"],
  ])("refuses delegation %j on both faces", async (delegation, problem) => {
    const message = `Invalid protected resource configuration: ${problem}`
    let thrown: unknown
    try {
      createProtectedResource({ ...base, verifier: custom(() => null), delegation })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(InvalidConfiguration)
    expect((thrown as InvalidConfiguration).message).toBe(message)
    const failed = await Effect.runPromise(
      Effect.flip(
        Effect.scoped(
          Layer.build(
            ProtectedResource.layer({ ...base, delegation }).pipe(Layer.provide(TokenVerifier.layerCustom(() => null))),
          ),
        ),
      ),
    )
    expect(failed).toBeInstanceOf(InvalidConfiguration)
    expect(failed.message).toBe(message)
  })

  it("accepts maxChain up to core's MAX_CHAIN", () => {
    const service: ProtectedResourceService = createProtectedResource({
      ...base,
      verifier: custom(() => null),
      delegation: { actors: ["notes-server"], maxChain: TokenExchange.MAX_CHAIN },
    })
    expect(service.resource).toBe(RESOURCE)
  })
})
