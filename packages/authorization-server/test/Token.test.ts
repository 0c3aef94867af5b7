import { expectOAuthError } from "@keyway/testing/oauth"
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { layerMemory } from "../src/storage/Storage.js"
import { startEffectServer } from "./support/effectServer.js"
import {
  authorizeUrl,
  basic,
  MCP,
  OTHER,
  obtainCode,
  SECRET,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

let server: TestServer
let jwtClientKey: CryptoKey
beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true })
  jwtClientKey = privateKey
  server = await startServer({
    clients: [
      {
        clientId: "public-app",
        clientName: "Public App",
        redirectUris: ["https://app.example.com/callback", "http://127.0.0.1/callback"],
      },
      {
        clientId: "web-app",
        clientName: "Web App",
        redirectUris: ["https://web.example.com/cb"],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_basic",
      },
      {
        clientId: "post-app",
        redirectUris: ["https://post.example.com/cb"],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_post",
      },
      {
        clientId: "jwt-app",
        redirectUris: ["https://jwt.example.com/cb"],
        tokenEndpointAuthMethod: "private_key_jwt",
        jwks: { keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" }] },
      },
      { clientId: "code-only", redirectUris: ["https://code-only.example.com/cb"], grantTypes: ["authorization_code"] },
    ],
  })
})
afterAll(async () => {
  await server.close()
})

interface TokenBody {
  readonly access_token: string
  readonly token_type: string
  readonly expires_in: number
  readonly scope: string
  readonly refresh_token?: string
}

const redeem = (code: string, verifier: string, extra: Record<string, string> = {}, on: TestServer = server) =>
  tokenRequest(on, {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: "https://app.example.com/callback",
    client_id: "public-app",
    resource: MCP,
    ...extra,
  })

const publicTokens = async (scope = "tools:read tools:call") => {
  const { code, verifier } = await obtainCode(server, { scope })
  const response = await redeem(code, verifier)
  expect(response.status).toBe(200)
  return (await response.json()) as TokenBody
}

const refresh = (token: string, extra: Record<string, string> = {}) =>
  tokenRequest(server, { grant_type: "refresh_token", refresh_token: token, client_id: "public-app", ...extra })

const assertion = async (claims: Record<string, unknown> = {}, audience = `${server.issuer}/token`) =>
  new SignJWT({ jti: crypto.randomUUID(), ...claims })
    .setProtectedHeader({ alg: "ES256", kid: "k1" })
    .setIssuer("jwt-app")
    .setSubject("jwt-app")
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime("2m")
    .sign(jwtClientKey)

