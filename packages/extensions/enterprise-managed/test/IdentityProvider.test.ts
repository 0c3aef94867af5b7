import { createServer } from "node:http"
import {
  AuthorizationServer,
  createAuthorizationServer,
  NodeServer,
  Storage,
  UserAuthenticator,
} from "@keyway/authorization-server"
import { createAuthClient, isAuthError, UserAgent } from "@keyway/client"
import { Grant } from "@keyway/core"
// The protected notes stack the extensions' tests share.
import { closing, listening } from "@keyway/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import { decodeJwt, decodeProtectedHeader } from "jose"
import * as oauth from "oauth4webapi"
import { afterEach, beforeAll, describe, expect, it } from "vitest"
import { call, SECRET, startStack } from "../../client-credentials/test/support/stack.js"
import { identityAssertionGrant, identityAssertionIssuer } from "../src/authorization-server.js"
import { enterpriseManaged, signIn as signInWith } from "../src/client.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const PASSWORD = "correct horse battery staple"
const IDP_SECRET = "idp-secret-idp-secret-idp-secret-idp-secret"
let passwordHash: string
beforeAll(async () => {
  passwordHash = await UserAuthenticator.hashPassword(PASSWORD)
})

/** Signs `username` in at the identity provider with OpenID Connect, validated by oauth4webapi; the ID token. */
const signIn = async (issuer: string, username: string, clientId = "chat") => {
  const as = await oauth
    .discoveryRequest(new URL(issuer), { algorithm: "oidc", [oauth.allowInsecureRequests]: true })
    .then((response) => oauth.processDiscoveryResponse(new URL(issuer), response))
  const client: oauth.Client = { client_id: clientId }
  const auth = oauth.ClientSecretBasic(IDP_SECRET)
  const verifier = oauth.generateRandomCodeVerifier()
  const nonce = oauth.generateRandomNonce()
  const url = new URL(as.authorization_endpoint as string)
  url.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: "http://127.0.0.1/callback",
    response_type: "code",
    scope: "openid",
    nonce,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
  }).toString()
  const agent = UserAgent.testUser({ username, password: PASSWORD })
  const callback = await Effect.runPromise(
    Effect.scoped(Effect.flatMap(agent.open, (session) => Effect.ensuring(session.run(url.href), session.close))),
  )
  const params = oauth.validateAuthResponse(as, client, new URL(callback))
  const response = await oauth.authorizationCodeGrantRequest(
    as,
    client,
    auth,
    params,
    "http://127.0.0.1/callback",
    verifier,
    {
      [oauth.allowInsecureRequests]: true,
    },
  )
  const result = await oauth.processAuthorizationCodeResponse(as, client, response, {
    expectedNonce: nonce,
    requireIdToken: true,
  })
  const claims = oauth.getValidatedIdTokenClaims(result)
  if (claims === undefined) throw new Error("the token response has no ID token")
  return { idToken: result.id_token as string, claims, nonce }
}

