import {
  AuthorizationServer,
  createAuthorizationServer,
  Extension,
  Storage,
  UserAuthenticator,
} from "@keyway/authorization-server"
import { Grant } from "@keyway/core"
import { Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import { base64url, decodeJwt, exportJWK, generateKeyPair, SignJWT } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type TrustedIssuer, workloadIdentityGrant } from "../src/authorization-server.js"
import { callMcp, type Stack, startStack, startWorkloadIssuer, tokenRequest, type WorkloadIssuer } from "./support.js"

const SUB = "spiffe://example.org/agent"
const ALGS = Grant.ASYMMETRIC_ALGORITHMS.join(", ")
const now = () => Math.floor(Date.now() / 1000)

describe.each(["memory", "sqlite"] as const)("the JWT bearer grant with %s storage", (storage) => {
  let stack: Stack
  beforeAll(async () => {
    stack = await startStack({ storage })
  })
  afterAll(async () => {
    await stack?.close()
  })

  it("lists the grant in the metadata", async () => {
    const metadata = (await (await fetch(`${stack.issuer}/.well-known/oauth-authorization-server`)).json()) as {
      grant_types_supported: ReadonlyArray<string>
    }
    expect(metadata.grant_types_supported).toContain(Grant.JWT_BEARER)
  })

  it("issues a token bound to one resource: that MCP server accepts it, another refuses it", async () => {
    const assertion = await stack.workload.sign({})
    const { status, body } = await tokenRequest(stack, { assertion, resource: stack.mcp[0] })
    expect(status).toBe(200)
    expect(body).toMatchObject({ token_type: "Bearer", scope: "notes:read", expires_in: 300 })
    expect(body).not.toHaveProperty("refresh_token")
    const token = body.access_token as string
    expect(decodeJwt(token)).toMatchObject({
      iss: stack.issuer,
      sub: SUB,
      aud: stack.mcp[0],
      client_id: stack.workload.issuer,
      scope: "notes:read",
    })

    const accepted = await callMcp(stack.mcp[0], token)
    expect(accepted.status).toBe(200)
    expect(await accepted.json()).toMatchObject({
      result: { subject: SUB, clientId: stack.workload.issuer, scopes: ["notes:read"] },
    })
    const refused = await callMcp(stack.mcp[1], token)
    expect(refused.status).toBe(401)
    expect(refused.headers.get("www-authenticate")).toContain('error="invalid_token"')

    const issued = stack.log.find((event) => event.outcome === "issued")
    expect(issued).toMatchObject({
      issuer: stack.workload.issuer,
      subject: SUB,
      resource: stack.mcp[0],
      scope: "notes:read",
      clientId: stack.workload.issuer,
    })
    // Neither the assertion nor the token is ever logged.
    expect(JSON.stringify(stack.log)).not.toContain(assertion.split(".")[2])
    expect(JSON.stringify(stack.log)).not.toContain(token.split(".")[2])
  })

  it("accepts an assertion once: a replayed jti is invalid_grant", async () => {
    const assertion = await stack.workload.sign({})
    expect((await tokenRequest(stack, { assertion, resource: stack.mcp[0] })).status).toBe(200)
    expect(await tokenRequest(stack, { assertion, resource: stack.mcp[0] })).toEqual({
      status: 400,
      body: {
        error: "invalid_grant",
        error_description: "the assertion's jti was already used: an assertion is accepted once",
      },
    })
    expect(stack.log.at(-1)).toMatchObject({
      outcome: "refused",
      error: "invalid_grant",
      subject: SUB,
      description: "the assertion's jti was already used: an assertion is accepted once",
    })
  })
})

