import { it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, ManagedRuntime, Result } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, afterEach, beforeAll, describe, expect } from "vitest"
import { descriptions } from "../src/internal/reasons.js"
import { createProtectedResource } from "../src/ProtectedResource.js"
import {
  InvalidVerifierOptions,
  introspection,
  type JwtVerifierOptions,
  jwt,
  TokenVerifier,
} from "../src/TokenVerifier.js"
import { InvalidToken, type VerificationError, type VerifiedToken, VerifierUnavailable } from "../src/VerifiedToken.js"
import {
  makeKey,
  mint,
  now,
  type Running,
  type SigningKey,
  startIntrospection,
  startJwks,
  startNodeServer,
  startWebServer,
} from "./helpers.js"

const ISSUER = "https://as.example.com"
const RESOURCE = "https://mcp.example.com/mcp"

const claims = (extra: Record<string, unknown> = {}) => ({
  iss: ISSUER,
  aud: RESOURCE,
  sub: "user-1",
  scope: "a b",
  exp: now() + 600,
  ...extra,
})

// Each layer is built once (like an application does), so its JWKS cache lives across calls.
const built = new WeakMap<Layer.Layer<TokenVerifier, InvalidVerifierOptions>, TokenVerifier["Service"]>()
const verifyWith = (
  layer: Layer.Layer<TokenVerifier, InvalidVerifierOptions>,
  token: string,
): Promise<Result.Result<VerifiedToken, VerificationError>> => {
  let verifier = built.get(layer)
  if (verifier === undefined) {
    verifier = ManagedRuntime.make(layer).runSync(Effect.service(TokenVerifier))
    built.set(layer, verifier)
  }
  return Effect.runPromise(Effect.result(verifier.verify(token)))
}

const failure = (result: Result.Result<VerifiedToken, VerificationError>): VerificationError => {
  if (Result.isSuccess(result)) throw new Error("expected a failure")
  return result.failure
}