describe("authorization_code grant", () => {
  it("issues an RFC 9068 JWT access token bound to the one resource, and a refresh token", async () => {
    const { code, verifier } = await obtainCode(server)
    const response = await redeem(code, verifier)
    expect(response.status).toBe(200)
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(response.headers.get("pragma")).toBe("no-cache")
    expect(response.headers.get("access-control-allow-origin")).toBe("*")
    const body = (await response.json()) as TokenBody
    expect(body.token_type).toBe("Bearer")
    expect(body.expires_in).toBe(300)
    expect(body.scope).toBe("tools:read tools:call")
    expect(body.refresh_token).toMatch(/^[A-Za-z0-9_-]{43}$/)

    const jwks = await (await fetch(`${server.issuer}/jwks`)).json()
    const { payload, protectedHeader } = await jwtVerify(body.access_token, createLocalJWKSet(jwks), {
      issuer: server.issuer,
      audience: MCP,
      typ: "at+jwt",
      algorithms: ["ES256"],
    })
    expect(protectedHeader.typ).toBe("at+jwt")
    expect(payload.aud).toBe(MCP)
    expect(payload.sub).toBe("alice")
    expect(payload.client_id).toBe("public-app")
    expect(payload.scope).toBe("tools:read tools:call")
    expect(typeof payload.jti).toBe("string")
    expect(payload.exp! - payload.iat!).toBe(300)
  })

  it("accepts the token request without resource (the authorized one is used)", async () => {
    const { code, verifier } = await obtainCode(server)
    const response = await tokenRequest(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: "https://app.example.com/callback",
      client_id: "public-app",
    })
    expect(response.status).toBe(200)
  })

  it("does not issue a refresh token to a client without the refresh_token grant", async () => {
    const { code, verifier } = await obtainCode(server, {
      client_id: "code-only",
      redirect_uri: "https://code-only.example.com/cb",
    })
    const response = await redeem(code, verifier, {
      client_id: "code-only",
      redirect_uri: "https://code-only.example.com/cb",
    })
    expect(response.status).toBe(200)
    expect(await response.json()).not.toHaveProperty("refresh_token")
  })

  it("missing code_verifier: invalid_request", async () => {
    const { code } = await obtainCode(server)
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "authorization_code",
        code,
        redirect_uri: "https://app.example.com/callback",
        client_id: "public-app",
      }),
      400,
      "invalid_request",
      /code_verifier is missing/,
    )
  })

  it("short code_verifier: invalid_request", async () => {
    const { code } = await obtainCode(server)
    await expectOAuthError(await redeem(code, "a".repeat(42)), 400, "invalid_request", /43 to 128/)
  })

  it("wrong code_verifier: invalid_grant, and the code is spent", async () => {
    const { code, verifier } = await obtainCode(server)
    await expectOAuthError(await redeem(code, "b".repeat(64)), 400, "invalid_grant", /code_verifier does not match/)
    await expectOAuthError(await redeem(code, verifier), 400, "invalid_grant", /already used/)
  })

  it("code reuse: invalid_grant, and the refresh token issued from the code is revoked", async () => {
    const { code, verifier } = await obtainCode(server)
    const first = await redeem(code, verifier)
    expect(first.status).toBe(200)
    const { refresh_token } = (await first.json()) as TokenBody
    await expectOAuthError(
      await redeem(code, verifier),
      400,
      "invalid_grant",
      /already used; tokens issued from it are revoked/,
    )
    await expectOAuthError(await refresh(refresh_token!), 400, "invalid_grant", /revoked/)
  })

  it("code from another client: invalid_grant", async () => {
    const { code, verifier } = await obtainCode(server)
    await expectOAuthError(
      await redeem(code, verifier, {
        client_id: "post-app",
        client_secret: SECRET,
        redirect_uri: "https://post.example.com/cb",
      }),
      400,
      "invalid_grant",
      /issued to another client/,
    )
  })

  it("expired code: invalid_grant", async () => {
    // The Effect face on TestClock, so the code's 60 s pass without waiting.
    const clocked = await startEffectServer(layerMemory)
    try {
      const { code, verifier } = await obtainCode(clocked)
      await clocked.adjust(61)
      await expectOAuthError(await redeem(code, verifier, {}, clocked), 400, "invalid_grant", /expired/)
    } finally {
      await clocked.close()
    }
  })

  it("unknown code: invalid_grant", async () => {
    await expectOAuthError(await redeem("not-a-code", "c".repeat(43)), 400, "invalid_grant", /code is invalid/)
  })

  it("redirect_uri differing from the authorization request: invalid_grant", async () => {
    const { code, verifier } = await obtainCode(server)
    await expectOAuthError(
      await redeem(code, verifier, { redirect_uri: "http://127.0.0.1/callback" }),
      400,
      "invalid_grant",
      /redirect_uri does not match/,
    )
  })

  it("resource differing from the authorized one: invalid_target", async () => {
    const { code, verifier } = await obtainCode(server)
    await expectOAuthError(await redeem(code, verifier, { resource: OTHER }), 400, "invalid_target", /differs/)
  })

  it("missing code: invalid_request", async () => {
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "authorization_code",
        client_id: "public-app",
        code_verifier: "d".repeat(43),
      }),
      400,
      "invalid_request",
      /code is missing/,
    )
  })
})