describe("refusals", () => {
  let stack: Stack
  beforeAll(async () => {
    stack = await startStack()
  })
  afterAll(async () => {
    await stack?.close()
  })

  const grant = (description: string) => ({
    status: 400,
    body: { error: "invalid_grant", error_description: description },
  })
  const ask = async (claims: Readonly<Record<string, unknown>>, extra: Readonly<Record<string, string>> = {}) =>
    tokenRequest(stack, { assertion: await stack.workload.sign(claims), resource: stack.mcp[0], ...extra })

  it("without an assertion: invalid_request", async () => {
    expect(await tokenRequest(stack, { resource: stack.mcp[0] })).toEqual({
      status: 400,
      body: { error: "invalid_request", error_description: "assertion is missing" },
    })
  })

  it("a value that is not a JWT", async () => {
    expect(await tokenRequest(stack, { assertion: "not-a-jwt", resource: stack.mcp[0] })).toEqual(
      grant("the assertion is not a signed JWT (JWS compact serialization, RFC 7523 section 3)"),
    )
  })

  it("an untrusted issuer", async () => {
    expect(await ask({ iss: "https://untrusted.example" })).toEqual(
      grant("the assertion's issuer https://untrusted.example is not trusted"),
    )
  })

  it("a bad signature", async () => {
    const [header, , signature] = (await stack.workload.sign({})).split(".")
    const forged = base64url.encode(
      JSON.stringify({ iss: stack.workload.issuer, sub: "spiffe://example.org/admin", aud: stack.issuer }),
    )
    expect(
      await tokenRequest(stack, { assertion: `${header}.${forged}.${signature}`, resource: stack.mcp[0] }),
    ).toEqual(grant(`the assertion's signature does not verify with the keys of issuer ${stack.workload.issuer}`))
  })

  it("a key the issuer does not publish", async () => {
    const assertion = await stack.workload.sign({}, { kid: "unknown-key" })
    expect(await tokenRequest(stack, { assertion, resource: stack.mcp[0] })).toEqual(
      grant(
        `no key of issuer ${stack.workload.issuer} matches the assertion (kid unknown-key, keys from ${stack.workload.jwksUri})`,
      ),
    )
  })

  it("the none algorithm and HMAC", async () => {
    const payload = base64url.encode(JSON.stringify({ iss: stack.workload.issuer, sub: SUB, aud: stack.issuer }))
    const unsecured = `${base64url.encode(JSON.stringify({ alg: "none" }))}.${payload}.`
    expect(await tokenRequest(stack, { assertion: unsecured, resource: stack.mcp[0] })).toEqual(
      grant(`the assertion's alg is none: only asymmetric signatures are accepted (${ALGS})`),
    )
    const hmac = await new SignJWT({ iss: stack.workload.issuer, sub: SUB, aud: stack.issuer, jti: "h1" })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode("a shared secret that anyone holding the public key could guess"))
    expect(await tokenRequest(stack, { assertion: hmac, resource: stack.mcp[0] })).toEqual(
      grant(`the assertion's alg is HS256: only asymmetric signatures are accepted (${ALGS})`),
    )
  })

  it("a wrong audience", async () => {
    expect(await ask({ aud: "https://other-as.example" })).toEqual(
      grant(
        `the assertion's aud does not name this authorization server (accepted: ${stack.issuer}, ${stack.tokenEndpoint})`,
      ),
    )
  })

  it("the token endpoint URL as audience", async () => {
    expect(await ask({ aud: [stack.tokenEndpoint, "https://elsewhere.example"] })).toMatchObject({ status: 200 })
  })

  it("an expired assertion, beyond the clock skew", async () => {
    const exp = now() - 61
    expect(await ask({ exp, iat: exp - 300 })).toEqual(grant(`the assertion expired at ${exp} (clock skew 60 s)`))
  })

  it("an iat in the future, beyond the clock skew", async () => {
    const iat = now() + 120
    expect(await ask({ iat, exp: iat + 300 })).toEqual(
      grant(`the assertion's iat ${iat} is in the future (clock skew 60 s)`),
    )
  })

  it("an nbf in the future", async () => {
    const nbf = now() + 120
    expect(await ask({ nbf })).toEqual(grant(`the assertion is not valid before ${nbf} (clock skew 60 s)`))
  })

  it("a lifetime longer than accepted", async () => {
    const iat = now()
    expect(await ask({ iat, exp: iat + 2 * 86_400 })).toEqual(
      grant("the assertion lives 172800 s (exp - iat), longer than the 86400 s accepted"),
    )
  })

  it("missing claims", async () => {
    expect(await ask({ jti: undefined })).toEqual(grant("the assertion has no jti claim (RFC 7523 section 3 item 7)"))
    expect(await ask({ sub: undefined })).toEqual(grant("the assertion has no sub claim (RFC 7523 section 3 item 2)"))
    expect(await ask({ aud: undefined })).toEqual(grant("the assertion has no aud claim (RFC 7523 section 3 item 3)"))
    expect(await ask({ exp: undefined })).toEqual(grant("the assertion has no exp claim (RFC 7523 section 3 item 4)"))
    expect(await ask({ iat: undefined })).toEqual(grant("the assertion has no iat claim"))
    expect(await ask({ iss: undefined })).toEqual(grant("the assertion has no iss claim (RFC 7523 section 3 item 1)"))
  })

  it("a workload no rule admits", async () => {
    expect(await ask({ sub: "spiffe://example.org/other" })).toEqual(
      grant(`no rule of issuer ${stack.workload.issuer} admits the workload spiffe://example.org/other`),
    )
  })

  it("a scope the workload may not have: invalid_scope", async () => {
    expect(await ask({}, { scope: "notes:read notes:write" })).toEqual({
      status: 400,
      body: {
        error: "invalid_scope",
        error_description: `the workload ${SUB} may not be granted notes:write at ${stack.mcp[0]}`,
      },
    })
    expect(await ask({}, { scope: "notes:read" })).toMatchObject({ status: 200, body: { scope: "notes:read" } })
  })

  it("a resource the workload may not use, and one the server does not serve: invalid_target", async () => {
    expect(await ask({}, { resource: stack.mcp[1] })).toEqual({
      status: 400,
      body: {
        error: "invalid_target",
        error_description: `the workload ${SUB} may not obtain tokens for ${stack.mcp[1]}`,
      },
    })
    expect(await ask({}, { resource: "https://elsewhere.example/mcp" })).toEqual({
      status: 400,
      body: {
        error: "invalid_target",
        error_description: "resource https://elsewhere.example/mcp is not served by this authorization server",
      },
    })
  })

  it("leaves identity assertions (typ oauth-id-jag+jwt) to another extension", async () => {
    const assertion = await stack.workload.sign({}, { typ: "oauth-id-jag+jwt" })
    expect(await tokenRequest(stack, { assertion, resource: stack.mcp[0] })).toEqual({
      status: 401,
      body: { error: "invalid_client", error_description: "client authentication failed" },
    })
  })

  it("logs every refusal with its reason", () => {
    const refused = stack.log.filter((event) => event.outcome === "refused")
    expect(refused.map((event) => event.error)).toContain("invalid_scope")
    expect(refused.find((event) => event.error === "invalid_target")).toMatchObject({
      issuer: stack.workload.issuer,
      subject: SUB,
      resource: stack.mcp[1],
    })
  })
})

