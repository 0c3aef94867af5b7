import { Administration, createAuthorizationServer } from "@keyway/authorization-server"
import { Grant, Options } from "@keyway/core"
import { thrownBy } from "@keyway/testing"
import { expectOAuthError } from "@keyway/testing/oauth"
import { decodeJwt } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type TokenExchangeOptions, tokenExchange } from "../src/authorization-server.js"
import { REISSUE, reissue } from "./support/reissue.js"
import {
  API,
  basic,
  CALENDAR,
  exchange,
  introspect,
  MCP,
  POLICY,
  type Storage,
  signIn,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

const ACCESS = Grant.ACCESS_TOKEN_TYPE
const UNUSABLE = "the subject_token is not an active access token of this authorization server"

/** Exchanges and expects success: the token response and the new token's claims. */
const exchanged = async (
  server: TestServer,
  subjectToken: string,
  values: Record<string, string> = {},
  clientId = "notes-mcp",
) => {
  const response = await exchange(server, subjectToken, values, clientId)
  if (response.status !== 200) throw new Error(`exchange answered ${response.status}: ${await response.text()}`)
  const body = (await response.json()) as Record<string, unknown> & { access_token: string; scope: string }
  return { body, claims: decodeJwt(body.access_token) }
}

/** Re-issues a token of the server with extra claims (see `reissue`). */
const reissued = async (server: TestServer, token: string, claims: Record<string, unknown>, detach = false) => {
  const response = await tokenRequest(server, {
    grant_type: REISSUE,
    token,
    claims: JSON.stringify(claims),
    ...(detach ? { detach: "true" } : {}),
  })
  if (response.status !== 200) throw new Error(`reissue answered ${response.status}: ${await response.text()}`)
  return ((await response.json()) as { access_token: string }).access_token
}

describe.each(["memory", "sqlite"] as const satisfies ReadonlyArray<Storage>)(
  "token exchange with %s storage",
  (storage) => {
    let server: TestServer
    let user: Awaited<ReturnType<typeof signIn>>
    beforeAll(async () => {
      server = await startServer({ storage, extensions: [reissue] })
      user = await signIn(server)
    })
    afterAll(async () => {
      await server?.close()
    })

    it("lists the grant type in the metadata", async () => {
      const metadata = (await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json()) as {
        grant_types_supported: ReadonlyArray<string>
      }
      expect(metadata.grant_types_supported).toContain(Grant.TOKEN_EXCHANGE)
    })

    it("exchanges alice's token for the MCP server for one for the API, with the MCP server as the actor", async () => {
      const response = await exchange(server, user.access_token)
      expect(response.status).toBe(200)
      expect(response.headers.get("cache-control")).toBe("no-store")
      const body = (await response.json()) as Record<string, unknown>
      expect(body).toEqual({
        access_token: expect.any(String),
        issued_token_type: ACCESS,
        token_type: "Bearer",
        expires_in: expect.any(Number),
        scope: "files:read files:write",
      })
      const subject = decodeJwt(user.access_token)
      const claims = decodeJwt(body.access_token as string)
      expect(claims).toMatchObject({
        iss: server.issuer,
        sub: "alice",
        aud: API,
        client_id: "notes-mcp",
        scope: "files:read files:write",
        act: { sub: "notes-mcp" },
      })
      expect(claims.exp).toBeLessThanOrEqual(subject.exp as number)
      expect(body.expires_in).toBe((claims.exp as number) - (claims.iat as number))
      expect(await introspect(server, body.access_token as string)).toMatchObject({
        active: true,
        sub: "alice",
        aud: API,
        client_id: "notes-mcp",
        scope: "files:read files:write",
        act: { sub: "notes-mcp" },
      })
      // The subject token's introspection has no act.
      expect(await introspect(server, user.access_token)).not.toHaveProperty("act")
    })

    it("takes the target from audience as well, and from both when they name the same resource", async () => {
      const byAudience = await tokenRequest(
        server,
        {
          grant_type: Grant.TOKEN_EXCHANGE,
          subject_token: user.access_token,
          subject_token_type: ACCESS,
          audience: API,
        },
        { authorization: basic("notes-mcp") },
      )
      expect(byAudience.status).toBe(200)
      expect(decodeJwt(((await byAudience.json()) as { access_token: string }).access_token).aud).toBe(API)
      const both = await exchanged(server, user.access_token, { audience: API })
      expect(both.claims.aud).toBe(API)
    })

    it("reports each exchange with user, client, source, target and actors", async () => {
      const before = server.events.length
      const { claims } = await exchanged(server, user.access_token, { scope: "files:read" })
      const event = server.events.slice(before).find((e) => e.event === "token_issued")
      expect(event).toEqual({
        event: "token_issued",
        grant_type: Grant.TOKEN_EXCHANGE,
        client_id: "notes-mcp",
        subject: "alice",
        resource: API,
        source_resource: MCP,
        scope: "files:read",
        expires_in: (claims.exp as number) - (claims.iat as number),
        refresh_token_issued: false,
        actors: ["notes-mcp"],
      })
    })

    it("grants what was asked, within what the rules map from the scopes the subject token holds", async () => {
      expect((await exchanged(server, user.access_token, { scope: "files:write" })).body.scope).toBe("files:write")
      await expectOAuthError(
        await exchange(server, user.access_token, { scope: "files:read files:delete" }),
        400,
        "invalid_scope",
        "the scope files:delete may not be obtained for https://api.example.com from this subject_token",
      )
      // A source scope the subject token does not hold drops the target scope it maps to.
      const reader = await signIn(server, "notes:read")
      expect((await exchanged(server, reader.access_token)).body.scope).toBe("files:read")
      await expectOAuthError(
        await exchange(server, reader.access_token, { scope: "files:write" }),
        400,
        "invalid_scope",
        "the scope files:write may not be obtained for https://api.example.com from this subject_token",
      )
      // Nothing left to grant.
      const writer = await exchanged(server, user.access_token, { scope: "files:write" })
      await expectOAuthError(
        await exchange(server, writer.body.access_token, { resource: CALENDAR }, "files-api"),
        400,
        "invalid_scope",
        "no scope for https://calendar.example.com/v1 may be obtained from this subject_token",
      )
    })

    it("chains: the API exchanges the exchanged token for the calendar, and act nests the MCP server", async () => {
      const first = await exchanged(server, user.access_token)
      const before = server.events.length
      const second = await exchanged(server, first.body.access_token, { resource: CALENDAR }, "files-api")
      expect(second.body.scope).toBe("calendar:read")
      expect(second.claims).toMatchObject({
        sub: "alice",
        aud: CALENDAR,
        client_id: "files-api",
        act: { sub: "files-api", act: { sub: "notes-mcp" } },
      })
      expect(second.claims.exp).toBeLessThanOrEqual(first.claims.exp as number)
      expect(server.events.slice(before).find((e) => e.event === "token_issued")).toMatchObject({
        source_resource: API,
        actors: ["files-api", "notes-mcp"],
      })
      expect(await introspect(server, second.body.access_token)).toMatchObject({
        active: true,
        act: { sub: "files-api", act: { sub: "notes-mcp" } },
      })
    })

    it("names the subject of the client's own actor_token as the actor", async () => {
      const own = await exchanged(server, user.access_token)
      const withActor = await exchanged(server, user.access_token, {
        actor_token: own.body.access_token,
        actor_token_type: ACCESS,
      })
      expect(withActor.claims.act).toEqual({ sub: "alice" })
      await expectOAuthError(
        await exchange(server, user.access_token, { actor_token: user.access_token, actor_token_type: ACCESS }),
        400,
        "invalid_request",
        "the actor_token is not an active access token of the authenticated client",
      )
      await expectOAuthError(
        await exchange(server, user.access_token, { actor_token: "-not-a-token", actor_token_type: ACCESS }),
        400,
        "invalid_request",
        "the actor_token is not an active access token of the authenticated client",
      )
    })

    it("honours may_act, and refuses a malformed act", async () => {
      const forOther = await reissued(server, user.access_token, { may_act: { sub: "files-api" } })
      await expectOAuthError(
        await exchange(server, forOther),
        400,
        "invalid_request",
        "the subject_token does not let notes-mcp act for its subject",
      )
      const forUs = await reissued(server, user.access_token, { may_act: { sub: "notes-mcp", iss: server.issuer } })
      expect((await exchanged(server, forUs)).claims.act).toEqual({ sub: "notes-mcp" })
      const malformed = await reissued(server, user.access_token, { act: { iss: "x" } })
      await expectOAuthError(
        await exchange(server, malformed),
        400,
        "invalid_request",
        "the subject_token's act claim is malformed: act.sub must be a non-empty string",
      )
    })

    it("accepts a subject token bound to a key and never copies its cnf", async () => {
      const bound = await reissued(server, user.access_token, {
        cnf: { jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I" },
      })
      expect(decodeJwt(bound).cnf).toBeDefined()
      const { claims } = await exchanged(server, bound)
      expect(claims).not.toHaveProperty("cnf")
    })

    it("refuses clients that may not exchange", async () => {
      await expectOAuthError(
        await tokenRequest(server, {
          grant_type: Grant.TOKEN_EXCHANGE,
          client_id: "public-mcp",
          subject_token: user.access_token,
          subject_token_type: ACCESS,
          resource: API,
        }),
        401,
        "invalid_client",
        "token exchange needs client credentials",
      )
      await expectOAuthError(
        await exchange(server, user.access_token, {}, "stranger"),
        400,
        "unauthorized_client",
        "the client stranger may not exchange tokens",
      )
    })

    it("refuses malformed requests with the checks of RFC 8693 §2.1", async () => {
      const cases: ReadonlyArray<[Record<string, string>, string, string]> = [
        [{ subject_token: "" }, "invalid_request", "subject_token is missing"],
        [{ subject_token_type: "" }, "invalid_request", "subject_token_type is missing"],
        [
          { subject_token_type: Grant.ID_TOKEN_TYPE },
          "invalid_request",
          `subject_token_type must be one of ${ACCESS}, ${Grant.JWT_TOKEN_TYPE}`,
        ],
        [{ actor_token: "a" }, "invalid_request", "actor_token_type is missing"],
        [
          { actor_token: "a", actor_token_type: Grant.JWT_TOKEN_TYPE },
          "invalid_request",
          `actor_token_type must be ${ACCESS}`,
        ],
        [{ scope: "files:read\u0001" }, "invalid_scope", "scope is malformed"],
      ]
      for (const [values, code, description] of cases) {
        await expectOAuthError(await exchange(server, user.access_token, values), 400, code, description)
      }
      // Another requested_token_type is another handler's (here: none).
      await expectOAuthError(
        await exchange(server, user.access_token, { requested_token_type: Grant.JWT_TOKEN_TYPE }),
        400,
        "unsupported_grant_type",
        `grant_type ${Grant.TOKEN_EXCHANGE} is not supported`,
      )
    })

    it("refuses targets the client's rules do not allow", async () => {
      const noTarget = await tokenRequest(
        server,
        { grant_type: Grant.TOKEN_EXCHANGE, subject_token: user.access_token, subject_token_type: ACCESS },
        { authorization: basic("notes-mcp") },
      )
      await expectOAuthError(noTarget, 400, "invalid_request", "resource or audience is missing")
      await expectOAuthError(
        await exchange(server, user.access_token, { audience: CALENDAR }),
        400,
        "invalid_target",
        "resource and audience name different resources",
      )
      await expectOAuthError(
        await exchange(server, user.access_token, { resource: "https://unknown.example.com" }),
        400,
        "invalid_target",
        "resource https://unknown.example.com is not served by this authorization server",
      )
      await expectOAuthError(
        await exchange(server, user.access_token, { resource: "-not a uri" }),
        400,
        "invalid_target",
        "resource is not a valid absolute URI",
      )
      await expectOAuthError(
        await exchange(server, user.access_token, { resource: CALENDAR }),
        400,
        "invalid_target",
        `the client notes-mcp may not exchange a token for ${MCP} for one for ${CALENDAR}`,
      )
    })

    it("refuses subject tokens it cannot use, alike", async () => {
      for (const token of ["-garbage", user.refresh_token, `${user.access_token.slice(0, -4)}AAAA`]) {
        await expectOAuthError(await exchange(server, token), 400, "invalid_request", UNUSABLE)
      }
      // Revoked by itself (RFC 7009).
      const fresh = await signIn(server, "notes:read")
      const revoked = await fetch(`${server.issuer}/revoke`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: fresh.access_token, client_id: "chat" }),
      })
      expect(revoked.status).toBe(200)
      await expectOAuthError(await exchange(server, fresh.access_token), 400, "invalid_request", UNUSABLE)
      // Issued under no grant (as a client credentials token is).
      await expectOAuthError(
        await exchange(server, await reissued(server, user.access_token, {}, true)),
        400,
        "invalid_request",
        UNUSABLE,
      )
      // A token for another source than the client's rules name.
      const forApi = await signIn(server, "files:read", API)
      await expectOAuthError(
        await exchange(server, forApi.access_token),
        400,
        "invalid_request",
        `the client notes-mcp may not exchange a token for ${API}`,
      )
    })

    it("revoking the parent grant (Administration API) deactivates the exchanged and the chained tokens", async () => {
      const mine = await signIn(server, "notes:read")
      const first = await exchanged(server, mine.access_token)
      const second = await exchanged(server, first.body.access_token, { resource: CALENDAR }, "files-api")
      expect((await introspect(server, second.body.access_token)).active).toBe(true)
      expect(await server.admin(Administration.revokeGrants({ subject: "alice", client_id: "chat" }))).not.toEqual([])
      for (const token of [mine.access_token, first.body.access_token, second.body.access_token]) {
        expect(await introspect(server, token)).toEqual({ active: false })
      }
      await expectOAuthError(await exchange(server, mine.access_token), 400, "invalid_request", UNUSABLE)
      user = await signIn(server)
    })

    it("a refresh token reused revokes the grant, and with it the exchanged tokens", async () => {
      const mine = await signIn(server, "notes:read")
      const first = await exchanged(server, mine.access_token)
      const second = await exchanged(server, first.body.access_token, { resource: CALENDAR }, "files-api")
      const refresh = (token: string) =>
        tokenRequest(server, { grant_type: "refresh_token", refresh_token: token, client_id: "chat", resource: MCP })
      const rotated = await refresh(mine.refresh_token)
      expect(rotated.status).toBe(200)
      const successor = ((await rotated.json()) as { refresh_token: string }).refresh_token
      expect((await refresh(successor)).status).toBe(200)
      // The first token again, once its successor was rotated out too: reuse, which revokes the grant.
      await expectOAuthError(await refresh(mine.refresh_token), 400, "invalid_grant")
      for (const token of [first.body.access_token, second.body.access_token]) {
        expect(await introspect(server, token)).toEqual({ active: false })
      }
      user = await signIn(server)
    })
  },
)

