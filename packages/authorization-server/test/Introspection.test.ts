import { expectOAuthError } from "@keyway/testing/oauth"
import { decodeJwt, SignJWT } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { layerMemory } from "../src/storage/Storage.js"
import { startEffectServer } from "./support/effectServer.js"
import { exampleExtension } from "./support/exampleExtension.js"
import { basic, MCP, obtainCode, SECRET, startServer, type TestServer, tokenRequest } from "./support/server.js"
import { introspect, issueTokens, post, RS_SECRET, startTokenServer } from "./support/tokens.js"

let server: TestServer
beforeAll(async () => {
  server = await startTokenServer()
})
afterAll(async () => {
  await server.close()
})

describe("introspection endpoint (RFC 7662)", () => {
  it("describes a live access token", async () => {
    const tokens = await issueTokens(server)
    const claims = decodeJwt(tokens.access_token)
    expect(await introspect(server, tokens.access_token)).toEqual({
      active: true,
      scope: "tools:read tools:call",
      client_id: "public-app",
      sub: "alice",
      aud: MCP,
      iss: server.issuer,
      exp: claims.exp,
      iat: claims.iat,
      token_type: "Bearer",
      jti: claims.jti,
    })
  })

  it("describes a live refresh token, and reports it inactive once rotated out", async () => {
    const tokens = await issueTokens(server)
    const body = await introspect(server, tokens.refresh_token, "refresh_token")
    expect(body).toMatchObject({
      active: true,
      scope: "tools:read tools:call",
      client_id: "public-app",
      sub: "alice",
      aud: MCP,
      iss: server.issuer,
      token_type: "refresh_token",
    })
    expect(body.exp).toBe((body.iat as number) + 30 * 24 * 3600)
    const rotated = await tokenRequest(server, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: "public-app",
    })
    expect(rotated.status).toBe(200)
    const { refresh_token: next } = (await rotated.json()) as { refresh_token: string }
    expect(await introspect(server, tokens.refresh_token)).toEqual({ active: false })
    // Introspecting the rotated-out token is not reuse: the family stays live.
    expect((await introspect(server, next)).active).toBe(true)
  })

  it("code replay: the access token issued from the code now introspects as inactive", async () => {
    const tokens = await issueTokens(server)
    expect((await introspect(server, tokens.access_token)).active).toBe(true)
    const replay = await tokenRequest(server, {
      grant_type: "authorization_code",
      code: tokens.code,
      code_verifier: tokens.verifier,
      redirect_uri: "https://app.example.com/callback",
      client_id: "public-app",
    })
    expect(replay.status).toBe(400)
    expect(await introspect(server, tokens.access_token)).toEqual({ active: false })
    expect(await introspect(server, tokens.refresh_token)).toEqual({ active: false })
  })

  it("an expired access token is inactive", async () => {
    // The Effect face on TestClock, so the token's 300 s pass without waiting.
    const clocked = await startEffectServer(layerMemory)
    try {
      const tokens = await issueTokens(clocked)
      await clocked.adjust(299)
      expect((await introspect(clocked, tokens.access_token)).active).toBe(true)
      await clocked.adjust(2)
      expect(await introspect(clocked, tokens.access_token)).toEqual({ active: false })
    } finally {
      await clocked.close()
    }
  })

  it("malformed, unknown and foreign tokens are inactive", async () => {
    const tokens = await issueTokens(server)
    const [header, payload] = tokens.access_token.split(".")
    const foreignKey = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign"])
    const foreign = await new SignJWT(decodeJwt(tokens.access_token))
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt" })
      .sign(foreignKey.privateKey)
    for (const token of ["garbage", "a.b.c", `${header}.${payload}.`, foreign, `${tokens.access_token}x`]) {
      expect(await introspect(server, token)).toEqual({ active: false })
    }
  })

  it("a confidential client sees its own tokens, and other clients' tokens as inactive", async () => {
    const own = await issueTokens(server, "web-app")
    const foreign = await issueTokens(server)
    const asWebApp = async (token: string) =>
      (await post(server, "introspect", { token }, { authorization: basic("web-app", SECRET) })).json()
    expect(await asWebApp(own.access_token)).toMatchObject({ active: true, client_id: "web-app" })
    expect(await asWebApp(foreign.access_token)).toEqual({ active: false })
    expect(await asWebApp(foreign.refresh_token)).toEqual({ active: false })
  })

  it("an unauthenticated caller: 401 invalid_client with a Basic challenge", async () => {
    const tokens = await issueTokens(server)
    const anonymous = await post(server, "introspect", { token: tokens.access_token })
    expect(anonymous.headers.get("www-authenticate")).toBe('Basic realm="introspection"')
    await expectOAuthError(anonymous, 401, "invalid_client", "client authentication failed")
    const wrong = await post(server, "introspect", { token: tokens.access_token }, { authorization: basic("rs", "no") })
    expect(wrong.headers.get("www-authenticate")).toBe('Basic realm="introspection"')
    await expectOAuthError(wrong, 401, "invalid_client", "client authentication failed")
  })

  it("a public client (no credentials): 401 invalid_client", async () => {
    const tokens = await issueTokens(server)
    const response = await post(server, "introspect", { token: tokens.access_token, client_id: "public-app" })
    expect(response.headers.get("www-authenticate")).toBe('Basic realm="introspection"')
    await expectOAuthError(response, 401, "invalid_client", "introspection needs client credentials")
  })

  it("missing token: 400 invalid_request", async () => {
    const response = await post(server, "introspect", {}, { authorization: basic("rs", RS_SECRET) })
    await expectOAuthError(response, 400, "invalid_request", "token is missing")
  })

  it("GET: 405", async () => {
    const response = await fetch(`${server.issuer}/introspect`)
    expect(response.status).toBe(405)
    expect(response.headers.get("allow")).toBe("POST, OPTIONS")
  })

  it("the resource-server client cannot use the authorization endpoint or any grant", async () => {
    const response = await tokenRequest(
      server,
      { grant_type: "refresh_token", refresh_token: "x" },
      { authorization: basic("rs", RS_SECRET) },
    )
    await expectOAuthError(response, 400, "unauthorized_client", "this client may not use the refresh_token grant")
  })
})