describe("the server's abuse limits", () => {
  const ISSUER = "https://as.example"
  const RESOURCE = "https://mcp.example/mcp"
  const OTHER = "spiffe://example.org/-other"
  let workload: WorkloadIssuer
  beforeAll(async () => {
    workload = await startWorkloadIssuer(() => ISSUER)
  })
  afterAll(async () => {
    await workload?.close()
  })

  it("without a client: per client address, and per workload (iss and sub) once its assertion is verified and unused", async () => {
    const log: Array<Record<string, unknown>> = []
    // The server's clock stands still (TestClock) at the time the workload signs with, so every wait is exact.
    const startAt = Math.floor(Date.now() / 1000) * 1000
    const runtime = ManagedRuntime.make(
      AuthorizationServer.AuthorizationServer.layer({
        issuer: ISSUER,
        resources: [{ uri: RESOURCE, scopes: { "notes:read": "Read notes" } }],
        warn: () => {},
        rateLimits: {
          token: { max: 3, window: 60 },
          workload: { max: 2, window: 60 },
          clientAddress: (request) => request.headers.get("x-test-client") ?? undefined,
        },
      }).pipe(
        Layer.provide(
          Extension.Extensions.layer([
            workloadIdentityGrant({
              issuers: [
                {
                  issuer: workload.issuer,
                  jwks: { keys: [workload.publicJwk] },
                  rules: [{ claims: { sub: [SUB, OTHER] }, resources: [RESOURCE], scopes: ["notes:read"] }],
                },
              ],
              log: (event) => log.push({ ...event }),
            }),
          ]),
        ),
        Layer.provideMerge(Layer.merge(Storage.layerMemory, UserAuthenticator.UserAuthenticator.layerUsers([]))),
        Layer.provideMerge(Layer.provideMerge(Layer.effectDiscard(TestClock.setTime(startAt)), TestClock.layer())),
      ),
    )
    const ask = async (from: string, assertion: string) => {
      const response = await runtime.runPromise(
        AuthorizationServer.AuthorizationServer.use((server) =>
          server.handle(
            new Request(`${ISSUER}/token`, {
              method: "POST",
              headers: { "content-type": "application/x-www-form-urlencoded", "x-test-client": from },
              body: new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion, resource: RESOURCE }),
            }),
          ),
        ),
      )
      return { status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.json() }
    }
    const tooMany = (what: string, setting: string, max: number) => ({
      status: 429,
      retryAfter: "60",
      body: {
        error: "invalid_request",
        error_description: `${what}: ${setting} allows ${max} in 60 seconds; retry after 60 seconds`,
      },
    })
    try {
      // Requests that name no client, from one address: counted before the grant looks at them.
      for (let i = 0; i < 3; i++) {
        expect(await ask("198.51.100.7", "not-a-jwt")).toEqual({
          status: 400,
          retryAfter: null,
          body: {
            error: "invalid_grant",
            error_description: "the assertion is not a signed JWT (JWS compact serialization, RFC 7523 section 3)",
          },
        })
      }
      expect(await ask("198.51.100.7", await workload.sign({}))).toEqual(
        tooMany("too many token requests from this address", "rateLimits.token", 3),
      )
      // One workload, from anywhere: its verified, unused assertions.
      expect((await ask("203.0.113.1", await workload.sign({}))).status).toBe(200)
      const used = await workload.sign({})
      expect((await ask("203.0.113.2", used)).status).toBe(200)
      expect(await ask("203.0.113.3", await workload.sign({}))).toEqual(
        tooMany("too many token requests for this workload", "rateLimits.workload", 2),
      )
      expect(log.at(-1)).toMatchObject({
        outcome: "refused",
        subject: SUB,
        error: "invalid_request",
        description:
          "too many token requests for this workload: rateLimits.workload allows 2 in 60 seconds; retry after 60 seconds",
      })
      // A replayed assertion spends nothing: the workload's count is not the replayer's to spend.
      expect(await ask("203.0.113.4", used)).toEqual({
        status: 400,
        retryAfter: null,
        body: {
          error: "invalid_grant",
          error_description: "the assertion's jti was already used: an assertion is accepted once",
        },
      })
      // Another workload of the same issuer has its own count.
      expect((await ask("203.0.113.3", await workload.sign({ sub: OTHER }))).status).toBe(200)
      await runtime.runPromise(TestClock.adjust(60_000))
      expect((await ask("203.0.113.3", await workload.sign({}))).status).toBe(200)
      expect((await ask("198.51.100.7", await workload.sign({}))).status).toBe(200)
    } finally {
      await runtime.dispose()
    }
  })
})