describe("OpenID Connect ID tokens (the openid option)", () => {
  it("without the option, openid is a scope like any other: not defined for the resource", async () => {
    const request = await authorizeUrl(server, { scope: "openid tools:read" })
    const answer = await fetch(request.url, { redirect: "manual" })
    const location = new URL(answer.headers.get("location") ?? "")
    expect(location.searchParams.get("error")).toBe("invalid_scope")
    expect(location.searchParams.get("error_description")).toBe("scope openid is not defined for this resource")
  })

  it("with it, openid may be asked and the code's token response carries an ID token with the request's nonce", async () => {
    const oidc = await startServer({ openid: true })
    try {
      const { code, verifier } = await obtainCode(oidc, { scope: "openid tools:read", nonce: "n-0S6_WzA2Mj" })
      const response = await redeem(code, verifier, {}, oidc)
      expect(response.status).toBe(200)
      const body = (await response.json()) as TokenBody & { id_token: string }
      expect(body.scope).toBe("openid tools:read")
      const jwks = await (await fetch(`${oidc.issuer}/jwks`)).json()
      const { payload, protectedHeader } = await jwtVerify(body.id_token, createLocalJWKSet(jwks), {
        issuer: oidc.issuer,
        audience: "public-app",
        algorithms: ["ES256"],
      })
      expect(protectedHeader.typ).toBe("JWT")
      expect(payload).toMatchObject({ sub: "alice", nonce: "n-0S6_WzA2Mj" })
      expect(typeof payload.auth_time).toBe("number")
      // Without openid, no ID token.
      const plain = await obtainCode(oidc, { scope: "tools:read" })
      const withoutOpenid = (await (await redeem(plain.code, plain.verifier, {}, oidc)).json()) as Record<
        string,
        unknown
      >
      expect(withoutOpenid.id_token).toBeUndefined()
      const metadata = (await (await fetch(`${oidc.issuer}/.well-known/openid-configuration`)).json()) as {
        scopes_supported: ReadonlyArray<string>
      }
      expect(metadata.scopes_supported).toContain("openid")
    } finally {
      await oidc.close()
    }
  })
})