describe("JWT verifier", () => {
  let k1: SigningKey
  let k2: SigningKey
  let jwks: Awaited<ReturnType<typeof startJwks>>
  const opened: Array<Running> = []

  beforeAll(async () => {
    k1 = await makeKey("k1")
    k2 = await makeKey("k2", "PS256")
  })
  afterEach(async () => {
    await jwks?.close()
    for (const r of opened.splice(0)) await r.close()
  })

  const layer = (options: Partial<JwtVerifierOptions> = {}) =>
    TokenVerifier.layerJwt({ audience: RESOURCE, issuers: [ISSUER], jwksUri: jwks.url, ...options })

  it("reads subject, client (client_id or azp), scopes (scope or scp), issuer, audience and times", async () => {
    jwks = await startJwks([k1])
    const l = layer()
    const a = await verifyWith(l, await mint(k1, claims({ client_id: "c1", iat: 1, nbf: 2, jti: "j" })))
    expect(Result.isSuccess(a) && a.success).toMatchObject({
      subject: "user-1",
      clientId: "c1",
      scopes: ["a", "b"],
      issuer: ISSUER,
      audience: [RESOURCE],
      issuedAt: 1,
      notBefore: 2,
      tokenId: "j",
    })
    const b = await verifyWith(l, await mint(k1, claims({ scope: undefined, scp: ["x", "y", "x"], azp: "c2" })))
    expect(Result.isSuccess(b) && b.success).toMatchObject({ clientId: "c2", scopes: ["x", "y"] })
  })

  it("key rotation: a token signed by a newly published key triggers a refetch and is accepted", async () => {
    jwks = await startJwks([k1])
    const l = layer({ jwksCooldownMs: 0, algorithms: ["ES256", "PS256"] })
    const first = await verifyWith(l, await mint(k1, claims()))
    expect(Result.isSuccess(first)).toBe(true)
    expect(jwks.state.hits).toBe(1)
    jwks.state.keys = [k1, k2]
    const rotated = await verifyWith(l, await mint(k2, claims(), { alg: "PS256" }))
    expect(Result.isSuccess(rotated)).toBe(true)
    expect(jwks.state.hits).toBe(2)
  })

  it("a retired key is refused once the key set is refreshed", async () => {
    jwks = await startJwks([k1])
    const l = layer({ jwksCacheMaxAgeMs: 0 })
    expect(Result.isSuccess(await verifyWith(l, await mint(k1, claims())))).toBe(true)
    jwks.state.keys = [await makeKey("k3")]
    const error = failure(await verifyWith(l, await mint(k1, claims())))
    expect(error).toEqual(new InvalidToken({ reason: "unknown-key", description: descriptions["unknown-key"] }))
  })

  it("a key selected before is forgotten when a later fetch of the key set no longer has it", async () => {
    jwks = await startJwks([k1])
    const l = layer({ jwksCooldownMs: 0 })
    for (let i = 0; i < 3; i++) expect(Result.isSuccess(await verifyWith(l, await mint(k1, claims())))).toBe(true)
    expect(jwks.state.hits).toBe(1)
    const k3 = await makeKey("k3")
    jwks.state.keys = [k3]
    // An unknown kid makes jose fetch the set again, while the one fetched first is still fresh.
    expect(Result.isSuccess(await verifyWith(l, await mint(k3, claims())))).toBe(true)
    expect(jwks.state.hits).toBe(2)
    const error = failure(await verifyWith(l, await mint(k1, claims())))
    expect(error).toEqual(new InvalidToken({ reason: "unknown-key", description: descriptions["unknown-key"] }))
  })

  it("unknown kid: exactly one refetch, then invalid_token", async () => {
    jwks = await startJwks([k1])
    const l = layer({ jwksCooldownMs: 0 })
    expect(Result.isSuccess(await verifyWith(l, await mint(k1, claims())))).toBe(true)
    expect(jwks.state.hits).toBe(1)
    const stranger = await makeKey("stranger")
    const error = failure(await verifyWith(l, await mint(stranger, claims())))
    expect(error).toEqual(new InvalidToken({ reason: "unknown-key", description: descriptions["unknown-key"] }))
    expect(jwks.state.hits).toBe(2)
  })

  it("unknown kid refetches are rate-limited by the cooldown", async () => {
    jwks = await startJwks([k1])
    const l = layer({ jwksCooldownMs: 60_000 })
    expect(Result.isSuccess(await verifyWith(l, await mint(k1, claims())))).toBe(true)
    const stranger = await makeKey("stranger")
    for (let i = 0; i < 5; i++) {
      const error = failure(await verifyWith(l, await mint(stranger, claims())))
      expect((error as InvalidToken).reason).toBe("unknown-key")
    }
    expect(jwks.state.hits).toBe(1)
  })

  it("a token from an unknown issuer never causes a JWKS fetch", async () => {
    jwks = await startJwks([k1])
    const error = failure(await verifyWith(layer(), await mint(k1, claims({ iss: "https://evil.example.com" }))))
    expect((error as InvalidToken).reason).toBe("wrong-issuer")
    expect(jwks.state.hits).toBe(0)
  })

  it("JWKS endpoint down: fails closed as unavailable, recovers when it returns", async () => {
    jwks = await startJwks([k1])
    jwks.state.down = true
    const l = layer({ jwksCooldownMs: 0, jwksCacheMaxAgeMs: 0 })
    const error = failure(await verifyWith(l, await mint(k1, claims())))
    expect(error).toBeInstanceOf(VerifierUnavailable)
    expect(error.message).toBe(
      "Token verification is unavailable (jwks): Expected 200 OK from the JSON Web Key Set HTTP response",
    )
    jwks.state.down = false
    expect(Result.isSuccess(await verifyWith(l, await mint(k1, claims())))).toBe(true)
  })

  it("JWKS endpoint unreachable: unavailable", async () => {
    jwks = await startJwks([k1])
    const closed = `${jwks.url}`
    await jwks.close()
    const error = failure(await verifyWith(layer({ jwksUri: closed }), await mint(k1, claims())))
    expect(error).toBeInstanceOf(VerifierUnavailable)
    expect((error as VerifierUnavailable).source).toBe("jwks")
  })

  const refusal = (option: string, message: string) => new InvalidVerifierOptions({ option, message })
  /** The error `run` throws, checked to be exactly `expected` (class, tag, option and message). */
  const expectRefusal = (run: () => unknown, expected: InvalidVerifierOptions) => {
    let thrown: unknown
    try {
      run()
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(InvalidVerifierOptions)
    const error = thrown as InvalidVerifierOptions
    expect([error._tag, error.option, error.message]).toEqual([
      "InvalidVerifierOptions",
      expected.option,
      expected.message,
    ])
  }
  /** Building the layer fails (in the error channel, not as a defect) with exactly `expected`. */
  const expectLayerFailure = (
    layer: Layer.Layer<TokenVerifier, InvalidVerifierOptions>,
    expected: InvalidVerifierOptions,
  ) => {
    const exit = Effect.runSyncExit(Layer.build(layer).pipe(Effect.scoped))
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) {
      expect(Cause.hasDies(exit.cause)).toBe(false)
      const error = Cause.squash(exit.cause)
      expect(error).toBeInstanceOf(InvalidVerifierOptions)
      expect(error).toMatchObject({
        _tag: "InvalidVerifierOptions",
        option: expected.option,
        message: expected.message,
      })
    }
  }

  it("refuses unusable options", () => {
    const base = { audience: RESOURCE, issuers: [ISSUER], jwksUri: "https://as.example.com/jwks" }
    expectRefusal(
      () => jwt({ jwksUri: base.jwksUri, algorithms: ["HS256"] }),
      refusal("algorithms", 'HMAC algorithm "HS256" is not accepted: a public JWKS cannot verify it'),
    )
    expectRefusal(
      () => jwt({ jwksUri: base.jwksUri, algorithms: ["none"] }),
      refusal("algorithms", 'algorithm "none" is never accepted'),
    )
    expectRefusal(() => jwt({ algorithms: [] }), refusal("algorithms", "algorithms must not be empty"))
    expectRefusal(
      () => jwt({ jwksUri: base.jwksUri, clockSkewSeconds: 3600 }),
      refusal("clockSkewSeconds", "clockSkewSeconds must be between 0 and 300"),
    )
  })

  it("the verifier layers fail with InvalidVerifierOptions, not a defect", () => {
    const base = { audience: RESOURCE, issuers: [ISSUER], jwksUri: "https://as.example.com/jwks" }
    expectLayerFailure(
      TokenVerifier.layerJwt({ ...base, issuers: [] }),
      refusal("issuers", "issuers must not be empty"),
    )
    expectLayerFailure(
      TokenVerifier.layerJwt({ ...base, algorithms: ["HS256"] }),
      refusal("algorithms", 'HMAC algorithm "HS256" is not accepted: a public JWKS cannot verify it'),
    )
    expectLayerFailure(
      TokenVerifier.layerJwt({ ...base, jwksUri: "not a url" }),
      refusal("jwksUri", "jwksUri is not a URL: not a url"),
    )
    expectLayerFailure(
      TokenVerifier.layerJwt({ ...base, jwksUri: { "https://other.example.com": "https://as.example.com/jwks" } }),
      refusal("jwksUri", `no jwksUri for issuer ${ISSUER}`),
    )
    expectLayerFailure(
      TokenVerifier.layerIntrospection({
        endpoint: "http://as.example.com/introspect",
        clientAuth: { method: "bearer", token: "rs-token" },
        audience: RESOURCE,
      }),
      refusal("endpoint", "endpoint must use https: http://as.example.com/introspect"),
    )
    expectLayerFailure(
      TokenVerifier.layerIntrospection({
        endpoint: "https://as.example.com/introspect",
        clientAuth: { method: "bearer", token: "rs-token" },
        audience: RESOURCE,
        clockSkewSeconds: -1,
      }),
      refusal("clockSkewSeconds", "clockSkewSeconds must be between 0 and 300"),
    )
  })

  it("JWKS and introspection endpoints must use https except on loopback", () => {
    const define = (verifier: ReturnType<typeof jwt>) =>
      createProtectedResource({ resource: RESOURCE, authorizationServers: [ISSUER], verifier })
    expectRefusal(
      () => define(jwt({ jwksUri: "http://as.example.com/jwks" })),
      refusal("jwksUri", "jwksUri must use https: http://as.example.com/jwks"),
    )
    expect(() => define(jwt({ jwksUri: "http://as.example.com/jwks", allowInsecureHttp: true }))).not.toThrow()
    expect(() => define(jwt({ jwksUri: "http://localhost:9/jwks" }))).not.toThrow()
    expectRefusal(
      () =>
        define(
          introspection({
            endpoint: "http://as.example.com/introspect",
            clientAuth: { method: "bearer", token: "rs-token" },
          }),
        ),
      refusal("endpoint", "endpoint must use https: http://as.example.com/introspect"),
    )
  })

  it("clock skew: a token expired a moment ago passes within the tolerance", async () => {
    jwks = await startJwks([k1])
    const token = await mint(k1, claims({ exp: now() - 5 }))
    expect(Result.isSuccess(await verifyWith(layer({ clockSkewSeconds: 60 }), token))).toBe(true)
    expect((failure(await verifyWith(layer({ clockSkewSeconds: 0 }), token)) as InvalidToken).reason).toBe("expired")
  })

  it.effect("reads time from the Effect Clock: a token is live until exp plus the skew, then expired", () =>
    Effect.gen(function* () {
      jwks = yield* Effect.promise(() => startJwks([k1]))
      // TestClock starts at the epoch: a token expiring 1000 s after it is live now.
      const token = yield* Effect.promise(() => mint(k1, claims({ exp: 1_000 })))
      const verifier = yield* TokenVerifier.pipe(Effect.provide(layer({ clockSkewSeconds: 10 })))
      expect((yield* verifier.verify(token)).expiresAt).toBe(1_000)
      yield* TestClock.setTime(1_009_000)
      expect((yield* verifier.verify(token)).expiresAt).toBe(1_000)
      yield* TestClock.adjust("1 second")
      expect(yield* Effect.flip(verifier.verify(token))).toEqual(
        new InvalidToken({ reason: "expired", description: descriptions.expired }),
      )
    }),
  )

  it("claims of the wrong RFC 9068 type are malformed; sub, client_id, iat and jti may be absent", async () => {
    jwks = await startJwks([k1])
    const l = layer()
    expect(Result.isSuccess(await verifyWith(l, await mint(k1, claims({ sub: undefined }))))).toBe(true)
    const wrong = [{ sub: 42 }, { client_id: "" }, { aud: [RESOURCE, 7] }, { jti: false }]
    for (const extra of wrong) {
      expect(failure(await verifyWith(l, await mint(k1, claims(extra))))).toEqual(
        new InvalidToken({ reason: "malformed", description: descriptions.malformed }),
      )
    }
  })

  it("per-issuer JWKS URLs", async () => {
    jwks = await startJwks([k1])
    const other = await startJwks([k2])
    opened.push(other)
    const l = layer({
      issuers: [ISSUER, "https://as2.example.com"],
      jwksUri: { [ISSUER]: jwks.url, "https://as2.example.com": other.url },
      algorithms: ["ES256", "PS256"],
    })
    expect(Result.isSuccess(await verifyWith(l, await mint(k1, claims())))).toBe(true)
    const second = await mint(k2, claims({ iss: "https://as2.example.com" }), { alg: "PS256" })
    expect(Result.isSuccess(await verifyWith(l, second))).toBe(true)
    expect([jwks.state.hits, other.state.hits]).toEqual([1, 1])
  })
})