describe("trusted issuer options", () => {
  it("claim rules: lists of values, array claims, several resources, a configured client_id", async () => {
    const stack = await startStack({
      issuer: (_, mcp) => ({
        clientId: "ci-workloads",
        rules: [
          {
            claims: { sub: [SUB, "spiffe://example.org/other"], groups: "writers" },
            resources: [mcp[0], mcp[1]],
            scopes: ["notes:read", "notes:write"],
          },
        ],
      }),
    })
    try {
      const assertion = await stack.workload.sign({ groups: ["readers", "writers"] })
      const { status, body } = await tokenRequest(stack, { assertion, resource: stack.mcp[1] })
      expect(status).toBe(200)
      expect(body.scope).toBe("notes:read notes:write")
      expect(decodeJwt(body.access_token as string)).toMatchObject({ client_id: "ci-workloads", aud: stack.mcp[1] })
      expect(
        await tokenRequest(stack, {
          assertion: await stack.workload.sign({ groups: "readers" }),
          resource: stack.mcp[1],
        }),
      ).toEqual({
        status: 400,
        body: {
          error: "invalid_grant",
          error_description: `no rule of issuer ${stack.workload.issuer} admits the workload ${SUB}`,
        },
      })
    } finally {
      await stack.close()
    }
  })

  it("maxAge, algorithms and inline keys", async () => {
    const stack = await startStack({
      issuer: (workload) => ({ maxAge: 60, algorithms: ["ES256"], jwks: { keys: [workload.publicJwk] } }),
    })
    try {
      const iat = now() - 200
      expect(
        await tokenRequest(stack, { assertion: await stack.workload.sign({ iat }), resource: stack.mcp[0] }),
      ).toEqual({
        status: 400,
        body: { error: "invalid_grant", error_description: `the assertion was issued more than 60 s ago (iat ${iat})` },
      })
      const { privateKey } = await generateKeyPair("RS256")
      const rs = await new SignJWT({ iss: stack.workload.issuer, sub: SUB, aud: stack.issuer, jti: "r1" })
        .setProtectedHeader({ alg: "RS256" })
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(privateKey)
      expect(await tokenRequest(stack, { assertion: rs, resource: stack.mcp[0] })).toEqual({
        status: 400,
        body: {
          error: "invalid_grant",
          error_description: `the assertion's alg RS256 is not accepted for issuer ${stack.workload.issuer} (accepted: ES256)`,
        },
      })
      expect(
        (await tokenRequest(stack, { assertion: await stack.workload.sign({}), resource: stack.mcp[0] })).status,
      ).toBe(200)
      expect(stack.workload.fetches()).toBe(0)
    } finally {
      await stack.close()
    }
  })

  it("caches the remote key set and fetches it again for an unknown kid after the cooldown", async () => {
    const stack = await startStack({ extension: { jwksCache: { cooldown: 0 } } })
    try {
      for (let i = 0; i < 2; i++) {
        expect(
          (await tokenRequest(stack, { assertion: await stack.workload.sign({}), resource: stack.mcp[0] })).status,
        ).toBe(200)
      }
      expect(stack.workload.fetches()).toBe(1)
      const unknown = await stack.workload.sign({}, { kid: "rotated-key" })
      expect((await tokenRequest(stack, { assertion: unknown, resource: stack.mcp[0] })).status).toBe(400)
      expect(stack.workload.fetches()).toBe(2)
    } finally {
      await stack.close()
    }
  })

  it("fetches keys from a loopback address only with the development flag: the SSRF guard refuses it before connecting", async () => {
    // https passes the configuration check; the guard refuses the address.
    const stack = await startStack({
      issuer: (workload) => ({ jwksUri: workload.jwksUri.replace("http:", "https:") }),
      extension: { development: {} },
    })
    try {
      const jwksUri = stack.workload.jwksUri.replace("http:", "https:")
      expect(await tokenRequest(stack, { assertion: await stack.workload.sign({}), resource: stack.mcp[0] })).toEqual({
        status: 400,
        body: {
          error: "invalid_grant",
          error_description: `the keys of issuer ${stack.workload.issuer} could not be obtained from ${jwksUri}: refused ${jwksUri}: address 127.0.0.1 is loopback (127.0.0.0/8)`,
        },
      })
      expect(stack.workload.fetches()).toBe(0)
    } finally {
      await stack.close()
    }
  })
})