describe("client authentication", () => {
  const webCode = () => obtainCode(server, { client_id: "web-app", redirect_uri: "https://web.example.com/cb" })

  it("client_secret_basic works", async () => {
    const { code, verifier } = await webCode()
    const response = await tokenRequest(
      server,
      { grant_type: "authorization_code", code, code_verifier: verifier, redirect_uri: "https://web.example.com/cb" },
      { authorization: basic("web-app", SECRET) },
    )
    expect(response.status).toBe(200)
  })

  it("wrong client secret with Basic: 401 invalid_client with a Basic challenge", async () => {
    const response = await tokenRequest(
      server,
      { grant_type: "authorization_code", code: "x", code_verifier: "e".repeat(43) },
      { authorization: basic("web-app", "wrong") },
    )
    expect(response.headers.get("www-authenticate")).toBe('Basic realm="token"')
    await expectOAuthError(response, 401, "invalid_client", /client authentication failed/)
  })

  it("unknown client with Basic: 401 invalid_client with a Basic challenge", async () => {
    const response = await tokenRequest(
      server,
      { grant_type: "authorization_code", code: "x", code_verifier: "e".repeat(43) },
      { authorization: basic("nobody", SECRET) },
    )
    expect(response.headers.get("www-authenticate")).toBe('Basic realm="token"')
    await expectOAuthError(response, 401, "invalid_client")
  })

  it("wrong client secret in the body: 401 invalid_client, still with the Basic challenge every 401 carries", async () => {
    const response = await tokenRequest(server, {
      grant_type: "authorization_code",
      code: "x",
      code_verifier: "e".repeat(43),
      client_id: "post-app",
      client_secret: "wrong",
    })
    expect(response.headers.get("www-authenticate")).toBe('Basic realm="token"')
    await expectOAuthError(response, 401, "invalid_client", /client authentication failed/)
  })

  it("a confidential client that does not authenticate: 401 invalid_client", async () => {
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "authorization_code",
        code: "x",
        code_verifier: "e".repeat(43),
        client_id: "web-app",
      }),
      401,
      "invalid_client",
      /must authenticate with client_secret_basic/,
    )
  })

  it("the wrong method for the client (post for a basic client): 401 invalid_client", async () => {
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "refresh_token",
        refresh_token: "x",
        client_id: "web-app",
        client_secret: SECRET,
      }),
      401,
      "invalid_client",
      /must authenticate with client_secret_basic/,
    )
  })

  it("two authentication methods at once: invalid_request", async () => {
    await expectOAuthError(
      await tokenRequest(
        server,
        { grant_type: "refresh_token", refresh_token: "x", client_id: "post-app", client_secret: SECRET },
        { authorization: basic("post-app", SECRET) },
      ),
      400,
      "invalid_request",
      /more than one client authentication method/,
    )
  })

  it("unknown public client: 401 invalid_client", async () => {
    await expectOAuthError(
      await tokenRequest(server, { grant_type: "refresh_token", refresh_token: "x", client_id: "nobody" }),
      401,
      "invalid_client",
    )
  })

  it("private_key_jwt works once per jti; a replayed assertion is refused", async () => {
    const { code, verifier } = await obtainCode(server, {
      client_id: "jwt-app",
      redirect_uri: "https://jwt.example.com/cb",
    })
    const signed = await assertion()
    const body = {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: "https://jwt.example.com/cb",
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: signed,
    }
    expect((await tokenRequest(server, body)).status).toBe(200)
    await expectOAuthError(await tokenRequest(server, body), 401, "invalid_client", /jti was already used/)
  })

  it("private_key_jwt with the wrong audience: 401 invalid_client", async () => {
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "refresh_token",
        refresh_token: "x",
        client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        client_assertion: await assertion({}, "https://elsewhere.example.com/token"),
      }),
      401,
      "invalid_client",
      /client_assertion rejected/,
    )
  })

  it("private_key_jwt: each claim RFC 7523 §3 asks for is checked, with the failure named", async () => {
    const now = Math.floor(Date.now() / 1000)
    const sign = (claims: Record<string, unknown>) =>
      new SignJWT({
        iss: "jwt-app",
        sub: "jwt-app",
        aud: `${server.issuer}/token`,
        iat: now,
        exp: now + 120,
        jti: crypto.randomUUID(),
        ...claims,
      })
        .setProtectedHeader({ alg: "ES256", kid: "k1" })
        .sign(jwtClientKey)
    const refused = async (claims: Record<string, unknown>, description: string) =>
      expectOAuthError(
        await tokenRequest(server, {
          grant_type: "refresh_token",
          refresh_token: "x",
          client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
          client_assertion: await sign(claims),
        }),
        401,
        "invalid_client",
        `client_assertion rejected: ${description}`,
      )
    await refused({ iss: "another-app" }, "the assertion's iss another-app is not jwt-app")
    await refused(
      { aud: "https://elsewhere.example.com/token" },
      `the assertion's aud does not name this authorization server (accepted: ${server.issuer}, ${server.issuer}/token)`,
    )
    await refused({ exp: undefined }, "the assertion has no exp claim (RFC 7523 section 3 item 4)")
    await refused({ iat: now - 600, exp: now - 300 }, `the assertion expired at ${now - 300} (clock skew 5 s)`)
    await refused({ nbf: now + 600 }, `the assertion is not valid before ${now + 600} (clock skew 5 s)`)
    await refused(
      { iat: now + 600, exp: now + 700 },
      `the assertion's iat ${now + 600} is in the future (clock skew 5 s)`,
    )
    await refused({ exp: now + 3700 }, "the assertion lives 3700 s (exp - iat), longer than the 3600 s accepted")
    await refused({ jti: undefined }, "the assertion has no jti claim (RFC 7523 section 3 item 7)")
  })

  it("private_key_jwt with a wrong assertion type: invalid_request", async () => {
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "refresh_token",
        refresh_token: "x",
        client_assertion_type: "urn:example:other",
        client_assertion: await assertion(),
      }),
      400,
      "invalid_request",
      /client_assertion_type must be/,
    )
  })
})

