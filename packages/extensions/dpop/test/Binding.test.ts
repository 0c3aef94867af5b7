import { UserAuthenticator } from "@keyway/authorization-server"
import { createAuthClient, type Discovery, Registration, TokenStore, UserAgent } from "@keyway/client"
import { Options } from "@keyway/core"
import { thrownBy } from "@keyway/testing"
import { Effect } from "effect"
import { base64url, calculateJwkThumbprint, decodeJwt, type JWK, SignJWT } from "jose"
import { afterEach, beforeAll, describe, expect, it } from "vitest"
import { dpop } from "../src/client.js"
import { dpopScheme } from "../src/resource-server.js"
import { makeKey, type TestKey } from "./support/keys.js"
import { call, SECRET, type Stack, startStack } from "./support/stack.js"

// The authorization code flow with DPoP: the code bound to the key by `dpop_jkt` (RFC 9449 §10), a public client's
// refresh tokens bound to it (RFC 9449 §5), and a client registered with `dpop_bound_access_tokens` (§5.2).

const USER = { username: "alice", password: "correct horse battery staple" }
const REDIRECT = "http://127.0.0.1/callback"
let passwordHash: string
beforeAll(async () => {
  passwordHash = await UserAuthenticator.hashPassword(USER.password)
})

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const stack = async (): Promise<Stack> => {
  const s = await startStack({
    schemes: [dpopScheme()],
    authorizationServer: {
      users: [{ username: USER.username, passwordHash }],
      registration: true,
      introspectionClients: [],
      clients: [
        { clientId: "app", redirectUris: [REDIRECT], grantTypes: ["authorization_code", "refresh_token"] },
        {
          clientId: "web",
          clientSecret: SECRET,
          redirectUris: [REDIRECT],
          grantTypes: ["authorization_code", "refresh_token"],
        },
      ],
    },
  })
  cleanups.push(s.close)
  return s
}

const key = await makeKey()
const otherKey = await makeKey()

const proof = (s: Stack, signer: TestKey) =>
  new SignJWT({ htm: "POST", htu: `${s.issuer}/token` })
    .setProtectedHeader({ typ: "dpop+jwt", alg: "ES256", jwk: signer.jwk })
    .setJti(crypto.randomUUID())
    .setIssuedAt()
    .sign(signer.privateKey)

const verifier = "v".repeat(43)
const challenge = base64url.encode(
  new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))),
)

/** The authorization URL for `clientId` with these extra parameters. */
const authorizationUrl = (s: Stack, clientId: string, extra: Record<string, string | ReadonlyArray<string>>) => {
  const url = new URL(`${s.issuer}/authorize`)
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource: s.mcp,
    scope: "notes:read",
    state: "s",
  }).toString()
  for (const [name, value] of Object.entries(extra)) {
    for (const v of typeof value === "string" ? [value] : value) url.searchParams.append(name, v)
  }
  return url.href
}

/** Signs in and approves as the test user; the callback URL the server redirected to. */
const authorize = async (url: string): Promise<URL> => {
  const agent = UserAgent.testUser({ username: USER.username, password: USER.password, redirectUri: REDIRECT })
  const session = await Effect.runPromise(agent.open)
  return new URL(await Effect.runPromise(session.run(url)))
}

const codeFor = async (s: Stack, clientId: string, extra: Record<string, string | ReadonlyArray<string>> = {}) => {
  const callback = await authorize(authorizationUrl(s, clientId, extra))
  const code = callback.searchParams.get("code")
  if (code === null) throw new Error(`no code in ${callback.href}`)
  return code
}