/** A raw token exchange at the identity provider as `chat`. */
const exchange = async (idp: string, values: Record<string, string>) => {
  const response = await fetch(`${idp}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `Basic ${btoa(`chat:${IDP_SECRET}`)}`,
    },
    body: new URLSearchParams({
      grant_type: Grant.TOKEN_EXCHANGE,
      requested_token_type: Grant.ID_JAG_TOKEN_TYPE,
      subject_token_type: Grant.ID_TOKEN_TYPE,
      ...values,
    }),
  })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

describe("Keyway's authorization server as the enterprise identity provider", () => {
  const wire = async () => {
    // The MCP side first (its issuer and resources are the identity provider's configuration), trusting an issuer
    // that is known only once the identity provider listens: a placeholder server is started, then replaced.
    const idpServer = createServer()
    const idpIssuer = await listening(idpServer)
    await new Promise<void>((resolve) => idpServer.close(() => resolve()))
    const port = Number(new URL(idpIssuer).port)
    const s = await startStack(() => ({
      clients: [{ clientId: "chat-at-mcp", clientSecret: SECRET, redirectUris: [], grantTypes: [Grant.JWT_BEARER] }],
      extensions: [
        identityAssertionGrant({
          identityProviders: [{ issuer: idpIssuer, jwksUri: `${idpIssuer}/jwks` }],
          development: { allowHttpLoopbackJwks: true },
          warn: () => {},
        }),
      ],
    }))
    cleanups.push(s.close)
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
    const idp = createAuthorizationServer({
      issuer: idpIssuer,
      openid: true,
      resources: [{ uri: `${idpIssuer}/userinfo`, name: "Profile", scopes: { profile: "Your profile" } }],
      defaultResource: `${idpIssuer}/userinfo`,
      users: [
        { username: "alice", passwordHash, subject: "alice" },
        { username: "bob", passwordHash, subject: "bob" },
      ],
      clients: [
        {
          clientId: "chat",
          clientSecret: IDP_SECRET,
          redirectUris: ["http://127.0.0.1/callback"],
          grantTypes: ["authorization_code", Grant.TOKEN_EXCHANGE],
        },
        { clientId: "notes-app", clientSecret: IDP_SECRET, redirectUris: ["http://127.0.0.1/callback"] },
      ],
      development: { allowHttpLoopbackIssuer: true },
      warn: () => {},
      extensions: [
        identityAssertionIssuer({
          authorizationServers: [
            { issuer: s.issuer, resources: [s.mcp[0]], clients: { chat: "chat-at-mcp" } },
            {
              issuer: "https://auth.elsewhere.example",
              resources: ["https://mcp.elsewhere.example/mcp"],
              clients: { chat: "chat" },
            },
          ],
          rules: [
            { users: ["alice"], resource: s.mcp[0], scope: "notes:read notes:write" },
            { resource: "https://mcp.elsewhere.example/mcp", scope: "notes:read" },
          ],
        }),
      ],
    })
    server.on("request", NodeServer.toNodeListener(idp.handler, { publicUrl: idpIssuer }))
    cleanups.push(async () => {
      await closing(server)
      await idp.close()
    })
    return { idp: idpIssuer, s }
  }

  it("issues OpenID Connect ID tokens from the authorization code flow, validated by oauth4webapi", async () => {
    const { idp } = await wire()
    const { idToken, claims, nonce } = await signIn(idp, "alice")
    expect(claims).toMatchObject({ iss: idp, sub: "alice", aud: "chat", nonce })
    expect(typeof claims.auth_time).toBe("number")
    expect(claims.exp - claims.iat).toBeGreaterThan(0)
    expect(decodeProtectedHeader(idToken).typ).toBe("JWT")
    const metadata = (await (await fetch(`${idp}/.well-known/openid-configuration`)).json()) as Record<string, unknown>
    expect(metadata.scopes_supported).toContain("openid")
    expect(metadata.grant_types_supported).toContain(Grant.TOKEN_EXCHANGE)
  })

  it("end to end: sign in once at the identity provider, then the notes MCP server without a consent page", async () => {
    const { idp, s } = await wire()
    const { idToken } = await signIn(idp, "alice")
    const seen: Array<Record<string, unknown>> = []
    const auth = createAuthClient({
      extensions: [
        enterpriseManaged({
          identityProvider: { issuer: idp, clientId: "chat", clientSecret: IDP_SECRET },
          idToken: () => idToken,
          clients: { issuer: s.issuer, clientId: "chat-at-mcp", clientSecret: SECRET },
          onAssertion: (claims) => void seen.push(claims),
        }),
      ],
    })
    cleanups.push(() => auth.dispose())
    const response = await call(auth.fetch, s.mcp[0], "tools/list")
    expect(response.status).toBe(200)
    expect(((await response.json()) as { result: unknown }).result).toEqual({
      subject: "alice",
      clientId: "chat-at-mcp",
      scopes: ["notes:read"],
    })
    expect(seen).toHaveLength(1)
    expect(seen[0]).toMatchObject({
      iss: idp,
      sub: "alice",
      aud: s.issuer,
      resource: s.mcp[0],
      client_id: "chat-at-mcp",
      scope: "notes:read",
    })
  })

  it("the client's own sign-in (a user agent of @keyway/client) gives the ID token the strategy exchanges", async () => {
    const { idp, s } = await wire()
    const signedIn = await signInWith({
      issuer: idp,
      clientId: "chat",
      clientSecret: IDP_SECRET,
      userAgent: UserAgent.testUser({ username: "alice", password: PASSWORD }),
    })
    expect(signedIn.claims).toMatchObject({ iss: idp, sub: "alice", aud: "chat" })
    const auth = createAuthClient({
      extensions: [
        enterpriseManaged({
          identityProvider: { issuer: idp, clientId: "chat", clientSecret: IDP_SECRET },
          idToken: () => signedIn.idToken,
          clients: { issuer: s.issuer, clientId: "chat-at-mcp", clientSecret: SECRET },
        }),
      ],
    })
    cleanups.push(() => auth.dispose())
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    // A user the identity provider does not know gets no ID token.
    const failure = await signInWith({
      issuer: idp,
      clientId: "chat",
      clientSecret: IDP_SECRET,
      userAgent: UserAgent.testUser({ username: "mallory", password: PASSWORD }),
    }).catch((e: unknown) => e)
    expect(isAuthError(failure) && [failure.step, failure.reason]).toEqual(["authorization", "user-agent-failed"])
  })

  it("the client's own sign-in refuses a token response it cannot use, with the exact error", async () => {
    const { idp } = await wire()
    const user = () => UserAgent.testUser({ username: "alice", password: PASSWORD })
    // The identity provider refuses a wrong secret at its token endpoint.
    const refused = await signInWith({ issuer: idp, clientId: "chat", clientSecret: "wrong", userAgent: user() }).catch(
      (e: unknown) => e,
    )
    expect(
      isAuthError(refused) && [refused.step, refused.reason, refused.status, refused.error, refused.message],
    ).toEqual([
      "token",
      "oauth-error",
      401,
      "invalid_client",
      `the identity provider's sign-in: the token endpoint ${idp}/token answered HTTP 401 invalid_client: client authentication failed`,
    ])
    // Without openid, the identity provider answers tokens but no ID token.
    const withoutOpenid = await signInWith({
      issuer: idp,
      clientId: "chat",
      clientSecret: IDP_SECRET,
      userAgent: user(),
      scope: "profile",
    }).catch((e: unknown) => e)
    expect(isAuthError(withoutOpenid) && [withoutOpenid.step, withoutOpenid.reason, withoutOpenid.message]).toEqual([
      "token",
      "invalid-document",
      `the identity provider's token response from ${idp}/token has no id_token (OpenID Connect Core §3.1.3.3)`,
    ])
  })

  it("refuses every exchange it should, with the exact error", async () => {
    const { idp, s } = await wire()
    const alice = (await signIn(idp, "alice")).idToken
    const bob = (await signIn(idp, "bob")).idToken
    const other = (await signIn(idp, "alice", "notes-app")).idToken
    const ok = { subject_token: alice, audience: s.issuer, resource: s.mcp[0] }
    const cases: ReadonlyArray<[Record<string, string>, string, string]> = [
      [
        { ...ok, subject_token: "not-a-jwt" },
        "invalid_grant",
        "the subject_token is not a current ID token of this identity provider",
      ],
      [{ ...ok, subject_token: other }, "invalid_grant", "the subject_token was issued to another client"],
      [
        { ...ok, subject_token_type: "urn:ietf:params:oauth:token-type:access_token" },
        "invalid_request",
        `subject_token_type must be ${Grant.ID_TOKEN_TYPE}`,
      ],
      [
        { ...ok, audience: "https://auth.unknown.example" },
        "invalid_target",
        "audience https://auth.unknown.example is not an authorization server this identity provider issues assertions for",
      ],
      [{ ...ok, resource: s.mcp[1] }, "invalid_target", `${s.issuer} does not serve ${s.mcp[1]}`],
      [{ ...ok, subject_token: bob }, "invalid_grant", `the user bob may not reach ${s.mcp[0]}`],
      [
        { ...ok, scope: "notes:admin" },
        "invalid_scope",
        `the user alice may not obtain the scope notes:admin at ${s.mcp[0]}`,
      ],
      [{ audience: s.issuer, resource: s.mcp[0] }, "invalid_request", "subject_token is missing"],
    ]
    for (const [values, error, description] of cases) {
      expect(await exchange(idp, values)).toEqual({ status: 400, body: { error, error_description: description } })
    }
    const granted = await exchange(idp, { ...ok, scope: "notes:write" })
    expect(granted.status).toBe(200)
    expect(granted.body).toMatchObject({
      issued_token_type: Grant.ID_JAG_TOKEN_TYPE,
      token_type: "N_A",
      scope: "notes:write",
    })
    expect(decodeProtectedHeader(granted.body.access_token as string).typ).toBe(Grant.ID_JAG_TYP)
  })

  it("the MCP authorization server refuses the identity provider's assertions it should: replay, another audience", async () => {
    const { idp, s } = await wire()
    const { idToken } = await signIn(idp, "alice")
    const present = async (assertion: string) => {
      const response = await fetch(`${s.issuer}/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${btoa(`chat-at-mcp:${SECRET}`)}`,
        },
        body: new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion }),
      })
      return { status: response.status, body: (await response.json()) as Record<string, unknown> }
    }
    const mine = (await exchange(idp, { subject_token: idToken, audience: s.issuer, resource: s.mcp[0] })).body
      .access_token as string
    expect((await present(mine)).status).toBe(200)
    expect(await present(mine)).toEqual({
      status: 400,
      body: { error: "invalid_grant", error_description: "the assertion's jti was already used" },
    })
    const elsewhere = (
      await exchange(idp, {
        subject_token: idToken,
        audience: "https://auth.elsewhere.example",
        resource: "https://mcp.elsewhere.example/mcp",
      })
    ).body.access_token as string
    expect(decodeJwt(elsewhere).aud).toBe("https://auth.elsewhere.example")
    expect(await present(elsewhere)).toEqual({
      status: 400,
      body: {
        error: "invalid_grant",
        error_description: `the assertion's aud does not name this authorization server (accepted: ${s.issuer})`,
      },
    })
  })

  it("a client whose ID token the identity provider refuses gets a typed error", async () => {
    const { idp, s } = await wire()
    const auth = createAuthClient({
      extensions: [
        enterpriseManaged({
          identityProvider: { issuer: idp, clientId: "chat", clientSecret: IDP_SECRET },
          idToken: () => "expired-or-forged",
          clients: { issuer: s.issuer, clientId: "chat-at-mcp", clientSecret: SECRET },
        }),
      ],
    })
    cleanups.push(() => auth.dispose())
    const failure = await call(auth.fetch, s.mcp[0], "tools/list").catch((e: unknown) => e)
    expect(isAuthError(failure) && [failure.reason, failure.error]).toEqual(["invalid-grant", "invalid_grant"])
  })

  it("refuses an ID token that has expired, on the identity provider's own clock", async () => {
    // The identity provider on Effect's TestClock, set to the wall clock before it starts: the ID token is valid when
    // issued (oauth4webapi checks it against the wall clock), then only the identity provider's clock moves past it.
    const server = createServer()
    const idp = await listening(server)
    const runtime = ManagedRuntime.make(
      AuthorizationServer.AuthorizationServer.layer({
        issuer: idp,
        openid: true,
        resources: [{ uri: `${idp}/userinfo`, name: "Profile", scopes: { profile: "Your profile" } }],
        defaultResource: `${idp}/userinfo`,
        clients: [
          {
            clientId: "chat",
            clientSecret: IDP_SECRET,
            redirectUris: ["http://127.0.0.1/callback"],
            grantTypes: ["authorization_code", Grant.TOKEN_EXCHANGE],
          },
        ],
        development: { allowHttpLoopbackIssuer: true },
        warn: () => {},
        extensions: [
          identityAssertionIssuer({
            authorizationServers: [
              {
                issuer: "https://auth.example.com",
                resources: ["https://mcp.example.com/mcp"],
                clients: { chat: "chat" },
              },
            ],
            rules: [{ users: ["alice"], resource: "https://mcp.example.com/mcp", scope: "notes:read" }],
          }),
        ],
      }).pipe(
        Layer.provideMerge(
          Layer.merge(
            Storage.layerMemory,
            UserAuthenticator.UserAuthenticator.layerUsers([{ username: "alice", passwordHash, subject: "alice" }]),
          ),
        ),
        Layer.provideMerge(Layer.provideMerge(Layer.effectDiscard(TestClock.setTime(Date.now())), TestClock.layer())),
      ),
    )
    await runtime.runPromise(AuthorizationServer.AuthorizationServer.useSync(() => undefined))
    server.on(
      "request",
      NodeServer.toNodeListener(
        (request) => runtime.runPromise(AuthorizationServer.AuthorizationServer.use((s) => s.handle(request))),
        { publicUrl: idp },
      ),
    )
    cleanups.push(async () => {
      await closing(server)
      await runtime.dispose()
    })
    const { idToken, claims } = await signIn(idp, "alice")
    const values = {
      subject_token: idToken,
      audience: "https://auth.example.com",
      resource: "https://mcp.example.com/mcp",
    }
    // Accepted while current (an ID token may be exchanged again: the assertions are what is single use)...
    expect((await exchange(idp, values)).status).toBe(200)
    expect((await exchange(idp, values)).status).toBe(200)
    // ...and refused one second after its exp, by the identity provider's clock alone.
    await runtime.runPromise(TestClock.adjust(((claims.exp as number) - (claims.iat as number) + 1) * 1000))
    expect(await exchange(idp, values)).toEqual({
      status: 400,
      body: {
        error: "invalid_grant",
        error_description: "the subject_token is not a current ID token of this identity provider",
      },
    })
  })
})