describe("a chain longer than maxChain", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer({ policy: { ...POLICY, maxChain: 1 } })
  })
  afterAll(async () => {
    await server?.close()
  })

  it("is refused", async () => {
    const user = await signIn(server)
    const first = await exchanged(server, user.access_token)
    await expectOAuthError(
      await exchange(server, first.body.access_token, { resource: CALENDAR }, "files-api"),
      400,
      "invalid_request",
      "the delegation chain would be longer than 1",
    )
  })
})

describe("tokenExchange options", () => {
  const base = {
    issuer: "https://auth.example.com",
    resources: [
      { uri: MCP, name: "Notes", scopes: { "notes:read": "Read" } },
      { uri: API, name: "Files", scopes: { "files:read": "Read" } },
    ],
    clients: [
      { clientId: "notes-mcp", clientSecret: "s".repeat(32), redirectUris: [], grantTypes: [Grant.TOKEN_EXCHANGE] },
      { clientId: "plain", clientSecret: "s".repeat(32), redirectUris: ["https://plain.example.com/cb"] },
      { clientId: "public", redirectUris: [], grantTypes: [Grant.TOKEN_EXCHANGE] },
    ],
    warn: () => undefined,
  }
  const rule = { from: MCP, to: API, scopes: { "files:read": "notes:read" } }
  const refused = (options: TokenExchangeOptions) => {
    try {
      createAuthorizationServer({ ...base, extensions: [tokenExchange(options)] })
    } catch (error) {
      return (error as Error).message
    }
    return undefined
  }

  it("are checked against the server's clients and resources", () => {
    expect(refused({ clients: { "notes-mcp": { exchanges: [rule] } } })).toBeUndefined()
    expect(refused({ clients: { nobody: { exchanges: [rule] } } })).toBe(
      `${Grant.TOKEN_EXCHANGE}: clients.nobody: no such client is configured`,
    )
    expect(refused({ clients: { plain: { exchanges: [rule] } } })).toBe(
      `${Grant.TOKEN_EXCHANGE}: clients.plain: the client's grantTypes do not include ${Grant.TOKEN_EXCHANGE}`,
    )
    expect(refused({ clients: { public: { exchanges: [rule] } } })).toBe(
      `${Grant.TOKEN_EXCHANGE}: clients.public: the client is public (no credentials): token exchange is for confidential clients`,
    )
    expect(refused({ clients: { "notes-mcp": { exchanges: [{ ...rule, from: CALENDAR }] } } })).toBe(
      `${Grant.TOKEN_EXCHANGE}: clients.notes-mcp.exchanges.0.from: ${CALENDAR} is not a configured resource`,
    )
    expect(refused({ clients: { "notes-mcp": { exchanges: [{ ...rule, to: CALENDAR }] } } })).toBe(
      `${Grant.TOKEN_EXCHANGE}: clients.notes-mcp.exchanges.0.to: ${CALENDAR} is not a configured resource`,
    )
    expect(
      refused({ clients: { "notes-mcp": { exchanges: [{ ...rule, scopes: { "files:write": "notes:read" } }] } } }),
    ).toBe(`${Grant.TOKEN_EXCHANGE}: clients.notes-mcp.exchanges.0.scopes: files:write is not a scope of ${API}`)
    expect(
      refused({ clients: { "notes-mcp": { exchanges: [{ ...rule, scopes: { "files:read": "notes:write" } }] } } }),
    ).toBe(
      `${Grant.TOKEN_EXCHANGE}: clients.notes-mcp.exchanges.0.scopes.files:read: notes:write is not a scope of ${MCP}`,
    )
  })

  it("are checked against their schema", () => {
    expect(thrownBy(() => tokenExchange({ clients: {}, maxChain: 0 }))).toEqual(
      Options.invalid("tokenExchange", "maxChain", "must be at least 1"),
    )
    expect(thrownBy(() => tokenExchange({ clients: { a: { exchanges: [{ ...rule, from: "relative" }] } } }))).toEqual(
      Options.invalid("tokenExchange", "clients.a.exchanges.0.from", "must be an absolute URI without a fragment"),
    )
    expect(thrownBy(() => tokenExchange({ clients: { a: { exchanges: [{ ...rule, scopes: {} }] } } }))).toEqual(
      Options.invalid("tokenExchange", "clients.a.exchanges.0.scopes", "must name at least one scope"),
    )
    expect(
      thrownBy(() => tokenExchange({ clients: {}, extra: true } as unknown as TokenExchangeOptions)),
    ).toMatchObject({ _tag: "InvalidOptions", factory: "tokenExchange" })
  })
})