const token = (s: Stack, form: Record<string, string>, headers: Record<string, string> = {}, clientId = "app") =>
  fetch(`${s.issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(clientId === "web" ? { authorization: `Basic ${btoa(`web:${SECRET}`)}` } : {}),
      ...headers,
    },
    body: new URLSearchParams({ ...(clientId === "web" ? {} : { client_id: clientId }), ...form }),
  })

const redeem = (s: Stack, code: string, headers: Record<string, string>, clientId = "app") =>
  token(
    s,
    { grant_type: "authorization_code", code, code_verifier: verifier, redirect_uri: REDIRECT, resource: s.mcp },
    headers,
    clientId,
  )

const refresh = (s: Stack, refreshToken: string, headers: Record<string, string>, clientId = "app") =>
  token(s, { grant_type: "refresh_token", refresh_token: refreshToken }, headers, clientId)

const body = async (response: Response) => (await response.json()) as Record<string, string>

describe("Keyway's client with DPoP in the authorization code flow", () => {
  it("sends dpop_jkt, registers dpop_bound_access_tokens, and its refresh tokens work only with its key", async () => {
    const s = await stack()
    const authorizations: Array<URL> = []
    const registrations: Array<Record<string, unknown>> = []
    const agent = UserAgent.testUser({ username: USER.username, password: USER.password, redirectUri: REDIRECT })
    const auth = createAuthClient({
      clientName: "DPoP app",
      extensions: [dpop()],
      userAgent: {
        open: Effect.map(agent.open, (session) => ({
          ...session,
          run: (url: string) => {
            authorizations.push(new URL(url))
            return session.run(url)
          },
        })),
      },
      fetch: async (input, init) => {
        if (new URL(String(input)).pathname === "/register") {
          registrations.push(JSON.parse(String(init?.body)) as Record<string, unknown>)
        }
        return globalThis.fetch(input, init)
      },
    })
    cleanups.push(() => auth.dispose())

    const response = await call(auth.fetch, s.mcp)
    expect(response.status).toBe(200)
    expect(registrations).toEqual([expect.objectContaining({ dpop_bound_access_tokens: true })])
    const proofs = s.tokenRequests.map((r) => r.dpop)
    expect(proofs).toHaveLength(1)
    const jwk = JSON.parse(atob((proofs[0] as string).split(".")[0] as string)).jwk as JWK
    const jkt = await calculateJwkThumbprint(jwk)
    expect(authorizations.map((url) => url.searchParams.get("dpop_jkt"))).toEqual([jkt])
    const result = (await response.json()) as { result: { cnf: { jkt: string } } }
    expect(result.result.cnf).toEqual({ jkt })
    expect(s.mcpRequests.at(-1)?.authorization).toMatch(/^DPoP /)
  })
})

describe("the client ID metadata document of a DPoP client (RFC 9449 §5.2)", () => {
  it("carries dpop_bound_access_tokens from the extension, and the document's own fields win", () => {
    const document = Registration.buildClientMetadataDocument({
      url: "https://app.example.com/client.json",
      clientName: "DPoP app",
      redirectUris: [REDIRECT],
      extensions: [dpop(), { id: "example/other", clientMetadata: { client_name: "not this one" } }],
    })
    expect(document).toMatchObject({ dpop_bound_access_tokens: true, client_name: "DPoP app" })
  })
})

describe("the authorization server binds codes and refresh tokens to the DPoP key (RFC 9449 §5, §10)", () => {
  it("a code requested with dpop_jkt is redeemed with a proof by that key; the public client's refresh tokens stay bound", async () => {
    const s = await stack()
    const code = await codeFor(s, "app", { dpop_jkt: key.jkt })
    const redeemed = await redeem(s, code, { dpop: await proof(s, key) })
    expect(redeemed.status).toBe(200)
    const tokens = await body(redeemed)
    expect(tokens.token_type).toBe("DPoP")
    expect(decodeJwt(tokens.access_token as string).cnf).toEqual({ jkt: key.jkt })

    // The refresh token works with the same key only; a refused request changes nothing.
    const other = await refresh(s, tokens.refresh_token as string, { dpop: await proof(s, otherKey) })
    expect(other.status).toBe(400)
    expect(await body(other)).toEqual({
      error: "invalid_grant",
      error_description: "the refresh token is bound to another proof-of-possession key than this request proves",
    })
    const none = await refresh(s, tokens.refresh_token as string, {})
    expect(none.status).toBe(400)
    expect(await body(none)).toEqual({
      error: "invalid_grant",
      error_description: "the refresh token is bound to a proof-of-possession key and this request proves none",
    })
    const renewed = await refresh(s, tokens.refresh_token as string, { dpop: await proof(s, key) })
    expect(renewed.status).toBe(200)
    const next = await body(renewed)
    expect(decodeJwt(next.access_token as string).cnf).toEqual({ jkt: key.jkt })

    // The rotated successor is bound as its family is.
    const successor = await refresh(s, next.refresh_token as string, { dpop: await proof(s, otherKey) })
    expect(successor.status).toBe(400)
    expect((await body(successor)).error).toBe("invalid_grant")
    expect((await refresh(s, next.refresh_token as string, { dpop: await proof(s, key) })).status).toBe(200)
  })

  it("a code bound by dpop_jkt and redeemed with another key: 400 invalid_grant, and the code is spent", async () => {
    const s = await stack()
    const code = await codeFor(s, "app", { dpop_jkt: key.jkt })
    const refused = await redeem(s, code, { dpop: await proof(s, otherKey) })
    expect(refused.status).toBe(400)
    expect(await body(refused)).toEqual({
      error: "invalid_grant",
      error_description: "the authorization code is bound to another proof-of-possession key than this request proves",
    })
    const again = await redeem(s, code, { dpop: await proof(s, key) })
    expect(again.status).toBe(400)
    expect(await body(again)).toEqual({
      error: "invalid_grant",
      error_description: "the authorization code was already used; tokens issued from it are revoked",
    })
  })

  it("a code bound by dpop_jkt and redeemed without a proof: 400 invalid_grant", async () => {
    const s = await stack()
    const code = await codeFor(s, "app", { dpop_jkt: key.jkt })
    const refused = await redeem(s, code, {})
    expect(refused.status).toBe(400)
    expect(await body(refused)).toEqual({
      error: "invalid_grant",
      error_description: "the authorization code is bound to a proof-of-possession key and this request proves none",
    })
  })

  it("a malformed or repeated dpop_jkt: invalid_request at the redirect URI", async () => {
    const s = await stack()
    const malformed = await authorize(authorizationUrl(s, "app", { dpop_jkt: "not-a-thumbprint" }))
    expect(Object.fromEntries(malformed.searchParams)).toEqual({
      error: "invalid_request",
      error_description: "dpop_jkt must be the base64url SHA-256 JWK thumbprint of the DPoP key (RFC 9449 §10)",
      state: "s",
      iss: s.issuer,
    })
    const repeated = await authorize(authorizationUrl(s, "app", { dpop_jkt: [key.jkt, otherKey.jkt] }))
    expect(Object.fromEntries(repeated.searchParams)).toEqual({
      error: "invalid_request",
      error_description: "dpop_jkt is repeated",
      state: "s",
      iss: s.issuer,
    })
  })

  it("a code without dpop_jkt is bound at redemption only: any key may redeem it", async () => {
    const s = await stack()
    const code = await codeFor(s, "app")
    const redeemed = await redeem(s, code, { dpop: await proof(s, otherKey) })
    expect(redeemed.status).toBe(200)
    expect(decodeJwt((await body(redeemed)).access_token as string).cnf).toEqual({ jkt: otherKey.jkt })
  })

  it("a confidential client's refresh tokens are not bound to the key (they are bound to its credentials)", async () => {
    const s = await stack()
    const code = await codeFor(s, "web")
    const redeemed = await redeem(s, code, { dpop: await proof(s, key) }, "web")
    expect(redeemed.status).toBe(200)
    const tokens = await body(redeemed)
    const renewed = await refresh(s, tokens.refresh_token as string, { dpop: await proof(s, otherKey) }, "web")
    expect(renewed.status).toBe(200)
    expect(decodeJwt((await body(renewed)).access_token as string).cnf).toEqual({ jkt: otherKey.jkt })
  })

  it("a client registered with dpop_bound_access_tokens: a token request without a proof is refused", async () => {
    const s = await stack()
    const registered = await fetch(`${s.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "Always DPoP",
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: "none",
        dpop_bound_access_tokens: true,
      }),
    })
    expect(registered.status).toBe(201)
    const client = (await registered.json()) as { client_id: string; dpop_bound_access_tokens: boolean }
    expect(client.dpop_bound_access_tokens).toBe(true)
    const code = await codeFor(s, client.client_id)
    const refused = await redeem(s, code, {}, client.client_id)
    expect(refused.status).toBe(400)
    expect(await body(refused)).toEqual({
      error: "invalid_dpop_proof",
      error_description: "this client registered dpop_bound_access_tokens: every token request must carry a DPoP proof",
    })
    const code2 = await codeFor(s, client.client_id)
    expect((await redeem(s, code2, { dpop: await proof(s, key) }, client.client_id)).status).toBe(200)
  })
})