describe("the client's own sign-in: the identity provider's metadata and answer", () => {
  /**
   * A stand-in identity provider: one metadata document at the RFC 8414 location, and an authorization endpoint that
   * answers at once with the query `answer` builds from the request's state (no person needed).
   */
  const standIn = async () => {
    const stand = {
      metadata: undefined as unknown,
      answer: (state: string) => new URLSearchParams({ code: "c1", state }),
      seen: [] as Array<string>,
      issuer: "",
    }
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", stand.issuer)
      stand.seen.push(url.pathname)
      if (url.pathname === "/.well-known/oauth-authorization-server" && stand.metadata !== undefined) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(stand.metadata))
        return
      }
      if (url.pathname === "/authorize") {
        const back = new URL(url.searchParams.get("redirect_uri") ?? "")
        back.search = stand.answer(url.searchParams.get("state") ?? "").toString()
        res.writeHead(302, { location: back.href }).end()
        return
      }
      res.writeHead(404, { "content-type": "text/plain" }).end("Not Found")
    })
    stand.issuer = await listening(server)
    cleanups.push(() => closing(server))
    return stand
  }

  const refusal = async (issuer: string) => {
    const failure = await signInWith({ issuer, clientId: "chat", userAgent: UserAgent.headless() }).catch(
      (e: unknown) => e,
    )
    return isAuthError(failure) ? [failure.step, failure.reason, failure.url, failure.message] : failure
  }

  const endpoints = (issuer: string) => ({
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    jwks_uri: `${issuer}/jwks`,
  })

  it("is checked by core before the user is sent anywhere: exact issuer, PKCE S256, endpoints", async () => {
    const stand = await standIn()
    const { issuer } = stand
    const at = `${issuer}/.well-known/oauth-authorization-server`
    stand.metadata = {
      issuer: "https://idp.elsewhere.example",
      ...endpoints(issuer),
      code_challenge_methods_supported: ["S256"],
    }
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "issuer-mismatch",
      at,
      `the identity provider ${issuer}: the authorization server metadata at ${at} has issuer "https://idp.elsewhere.example" but "${issuer}" was expected (compared exactly, without normalisation); refusing to use it`,
    ])
    stand.metadata = { issuer, ...endpoints(issuer), code_challenge_methods_supported: ["plain"] }
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "pkce-unsupported",
      at,
      `the identity provider ${issuer}: the authorization server metadata at ${at} lists code_challenge_methods_supported [plain] without S256; the authorization server must support PKCE S256`,
    ])
    stand.metadata = { issuer, ...endpoints(issuer) }
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "pkce-unsupported",
      at,
      `the identity provider ${issuer}: the authorization server metadata at ${at} has no code_challenge_methods_supported, so PKCE support cannot be verified; the authorization server must list S256`,
    ])
    stand.metadata = { ...endpoints(issuer), issuer, jwks_uri: undefined, code_challenge_methods_supported: ["S256"] }
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "missing-endpoint",
      at,
      `the identity provider ${issuer}: the authorization server metadata at ${at} has no jwks_uri; its signing keys cannot be found`,
    ])
    stand.metadata = undefined
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "not-found",
      issuer,
      `no metadata of the identity provider ${issuer} was found`,
    ])
    expect(stand.seen.filter((path) => path === "/authorize" || path === "/token")).toEqual([])
  })

  it("its answer is checked by core: iss per RFC 9207, state, errors, before the code is redeemed", async () => {
    const stand = await standIn()
    const { issuer } = stand
    const origin = "http://127.0.0.1"
    stand.metadata = {
      issuer,
      ...endpoints(issuer),
      code_challenge_methods_supported: ["S256"],
      authorization_response_iss_parameter_supported: true,
    }
    stand.answer = (state) => new URLSearchParams({ code: "c1", state, iss: "https://idp.elsewhere.example" })
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "iss-mismatch",
      origin,
      `the answer comes from https://idp.elsewhere.example, not ${issuer} (RFC 9207)`,
    ])
    stand.answer = (state) => new URLSearchParams({ code: "c1", state })
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "iss-missing",
      origin,
      `the authorization response at ${origin}/callback has no iss although ${issuer} advertises authorization_response_iss_parameter_supported; rejected as a possible mix-up attack (RFC 9207)`,
    ])
    stand.answer = () => new URLSearchParams({ code: "c1", state: "forged", iss: issuer })
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "state-mismatch",
      origin,
      "the identity provider's answer does not carry the request's state",
    ])
    stand.answer = (state) =>
      new URLSearchParams({ error: "access_denied", error_description: "not today", state, iss: issuer })
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "authorization-error",
      origin,
      "the identity provider refused the sign-in: access_denied not today",
    ])
    stand.answer = (state) => new URLSearchParams({ state, iss: issuer })
    expect(await refusal(issuer)).toEqual([
      "authorization",
      "authorization-error",
      origin,
      "the identity provider refused the sign-in: no code",
    ])
    expect(stand.seen.filter((path) => path === "/token")).toEqual([])
  })
})