describe("JWKS discovery from authorization server metadata", () => {
  it("reads jwks_uri from the issuer's metadata once, and refuses metadata naming another issuer", async () => {
    const key = await makeKey("k1")
    const jwks = await startJwks([key])
    let metadataHits = 0
    let issuerInDocument: string | undefined
    let jwksInDocument: string | undefined = jwks.url
    const as = await startNodeServer((req, res) => {
      metadataHits++
      if (req.url !== "/.well-known/oauth-authorization-server") {
        res.writeHead(404).end()
        return
      }
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ issuer: issuerInDocument, jwks_uri: jwksInDocument }))
    })
    try {
      issuerInDocument = as.origin
      const l = TokenVerifier.layerJwt({ audience: RESOURCE, issuers: [as.origin] })
      for (let i = 0; i < 2; i++) {
        const result = await verifyWith(l, await mint(key, claims({ iss: as.origin })))
        expect(Result.isSuccess(result)).toBe(true)
      }
      expect(metadataHits).toBe(1)
      expect(jwks.state.hits).toBe(1)

      issuerInDocument = "https://impostor.example.com"
      const other = TokenVerifier.layerJwt({ audience: RESOURCE, issuers: [as.origin], jwksCooldownMs: 60_000 })
      const error = failure(await verifyWith(other, await mint(key, claims({ iss: as.origin }))))
      // The refusal is core's (Metadata.processAuthorizationServerMetadata), the same every role gives.
      expect(error).toEqual(
        new VerifierUnavailable({
          source: "jwks",
          detail: `the authorization server metadata at ${as.origin}/.well-known/oauth-authorization-server has issuer "https://impostor.example.com" but "${as.origin}" was expected (compared exactly, without normalisation); refusing to use it`,
        }),
      )
      // A failed discovery is not retried within the cooldown.
      const hits = metadataHits
      await verifyWith(other, await mint(key, claims({ iss: as.origin })))
      expect(metadataHits).toBe(hits)

      issuerInDocument = as.origin
      jwksInDocument = undefined
      const third = TokenVerifier.layerJwt({ audience: RESOURCE, issuers: [as.origin] })
      expect(failure(await verifyWith(third, await mint(key, claims({ iss: as.origin }))))).toEqual(
        new VerifierUnavailable({
          source: "jwks",
          detail: `the authorization server metadata at ${as.origin}/.well-known/oauth-authorization-server has no jwks_uri; its signing keys cannot be found`,
        }),
      )
    } finally {
      await as.close()
      await jwks.close()
    }
  })
})