describe("the client's DPoP key (RFC 9449 §2, §5)", () => {
  /** A token-store backend whose entries the test can read and change. */
  const inspectable = () => {
    const entries = new Map<string, string>()
    return {
      entries,
      backend: {
        get: async (key: string) => {
          const value = entries.get(key)
          return value === undefined ? undefined : JSON.parse(value)
        },
        set: async (key: string, value: unknown) => void entries.set(key, JSON.stringify(value)),
        delete: async (key: string) => void entries.delete(key),
      },
    }
  }

  const appClient = (
    backend: ReturnType<typeof inspectable>["backend"],
    keys?: "token-store" | "memory",
    seen: Array<string> = [],
  ) => {
    const auth = createAuthClient({
      clientName: "DPoP app",
      extensions: [dpop(keys === undefined ? {} : { keys })],
      store: backend,
      userAgent: UserAgent.testUser({ username: USER.username, password: USER.password, redirectUri: REDIRECT }),
      fetch: async (input, init) => {
        const url = new URL(String(input))
        seen.push(
          url.pathname === "/token"
            ? `token ${new URLSearchParams(String(init?.body)).get("grant_type")}`
            : url.pathname,
        )
        return globalThis.fetch(input, init)
      },
    })
    cleanups.push(() => auth.dispose())
    return auth
  }

  /** Marks every held access token expired, as after a restart some time later. */
  const expire = (entries: Map<string, string>) => {
    for (const [name, value] of entries) {
      if (!name.startsWith("tokens:")) continue
      entries.set(name, JSON.stringify({ ...JSON.parse(value), expires_at: 1 }))
    }
  }

  it("is kept in the token store, so a bound refresh token works after a restart", async () => {
    const s = await stack()
    const { entries, backend } = inspectable()
    expect((await call(appClient(backend).fetch, s.mcp)).status).toBe(200)
    const stored = [...entries.keys()].filter((name) => name.startsWith("dpop-key:"))
    expect(stored).toEqual([`dpop-key:${s.issuer}`])
    expect(JSON.parse(entries.get(stored[0] as string) as string)).toMatchObject({
      alg: "ES256",
      publicJwk: { kty: "EC", crv: "P-256" },
      privateJwk: { kty: "EC", crv: "P-256", d: expect.any(String) },
    })

    // A new client on the same store: one refresh with the stored key, then the call.
    expire(entries)
    const seen: Array<string> = []
    expect((await call(appClient(backend, "token-store", seen).fetch, s.mcp)).status).toBe(200)
    expect(seen).toEqual(["token refresh_token", "/mcp"])
    expect(s.tokenRequests.at(-1)?.status).toBe(200)
  })

  it("is made once when several first requests need it at the same time", async () => {
    const { entries, backend } = inspectable()
    const extension = dpop()
    const server = {
      issuer: "https://as.example.com",
      metadata: { issuer: "https://as.example.com", dpop_signing_alg_values_supported: ["ES256"] },
    } as unknown as Discovery.DiscoveredAuthorizationServer
    const parameters = () =>
      Effect.runPromise(
        (extension.authorizationParameters?.(server, undefined) ?? Effect.die("no parameters")).pipe(
          Effect.provide(TokenStore.TokenStore.layerBackend(backend)),
        ),
      )
    const all = await Promise.all(Array.from({ length: 8 }, parameters))
    expect(new Set(all.map((p) => p.dpop_jkt)).size).toBe(1)
    const stored = JSON.parse(entries.get("dpop-key:https://as.example.com") as string)
    expect(await calculateJwkThumbprint(stored.publicJwk)).toBe(all[0]?.dpop_jkt)
  })

  it("kept in memory only, is lost with the process: the bound refresh token is refused and the user signs in again", async () => {
    const s = await stack()
    const { entries, backend } = inspectable()
    expect((await call(appClient(backend, "memory").fetch, s.mcp)).status).toBe(200)
    expect([...entries.keys()].some((name) => name.startsWith("dpop-key:"))).toBe(false)
    expire(entries)
    const seen: Array<string> = []
    expect((await call(appClient(backend, "memory", seen).fetch, s.mcp)).status).toBe(200)
    // The refresh is refused, the request goes without a token, and the 401 starts a new authorization.
    expect(seen).toEqual([
      "token refresh_token",
      "/mcp",
      "/.well-known/oauth-protected-resource/mcp",
      "/.well-known/oauth-authorization-server",
      "token authorization_code",
      "/mcp",
    ])
    expect(s.tokenRequests.map((r) => r.status)).toEqual([200, 400, 200])
  })
})

