import { expectOAuthError } from "@keyway/testing/oauth"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { basic, SECRET, type TestServer, tokenRequest } from "./support/server.js"
import { introspect, issueTokens, post, startTokenServer } from "./support/tokens.js"

let server: TestServer
beforeAll(async () => {
  server = await startTokenServer()
})
afterAll(async () => {
  await server.close()
})

const refresh = (token: string, client = "public-app") =>
  tokenRequest(server, { grant_type: "refresh_token", refresh_token: token, client_id: client })

const expectRevoked = async (response: Response) => {
  expect(response.status).toBe(200)
  expect(await response.text()).toBe("")
  expect(response.headers.get("cache-control")).toBe("no-store")
  expect(response.headers.get("access-control-allow-origin")).toBe("*")
}

describe("revocation endpoint (RFC 7009)", () => {
  it("a refresh token revokes its whole grant: the refresh token and the access tokens issued with it", async () => {
    const tokens = await issueTokens(server)
    expect((await introspect(server, tokens.access_token)).active).toBe(true)
    await expectRevoked(
      await post(server, "revoke", {
        token: tokens.refresh_token,
        token_type_hint: "refresh_token",
        client_id: "public-app",
      }),
    )
    const after = await refresh(tokens.refresh_token)
    await expectOAuthError(after, 400, "invalid_grant", "the refresh token has been revoked")
    expect(await introspect(server, tokens.access_token)).toEqual({ active: false })
    expect(await introspect(server, tokens.refresh_token)).toEqual({ active: false })
  })

  it("an access token is revoked by itself; the refresh token keeps working", async () => {
    const tokens = await issueTokens(server)
    await expectRevoked(
      await post(server, "revoke", {
        token: tokens.access_token,
        token_type_hint: "access_token",
        client_id: "public-app",
      }),
    )
    expect(await introspect(server, tokens.access_token)).toEqual({ active: false })
    expect((await refresh(tokens.refresh_token)).status).toBe(200)
  })

  it("a wrong hint does not prevent revocation (both types are looked up)", async () => {
    const tokens = await issueTokens(server)
    await expectRevoked(
      await post(server, "revoke", {
        token: tokens.access_token,
        token_type_hint: "refresh_token",
        client_id: "public-app",
      }),
    )
    expect(await introspect(server, tokens.access_token)).toEqual({ active: false })
    await expectRevoked(
      await post(server, "revoke", {
        token: tokens.refresh_token,
        token_type_hint: "access_token",
        client_id: "public-app",
      }),
    )
    await expectOAuthError(
      await refresh(tokens.refresh_token),
      400,
      "invalid_grant",
      "the refresh token has been revoked",
    )
  })

  it("an unsupported hint value is ignored", async () => {
    const tokens = await issueTokens(server)
    await expectRevoked(
      await post(server, "revoke", {
        token: tokens.refresh_token,
        token_type_hint: "id_token",
        client_id: "public-app",
      }),
    )
    await expectOAuthError(
      await refresh(tokens.refresh_token),
      400,
      "invalid_grant",
      "the refresh token has been revoked",
    )
  })

  it("a confidential client revokes with its credentials", async () => {
    const tokens = await issueTokens(server, "web-app")
    await expectRevoked(
      await post(server, "revoke", { token: tokens.refresh_token }, { authorization: basic("web-app", SECRET) }),
    )
    expect(await introspect(server, tokens.access_token)).toEqual({ active: false })
  })

  it("unknown, malformed and already revoked tokens: 200", async () => {
    for (const token of ["no-such-token", "a.b.c", "eyJhbGciOiJub25lIn0.e30."]) {
      await expectRevoked(await post(server, "revoke", { token, client_id: "public-app" }))
    }
    const tokens = await issueTokens(server)
    for (let i = 0; i < 2; i++) {
      await expectRevoked(await post(server, "revoke", { token: tokens.refresh_token, client_id: "public-app" }))
    }
  })

  it("tokens of another client: 200, and nothing is revoked", async () => {
    const tokens = await issueTokens(server)
    await expectRevoked(await post(server, "revoke", { token: tokens.refresh_token, client_id: "other-app" }))
    await expectRevoked(await post(server, "revoke", { token: tokens.access_token, client_id: "other-app" }))
    await expectRevoked(
      await post(server, "revoke", { token: tokens.access_token }, { authorization: basic("web-app", SECRET) }),
    )
    expect((await introspect(server, tokens.access_token)).active).toBe(true)
    expect((await refresh(tokens.refresh_token)).status).toBe(200)
  })

  it("a client that fails to authenticate: 401 invalid_client with a Basic challenge, nothing revoked", async () => {
    const tokens = await issueTokens(server, "web-app")
    const wrong = await post(
      server,
      "revoke",
      { token: tokens.refresh_token },
      { authorization: basic("web-app", "x") },
    )
    expect(wrong.headers.get("www-authenticate")).toBe('Basic realm="revocation"')
    await expectOAuthError(wrong, 401, "invalid_client", "client authentication failed")
    const missing = await post(server, "revoke", { token: tokens.refresh_token, client_id: "web-app" })
    await expectOAuthError(missing, 401, "invalid_client", "this client must authenticate with client_secret_basic")
    const anonymous = await post(server, "revoke", { token: tokens.refresh_token })
    await expectOAuthError(anonymous, 401, "invalid_client", "client authentication failed")
    expect((await introspect(server, tokens.access_token)).active).toBe(true)
  })

  it("missing token: 400 invalid_request", async () => {
    await expectOAuthError(
      await post(server, "revoke", { client_id: "public-app" }),
      400,
      "invalid_request",
      "token is missing",
    )
  })

  it("a body that is not a form: 400 invalid_request", async () => {
    const response = await fetch(`${server.issuer}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: "x", client_id: "public-app" }),
    })
    await expectOAuthError(response, 400, "invalid_request", "the body must be application/x-www-form-urlencoded")
  })

  it("GET: 405 with Allow; OPTIONS answers the CORS preflight", async () => {
    const get = await fetch(`${server.issuer}/revoke`)
    expect(get.status).toBe(405)
    expect(get.headers.get("allow")).toBe("POST, OPTIONS")
    const options = await fetch(`${server.issuer}/revoke`, { method: "OPTIONS" })
    expect(options.status).toBe(204)
    expect(options.headers.get("access-control-allow-methods")).toBe("POST, OPTIONS")
  })
})