describe("JWKS discovery cooldown", () => {
  it.effect("a failed discovery is retried only once the cooldown has passed on the Clock", () =>
    Effect.gen(function* () {
      let metadataHits = 0
      const as = yield* Effect.acquireRelease(
        Effect.promise(() =>
          startNodeServer((_req, res) => {
            metadataHits++
            res.writeHead(503).end()
          }),
        ),
        (running) => Effect.promise(() => running.close()),
      )
      const key = yield* Effect.promise(() => makeKey("k1"))
      const token = yield* Effect.promise(() => mint(key, claims({ iss: as.origin })))
      const verifier = yield* TokenVerifier.pipe(
        Effect.provide(TokenVerifier.layerJwt({ audience: RESOURCE, issuers: [as.origin], jwksCooldownMs: 30_000 })),
      )
      const first = yield* Effect.flip(verifier.verify(token))
      expect(first).toEqual(
        new VerifierUnavailable({ source: "jwks", detail: `no authorization server metadata found for ${as.origin}` }),
      )
      const tried = metadataHits
      expect(tried).toBeGreaterThan(0)
      yield* TestClock.adjust("29 seconds")
      expect(yield* Effect.flip(verifier.verify(token))).toEqual(first)
      expect(metadataHits).toBe(tried)
      yield* TestClock.adjust("1 second")
      yield* Effect.flip(verifier.verify(token))
      expect(metadataHits).toBe(2 * tried)
    }),
  )
})