describe("the client's algorithm: the first of its own that both metadata documents list (RFC 9449 §5.1)", () => {
  const algStack = async (server: ReadonlyArray<string>, resource: ReadonlyArray<string>) => {
    const s = await startStack({
      server: { algorithms: server },
      schemes: [dpopScheme({ algorithms: resource })],
      authorizationServer: {
        users: [{ username: USER.username, passwordHash }],
        registration: true,
        introspectionClients: [],
        clients: [],
      },
    })
    cleanups.push(s.close)
    return s
  }
  const client = () => {
    const auth = createAuthClient({
      clientName: "DPoP app",
      extensions: [dpop()],
      userAgent: UserAgent.testUser({ username: USER.username, password: USER.password, redirectUri: REDIRECT }),
    })
    cleanups.push(() => auth.dispose())
    return auth
  }

  it("signs with EdDSA when the authorization server lists ES256 and EdDSA and the MCP server EdDSA only", async () => {
    const s = await algStack(["ES256", "EdDSA"], ["EdDSA"])
    expect((await call(client().fetch, s.mcp)).status).toBe(200)
    const algs = [...s.tokenRequests, ...s.mcpRequests]
      .filter((r) => r.dpop !== null)
      .map((r) => JSON.parse(atob((r.dpop as string).split(".")[0] as string)).alg)
    expect(new Set(algs)).toEqual(new Set(["EdDSA"]))
  })

  it("refuses to be made with a symmetric algorithm, or with none", () => {
    expect(thrownBy(() => dpop({ algorithms: ["ES256", "HS256", "none"] }))).toEqual(
      new Options.InvalidOptions({
        factory: "dpop",
        option: "algorithms",
        message: "dpop: algorithms: HS256, none: DPoP proofs need asymmetric JWS algorithms",
      }),
    )
    expect(thrownBy(() => dpop({ algorithms: [] }))).toEqual(
      new Options.InvalidOptions({
        factory: "dpop",
        option: "algorithms",
        message: "dpop: algorithms: none given: DPoP proofs need asymmetric JWS algorithms",
      }),
    )
  })

  it("fails with a typed error naming both lists when they have no algorithm in common with it", async () => {
    const s = await algStack(["ES256"], ["EdDSA"])
    const failure = await call(client().fetch, s.mcp).catch((e: unknown) => e)
    expect(failure).toMatchObject({
      _tag: "AuthError",
      reason: "invalid-input",
      message: `dpop: the authorization server ${s.issuer} and the MCP server accept DPoP proofs signed with no common algorithm, and this client signs with ES256, EdDSA, PS256`,
    })
  })
})