describe("configuration", () => {
  const base = {
    issuer: "https://as.example",
    resources: [{ uri: "https://mcp.example/mcp", scopes: { "notes:read": "Read notes" } }],
  }
  const rule = { claims: { sub: SUB }, resources: ["https://mcp.example/mcp"], scopes: ["notes:read"] }
  const trusted: TrustedIssuer = {
    issuer: "https://workloads.example",
    jwksUri: "https://workloads.example/jwks",
    rules: [rule],
  }
  const problem = (issuer: Readonly<Record<string, unknown>>, extra: Readonly<Record<string, unknown>> = {}) => {
    try {
      createAuthorizationServer({
        ...base,
        extensions: [
          workloadIdentityGrant({ issuers: [{ ...trusted, ...issuer } as TrustedIssuer], warn: () => {}, ...extra }),
        ],
      })
      return undefined
    } catch (error) {
      return (error as Error).message
    }
  }
  const prefix = "io.modelcontextprotocol/auth/wif: "

  it("accepts a complete configuration", () => {
    expect(problem({})).toBeUndefined()
  })

  it("names the field of every problem", async () => {
    const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true })
    expect(problem({ jwksUri: "http://workloads.example/jwks" })).toBe(
      `${prefix}issuers[0].jwksUri: must be an https URL`,
    )
    expect(problem({ jwksUri: "http://127.0.0.1:9/jwks" })).toBe(
      `${prefix}issuers[0].jwksUri: must use https; set development.allowHttpLoopbackJwks to fetch keys over http from a loopback host`,
    )
    expect(problem({ jwks: { keys: [await exportJWK(publicKey)] } })).toBe(
      `${prefix}issuers[0].jwksUri: give exactly one of jwksUri and jwks`,
    )
    expect(problem({ jwksUri: undefined, jwks: { keys: [await exportJWK(privateKey)] } })).toBe(
      `${prefix}issuers[0].jwks.keys[0].d: must not be present: only public keys may be published`,
    )
    expect(problem({ clockSkew: 301 })).toBe(`${prefix}issuers[0].clockSkew: must be at most 300`)
    expect(problem({ algorithms: ["HS256"] })).toBe(`${prefix}issuers[0].algorithms[0]: must be one of ${ALGS}`)
    expect(problem({ rules: [{ ...rule, claims: {} }] })).toBe(
      `${prefix}issuers[0].rules[0].claims: must name at least one claim (for example sub)`,
    )
    expect(problem({ rules: [{ ...rule, resources: ["https://other.example/mcp"] }] })).toBe(
      `${prefix}issuers[0].rules[0].resources[0]: https://other.example/mcp is not a resource of this authorization server`,
    )
    expect(problem({ rules: [{ ...rule, scopes: ["notes:read", "notes:delete"] }] })).toBe(
      `${prefix}issuers[0].rules[0].scopes[1]: notes:delete is not a scope of https://mcp.example/mcp`,
    )
    expect(problem({ rules: undefined })).toBe(`${prefix}issuers[0].rules: is required`)
  })

  it("allows http keys on loopback only with the development flag, and warns once", () => {
    const warnings: Array<string> = []
    expect(
      problem(
        { jwksUri: "http://127.0.0.1:9/jwks" },
        { development: { allowHttpLoopbackJwks: true }, warn: (m: string) => warnings.push(m) },
      ),
    ).toBeUndefined()
    expect(warnings).toEqual([
      "[keyway] DEVELOPMENT MODE: workload identity keys are fetched over plain http from http://127.0.0.1:9/jwks. Never use this outside local development.",
    ])
  })
})