describe("introspection verifier", () => {
  let is: Awaited<ReturnType<typeof startIntrospection>>
  beforeAll(async () => {
    is = await startIntrospection()
  })
  afterAll(() => is.close())

  const layer = (extra: Record<string, unknown> = {}) =>
    TokenVerifier.layerIntrospection({
      endpoint: is.url,
      clientAuth: { method: "client_secret_basic", clientId: "rs", clientSecret: "s3cret" },
      audience: RESOURCE,
      issuers: [ISSUER],
      ...extra,
    })

  const active = (extra: Record<string, unknown> = {}) => ({
    active: true,
    iss: ISSUER,
    aud: RESOURCE,
    sub: "u",
    client_id: "c",
    scope: "a b",
    exp: now() + 600,
    ...extra,
  })

  it("authenticates with client_secret_basic, posts the token as a form and reads the answer", async () => {
    is.state.answers.tok1 = active()
    const result = await verifyWith(layer(), "tok1")
    expect(Result.isSuccess(result) && result.success).toMatchObject({
      subject: "u",
      clientId: "c",
      scopes: ["a", "b"],
    })
    expect(is.state.lastAuthorization).toBe(`Basic ${btoa("rs:s3cret")}`)
    expect(is.state.lastBody).toBe("token=tok1&token_type_hint=access_token")
  })

  it("client_secret_post", async () => {
    is.state.answers.tok2 = active()
    const l = layer({ clientAuth: { method: "client_secret_post", clientId: "rs", clientSecret: "s3cret" } })
    expect(Result.isSuccess(await verifyWith(l, "tok2"))).toBe(true)
    expect(is.state.lastBody).toBe("token=tok2&token_type_hint=access_token&client_id=rs&client_secret=s3cret")
  })

  it("bearer authentication to the endpoint", async () => {
    is.state.answers.tok6 = active()
    const l = layer({ clientAuth: { method: "bearer", token: "rs-token" } })
    expect(Result.isSuccess(await verifyWith(l, "tok6"))).toBe(true)
    expect(is.state.lastAuthorization).toBe("Bearer rs-token")
  })

  it("endpoint unreachable: unavailable", async () => {
    const gone = await startIntrospection()
    await gone.close()
    const error = failure(await verifyWith(layer({ endpoint: gone.url }), "tok1"))
    expect(error).toBeInstanceOf(VerifierUnavailable)
    expect((error as VerifierUnavailable).source).toBe("introspection")
  })

  it.each([
    ["active: false", { active: false }, "inactive"],
    ["expired", active({ exp: now() - 120 }), "expired"],
    ["another audience", active({ aud: "https://other.example.com" }), "wrong-audience"],
    ["no audience", active({ aud: undefined }), "wrong-audience"],
    ["untrusted issuer", active({ iss: "https://evil.example.com" }), "wrong-issuer"],
  ] as const)("%s is refused", async (_name, answer, reason) => {
    is.state.answers.t = answer as Record<string, unknown>
    expect(failure(await verifyWith(layer(), "t"))).toEqual(
      new InvalidToken({ reason, description: descriptions[reason] }),
    )
  })

  it.effect("reuse of an answer is bounded by the cache TTL, from the Clock's now", () =>
    Effect.gen(function* () {
      is.state.answers.tok3 = active({ exp: 3_600 })
      yield* TestClock.setTime(1_000_000)
      const verifier = yield* TokenVerifier.pipe(Effect.provide(layer({ cacheTtlSeconds: 10 })))
      expect((yield* verifier.verify("tok3")).reuseUntil).toBe(1_010_000)
      // exp (with the default 30 s skew) is judged by the same Clock.
      yield* TestClock.setTime(3_629_000)
      expect((yield* verifier.verify("tok3")).expiresAt).toBe(3_600)
      yield* TestClock.setTime(3_630_000)
      expect(yield* Effect.flip(verifier.verify("tok3"))).toEqual(
        new InvalidToken({ reason: "expired", description: descriptions.expired }),
      )
    }),
  )

  it("members of the wrong RFC 7662 type fail closed as unavailable instead of being ignored", async () => {
    is.state.answers.typed = active({ exp: "never" })
    expect(failure(await verifyWith(layer(), "typed"))).toEqual(
      new VerifierUnavailable({
        source: "introspection",
        detail: 'introspection response: "exp" must be a number',
      }),
    )
  })

  it("a wrong client secret is a failure of the endpoint, not a valid token", async () => {
    is.state.answers.tok4 = active()
    const l = layer({ clientAuth: { method: "client_secret_basic", clientId: "rs", clientSecret: "wrong" } })
    const error = failure(await verifyWith(l, "tok4"))
    expect(error).toEqual(new VerifierUnavailable({ source: "introspection", detail: "status 401" }))
  })

  it("answers when the caller's fetch keeps a clone of every response it never reads (a logging wrapper)", async () => {
    const kept: Array<Response> = []
    const keeping = async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init)
      kept.push(response.clone())
      return response
    }
    const l = layer({
      clientAuth: { method: "client_secret_basic", clientId: "rs", clientSecret: "wrong" },
      fetch: keeping,
      // Longer than the test's own timeout: the call's timeout would otherwise end a wait on the cancellation.
      timeoutMs: 120_000,
    })
    const error = failure(await verifyWith(l, "tok4"))
    expect(error).toEqual(new VerifierUnavailable({ source: "introspection", detail: "status 401" }))
    expect(kept.map((k) => k.status)).toEqual([401])
  })

  it("endpoint down: 401 over HTTP, then recovers; results are cached by the protected resource", async () => {
    const server = await startWebServer()
    try {
      const resource = `${server.origin}/mcp`
      const handle = createProtectedResource({
        resource,
        authorizationServers: [ISSUER],
        verifier: introspection({
          endpoint: is.url,
          clientAuth: { method: "client_secret_basic", clientId: "rs", clientSecret: "s3cret" },
        }),
      })
      server.setHandler(handle.protect(() => new Response("ok")))
      is.state.answers.tok5 = active({ aud: resource })
      is.state.down = true
      const down = await fetch(resource, { headers: { authorization: "Bearer tok5" } })
      expect(down.status).toBe(401)
      expect(down.headers.get("www-authenticate")).toBe(
        `Bearer resource_metadata="${server.origin}/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="The access token could not be verified"`,
      )
      is.state.down = false
      const hits = is.state.hits
      for (let i = 0; i < 3; i++) {
        const up = await fetch(resource, { headers: { authorization: "Bearer tok5" } })
        expect(up.status).toBe(200)
      }
      expect(is.state.hits).toBe(hits + 1)
    } finally {
      await server.close()
    }
  })
})