describe("introspection of tokens an extension binds", () => {
  let bound: TestServer
  beforeAll(async () => {
    bound = await startServer({
      clients: [
        { clientId: "public-app", clientName: "Public App", redirectUris: ["https://app.example.com/callback"] },
        { clientId: "rs", clientSecret: RS_SECRET, redirectUris: [], grantTypes: [] },
      ],
      introspectionClients: ["rs"],
      extensions: [exampleExtension],
    })
  })
  afterAll(async () => {
    await bound.close()
  })

  const issue = async (headers: Record<string, string>) => {
    const { code, verifier } = await obtainCode(bound, {
      client_id: "public-app",
      redirect_uri: "https://app.example.com/callback",
    })
    const response = await tokenRequest(
      bound,
      {
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: "https://app.example.com/callback",
        resource: MCP,
        client_id: "public-app",
      },
      headers,
    )
    expect(response.status).toBe(200)
    return ((await response.json()) as { access_token: string }).access_token
  }

  it("answers the token type of the confirmation member the extension declares, with the confirmation", async () => {
    const token = await issue({ "example-key": "key-1" })
    const claims = decodeJwt(token)
    expect(await introspect(bound, token)).toEqual({
      active: true,
      scope: "tools:read tools:call",
      client_id: "public-app",
      sub: "alice",
      aud: MCP,
      iss: bound.issuer,
      exp: claims.exp,
      iat: claims.iat,
      token_type: "Example",
      jti: claims.jti,
      cnf: { example_key: "key-1" },
    })
  })

  it("answers Bearer for a token no declared member confirms", async () => {
    const token = await issue({})
    expect(await introspect(bound, token)).toMatchObject({ active: true, token_type: "Bearer" })
    expect("cnf" in (await introspect(bound, token))).toBe(false)
  })
})