describe("malformed token requests", () => {
  it("malformed form body (JSON instead of a form): invalid_request", async () => {
    const response = await fetch(`${server.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ grant_type: "authorization_code" }),
    })
    await expectOAuthError(response, 400, "invalid_request", /application\/x-www-form-urlencoded/)
  })

  it("repeated parameter: invalid_request", async () => {
    const response = await fetch(`${server.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=refresh_token&client_id=public-app&refresh_token=a&refresh_token=b",
    })
    await expectOAuthError(response, 400, "invalid_request", /refresh_token is repeated/)
  })

  it("body that is not UTF-8: invalid_request", async () => {
    const response = await fetch(`${server.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new Uint8Array([0x67, 0x3d, 0xff, 0xfe]),
    })
    await expectOAuthError(response, 400, "invalid_request", /not valid UTF-8/)
  })

  it("oversized body (over 64 KiB): 413 invalid_request", async () => {
    const response = await tokenRequest(server, {
      grant_type: "refresh_token",
      client_id: "public-app",
      refresh_token: "x".repeat(70 * 1024),
    })
    await expectOAuthError(response, 413, "invalid_request", /exceeds 65536 bytes/)
  })

  it("unsupported grant type: unsupported_grant_type", async () => {
    await expectOAuthError(
      await tokenRequest(server, { grant_type: "password", client_id: "public-app", username: "a", password: "b" }),
      400,
      "unsupported_grant_type",
      /password is not supported/,
    )
  })

  it("missing grant type: invalid_request", async () => {
    await expectOAuthError(
      await tokenRequest(server, { client_id: "public-app" }),
      400,
      "invalid_request",
      /grant_type is missing/,
    )
  })

  it("a grant the client may not use: unauthorized_client", async () => {
    await expectOAuthError(
      await tokenRequest(server, { grant_type: "refresh_token", refresh_token: "x", client_id: "code-only" }),
      400,
      "unauthorized_client",
    )
  })

  it("GET on the token endpoint: 405", async () => {
    const response = await fetch(`${server.issuer}/token`)
    expect(response.status).toBe(405)
    expect(response.headers.get("allow")).toBe("POST, OPTIONS")
  })
})

describe("refresh_token grant", () => {
  it("rotates for public clients; an older token than the last one rotated out revokes the family", async () => {
    const first = await publicTokens()
    const rotated = await refresh(first.refresh_token!)
    expect(rotated.status).toBe(200)
    expect(rotated.headers.get("cache-control")).toBe("no-store")
    const second = (await rotated.json()) as TokenBody
    expect(second.refresh_token).toBeDefined()
    expect(second.refresh_token).not.toBe(first.refresh_token)
    expect(second.scope).toBe("tools:read tools:call")
    const third = (await (await refresh(second.refresh_token!)).json()) as TokenBody
    expect(third.refresh_token).not.toBe(second.refresh_token)

    // `first` was rotated out two rotations ago: no retry of a lost answer, but a stolen or leaked token.
    await expectOAuthError(
      await refresh(first.refresh_token!),
      400,
      "invalid_grant",
      /already used; its whole family is now revoked/,
    )
    await expectOAuthError(await refresh(third.refresh_token!), 400, "invalid_grant", /revoked/)
  })

  it("a rotated-out token presented again within the reuse interval gets the same successor and a new access token", async () => {
    const first = await publicTokens()
    const second = (await (await refresh(first.refresh_token!)).json()) as TokenBody
    const retried = await refresh(first.refresh_token!)
    expect(retried.status).toBe(200)
    const again = (await retried.json()) as TokenBody
    expect(again.refresh_token).toBe(second.refresh_token)
    expect(again.access_token).not.toBe(second.access_token)
    expect(again.scope).toBe("tools:read tools:call")
    // The successor is the family's one live token and keeps working.
    const next = await refresh(second.refresh_token!)
    expect(next.status).toBe(200)
  })

  it("the same token from another client within the reuse interval is reuse: the family is revoked", async () => {
    const first = await publicTokens()
    const second = (await (await refresh(first.refresh_token!)).json()) as TokenBody
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "refresh_token",
        refresh_token: first.refresh_token!,
        client_id: "code-only",
      }),
      400,
      "unauthorized_client",
    )
    const other = await tokenRequest(
      server,
      { grant_type: "refresh_token", refresh_token: first.refresh_token! },
      { authorization: basic("web-app", SECRET) },
    )
    await expectOAuthError(other, 400, "invalid_grant", /already used; its whole family is now revoked/)
    await expectOAuthError(await refresh(second.refresh_token!), 400, "invalid_grant", /revoked/)
  })

  it("after the reuse interval, the rotated-out token revokes the family (TestClock)", async () => {
    const clocked = await startEffectServer(layerMemory, { lifetimes: { refreshTokenReuseInterval: 30 } })
    try {
      const { code, verifier } = await obtainCode(clocked)
      const first = (await (await redeem(code, verifier, {}, clocked)).json()) as TokenBody
      const rotate = (token: string) =>
        tokenRequest(clocked, { grant_type: "refresh_token", refresh_token: token, client_id: "public-app" })
      const second = (await (await rotate(first.refresh_token!)).json()) as TokenBody
      await clocked.adjust(30)
      expect(((await (await rotate(first.refresh_token!)).json()) as TokenBody).refresh_token).toBe(
        second.refresh_token,
      )
      await clocked.adjust(1)
      await expectOAuthError(
        await rotate(first.refresh_token!),
        400,
        "invalid_grant",
        /already used; its whole family is now revoked/,
      )
      await expectOAuthError(await rotate(second.refresh_token!), 400, "invalid_grant", /revoked/)
    } finally {
      await clocked.close()
    }
  })

  it("with refreshTokenReuseInterval 0, presenting a rotated-out token again revokes the family at once", async () => {
    const strict = await startServer({ lifetimes: { refreshTokenReuseInterval: 0 } })
    try {
      const { code, verifier } = await obtainCode(strict)
      const first = (await (await redeem(code, verifier, {}, strict)).json()) as TokenBody
      const rotate = (token: string) =>
        tokenRequest(strict, { grant_type: "refresh_token", refresh_token: token, client_id: "public-app" })
      const second = (await (await rotate(first.refresh_token!)).json()) as TokenBody
      await expectOAuthError(await rotate(first.refresh_token!), 400, "invalid_grant", /already used/)
      await expectOAuthError(await rotate(second.refresh_token!), 400, "invalid_grant", /revoked/)
    } finally {
      await strict.close()
    }
  })

  it("scope may narrow (the access token narrows, the refresh token keeps the grant's scope)", async () => {
    const first = await publicTokens()
    const narrowed = await refresh(first.refresh_token!, { scope: "tools:read" })
    expect(narrowed.status).toBe(200)
    const body = (await narrowed.json()) as TokenBody
    expect(body.scope).toBe("tools:read")
    const next = await refresh(body.refresh_token!)
    expect(((await next.json()) as TokenBody).scope).toBe("tools:read tools:call")
  })

  it("scope may never widen: invalid_scope", async () => {
    const first = await publicTokens("tools:read")
    await expectOAuthError(
      await refresh(first.refresh_token!, { scope: "tools:read tools:call" }),
      400,
      "invalid_scope",
      /never widen/,
    )
  })

  it("another resource: invalid_target", async () => {
    const first = await publicTokens()
    await expectOAuthError(await refresh(first.refresh_token!, { resource: OTHER }), 400, "invalid_target")
  })

  it("the same resource is accepted", async () => {
    const first = await publicTokens()
    expect((await refresh(first.refresh_token!, { resource: MCP })).status).toBe(200)
  })

  it("a refresh token of another client: invalid_grant", async () => {
    const first = await publicTokens()
    await expectOAuthError(
      await tokenRequest(server, {
        grant_type: "refresh_token",
        refresh_token: first.refresh_token!,
        client_id: "post-app",
        client_secret: SECRET,
      }),
      400,
      "invalid_grant",
      /another client/,
    )
  })

  it("unknown refresh token: invalid_grant", async () => {
    await expectOAuthError(await refresh("nope"), 400, "invalid_grant", /refresh token is invalid/)
  })

  it("missing refresh token: invalid_request", async () => {
    await expectOAuthError(
      await tokenRequest(server, { grant_type: "refresh_token", client_id: "public-app" }),
      400,
      "invalid_request",
      /refresh_token is missing/,
    )
  })
})

describe("refresh rotation for confidential clients is configurable", () => {
  it("without rotation, the same refresh token keeps working and no new one is issued", async () => {
    const other = await startServer({ rotateConfidentialRefreshTokens: false })
    try {
      const { code, verifier } = await obtainCode(other, {
        client_id: "post-app",
        redirect_uri: "https://post.example.com/cb",
      })
      const first = await tokenRequest(other, {
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: "https://post.example.com/cb",
        client_id: "post-app",
        client_secret: SECRET,
      })
      const { refresh_token } = (await first.json()) as TokenBody
      for (let i = 0; i < 2; i++) {
        const response = await tokenRequest(other, {
          grant_type: "refresh_token",
          refresh_token: refresh_token!,
          client_id: "post-app",
          client_secret: SECRET,
        })
        expect(response.status).toBe(200)
        expect(await response.json()).not.toHaveProperty("refresh_token")
      }
    } finally {
      await other.close()
    }
  })
})