describe("JWKS down over HTTP", () => {
  it("401 with the exact challenge, then recovers", async () => {
    const key = await makeKey("k1")
    const jwks = await startJwks([key])
    const server = await startWebServer()
    try {
      const resource = `${server.origin}/mcp`
      const handle = createProtectedResource({
        resource,
        authorizationServers: [ISSUER],
        verifier: jwt({ jwksUri: jwks.url, jwksCooldownMs: 0 }),
      })
      server.setHandler(handle.protect(() => new Response("ok")))
      jwks.state.down = true
      const token = await mint(key, claims({ aud: resource }))
      const down = await fetch(resource, { headers: { authorization: `Bearer ${token}` } })
      expect(down.status).toBe(401)
      expect(down.headers.get("www-authenticate")).toBe(
        `Bearer resource_metadata="${server.origin}/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="The access token could not be verified"`,
      )
      jwks.state.down = false
      const up = await fetch(resource, { headers: { authorization: `Bearer ${token}` } })
      expect(up.status).toBe(200)
      expect(await up.text()).toBe("ok")
    } finally {
      await server.close()
      await jwks.close()
    }
  })
})

describe("unknown kid over HTTP", () => {
  it("one JWKS refetch, then 401 with the exact challenge", async () => {
    const key = await makeKey("k1")
    const jwks = await startJwks([key])
    const server = await startWebServer()
    try {
      const resource = `${server.origin}/mcp`
      const handle = createProtectedResource({
        resource,
        authorizationServers: [ISSUER],
        verifier: jwt({ jwksUri: jwks.url, jwksCooldownMs: 0 }),
      })
      server.setHandler(handle.protect(() => new Response("ok")))
      const good = await fetch(resource, {
        headers: { authorization: `Bearer ${await mint(key, claims({ aud: resource }))}` },
      })
      expect(good.status).toBe(200)
      expect(jwks.state.hits).toBe(1)
      const stranger = await makeKey("unknown")
      const token = await mint(stranger, claims({ aud: resource }))
      const response = await fetch(resource, { headers: { authorization: `Bearer ${token}` } })
      expect(response.status).toBe(401)
      expect(response.headers.get("www-authenticate")).toBe(
        `Bearer resource_metadata="${server.origin}/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="The access token was signed with an unknown key"`,
      )
      expect(jwks.state.hits).toBe(2)
    } finally {
      await server.close()
      await jwks.close()
    }
  })
})
