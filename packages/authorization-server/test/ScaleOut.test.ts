import { Pkce } from "@keyway/core"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { Effect, Layer } from "effect"
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createAuthorizationServer } from "../src/AuthorizationServer.js"
import { GrantStore, layerPostgres } from "../src/storage/Storage.js"
import { newCode } from "./storage/contract.js"
import { eventually } from "./support/eventually.js"
import { type Instance, startInstance } from "./support/fork.js"
import { alicePasswordHash, basic, csrfOf, MCP, PASSWORD } from "./support/server.js"
import { RS_SECRET } from "./support/tokens.js"

/**
 * Two server processes behind one issuer, as behind a TLS-terminating load balancer: both are configured with the
 * same https issuer, each listens on its own loopback port, and the test plays the load balancer by sending each
 * request to the instance it chooses (the instances build their URLs from the issuer, never from the Host header).
 */
const ISSUER = "https://as.example.com"
const REDIRECT = "https://app.example.com/callback"
const form = (values: Record<string, string>) => ({
  method: "POST",
  redirect: "manual" as const,
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams(values).toString(),
})
const cookieOf = (response: Response) => response.headers.getSetCookie()[0]?.split(";")[0] ?? ""

/**
 * Authorization request, login, consent page and consent answer, each step on the instance the load balancer picks
 * (`front` for all by default; a split run asks for one more scope, so the consent page is shown); returns the code
 * and its verifier.
 */
const frontChannel = async (front: Instance, steps?: ReadonlyArray<Instance>) => {
  const [first = front, second = front, third = front, fourth = front] = steps ?? []
  const pkce = await Pkce.generate()
  const request = new URLSearchParams({
    response_type: "code",
    client_id: "public-app",
    redirect_uri: REDIRECT,
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource: MCP,
    scope: steps === undefined ? "tools:read" : "tools:read tools:call",
    state: "st",
  }).toString()
  const page = await fetch(first.at(`${ISSUER}/authorize?${request}`), { redirect: "manual" })
  expect(page.status).toBe(200)
  let cookie = cookieOf(page)
  const credentials = { csrf_token: csrfOf(await page.text()), request, username: "alice", password: PASSWORD }
  const login = await fetch(second.at(`${ISSUER}/authorize/login`), {
    ...form(credentials),
    headers: { ...form({}).headers, cookie },
  })
  expect(login.status).toBe(303)
  cookie = cookieOf(login)
  const consentPage = await fetch(third.at(login.headers.get("location") ?? ""), {
    redirect: "manual",
    headers: { cookie },
  })
  let answer = consentPage
  // Consent is remembered in the database, so after the first run every instance skips the page.
  if (consentPage.status === 200) {
    answer = await fetch(fourth.at(`${ISSUER}/authorize/consent`), {
      ...form({ csrf_token: csrfOf(await consentPage.text()), request, decision: "approve" }),
      headers: { ...form({}).headers, cookie },
    })
    expect(answer.status).toBe(303)
  } else {
    expect(consentPage.status).toBe(302)
  }
  const location = new URL(answer.headers.get("location") ?? "")
  expect(location.origin + location.pathname).toBe(REDIRECT)
  expect(location.searchParams.get("iss")).toBe(ISSUER)
  return { code: location.searchParams.get("code") ?? "", verifier: pkce.verifier }
}

const token = (instance: Instance, body: Record<string, string>) =>
  fetch(instance.at(`${ISSUER}/token`), { ...form({ client_id: "public-app", ...body }) })

const redeem = async (instance: Instance, code: string, verifier: string) => {
  const response = await token(instance, {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: REDIRECT,
    resource: MCP,
  })
  expect(response.status).toBe(200)
  return (await response.json()) as { access_token: string; refresh_token: string }
}

const introspect = async (instance: Instance, value: string) => {
  const response = await fetch(instance.at(`${ISSUER}/introspect`), {
    ...form({ token: value }),
    headers: { ...form({}).headers, authorization: basic("rs", RS_SECRET) },
  })
  expect(response.status).toBe(200)
  return (await response.json()) as Record<string, unknown>
}

const jwks = async (instance: Instance) => (await (await fetch(instance.at(`${ISSUER}/jwks`))).json()) as JSONWebKeySet

let postgres: PostgresServer
let a: Instance
let b: Instance
let serverOptions: (connectionString: string) => Promise<Record<string, unknown>>

beforeAll(async () => {
  postgres = await startPostgres()
  serverOptions = async (connectionString) => ({
    issuer: ISSUER,
    resources: [{ uri: MCP, name: "Example MCP", scopes: { "tools:read": "List the tools", "tools:call": "Call" } }],
    // Shared by every instance, so a browser may land on any of them between two steps of the login.
    sessionSecret: "scale-out-session-secret-0123456789abcdef",
    users: [{ username: "alice", passwordHash: await alicePasswordHash() }],
    clients: [
      { clientId: "public-app", clientName: "Public App", redirectUris: [REDIRECT] },
      { clientId: "rs", clientSecret: RS_SECRET, redirectUris: [], grantTypes: [] },
    ],
    introspectionClients: ["rs"],
    storage: { type: "postgres", connectionString, poolSize: 4 },
  })
  const options = await serverOptions(postgres.createDatabase("scale_out"))
  // One after the other, as a rolling deployment would: the first creates the schema and the signing key.
  a = await startInstance(options, ISSUER)
  b = await startInstance(options, ISSUER)
}, 120_000)

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()])
  postgres?.stop()
})

describe("scale-out: two server processes on one PostgreSQL behind one issuer", () => {
  it("redeems at one instance a code issued by the other, and both accept the tokens", async () => {
    const { code, verifier } = await frontChannel(a)
    const tokens = await redeem(b, code, verifier)
    const jwksA = createLocalJWKSet(await jwks(a))
    const { payload } = await jwtVerify(tokens.access_token, jwksA, { issuer: ISSUER, audience: MCP })
    expect(payload).toMatchObject({ client_id: "public-app", sub: "alice", scope: "tools:read" })
    expect(await introspect(a, tokens.access_token)).toMatchObject({ active: true, client_id: "public-app" })
    // The code is single-use across instances too.
    const again = await token(a, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      resource: MCP,
    })
    expect(again.status).toBe(400)
    expect(await again.json()).toEqual({
      error: "invalid_grant",
      error_description: "the authorization code was already used; tokens issued from it are revoked",
    })
  })

  it("carries one login across instances: each step of the front channel on another instance", async () => {
    const { code, verifier } = await frontChannel(a, [a, b, a, b])
    const tokens = await redeem(a, code, verifier)
    expect(decodeProtectedHeader(tokens.access_token).typ).toBe("at+jwt")
    expect(await introspect(b, tokens.access_token)).toMatchObject({ active: true, scope: "tools:read tools:call" })
  })

  it("converges 20 parallel refreshes of one token, spread over both instances, on one successor", async () => {
    const { code, verifier } = await frontChannel(b)
    const { refresh_token } = await redeem(a, code, verifier)
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => token(i % 2 === 0 ? a : b, { grant_type: "refresh_token", refresh_token })),
    )
    const bodies = (await Promise.all(responses.map((r) => r.json()))) as Array<Record<string, string>>
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200))
    const successors = new Set(bodies.map((body) => body.refresh_token))
    expect(successors.size).toBe(1)
    const [successor] = [...successors]
    expect(successor).not.toBe(refresh_token)
    expect(new Set(bodies.map((body) => body.access_token)).size).toBe(20)
    // The one successor is the family's live token, at either instance.
    const next = await token(b, { grant_type: "refresh_token", refresh_token: successor! })
    expect(next.status).toBe(200)
    const { refresh_token: third } = (await next.json()) as { refresh_token: string }
    expect((await token(a, { grant_type: "refresh_token", refresh_token: third })).status).toBe(200)
  })

  it("sees at one instance a revocation (RFC 7009) made at the other, through introspection (RFC 7662)", async () => {
    const { code, verifier } = await frontChannel(a)
    const tokens = await redeem(a, code, verifier)
    expect(await introspect(b, tokens.access_token)).toMatchObject({ active: true, sub: "alice" })
    const revoked = await fetch(
      a.at(`${ISSUER}/revoke`),
      form({ token: tokens.access_token, token_type_hint: "access_token", client_id: "public-app" }),
    )
    expect(revoked.status).toBe(200)
    expect(await introspect(b, tokens.access_token)).toEqual({ active: false })
    expect(await introspect(a, tokens.access_token)).toEqual({ active: false })
    // The refresh token was not revoked: RFC 7009 §2.1 leaves that to the server, and this one keeps it.
    expect(await introspect(b, tokens.refresh_token)).toMatchObject({ active: true })
  })

  it("serves the same JWK Set from both instances after an on-demand rotation on one", async () => {
    const before = await jwks(a)
    expect(before.keys).toHaveLength(1)
    expect(await jwks(b)).toEqual(before)
    const rotation = await a.rotate()
    expect(rotation.created).toBe(true)
    const afterA = await jwks(a)
    expect(afterA.keys.map((k) => k.kid).sort()).toEqual([before.keys[0]?.kid, rotation.kid].sort())
    expect(await jwks(b)).toEqual(afterA)
    // B knows the rotation is under way: asked to rotate, it returns the same waiting key.
    expect(await b.rotate()).toEqual({ ...rotation, created: false })
    // Neither signs with the new key before its activation.
    const { code, verifier } = await frontChannel(b)
    const tokens = await redeem(b, code, verifier)
    expect(decodeProtectedHeader(tokens.access_token).kid).toBe(before.keys[0]?.kid)
  })
})

describe("PostgreSQL storage on the plain face", () => {
  const connections = async (url: string, database: string) => {
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    try {
      const result = await pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1", [database])
      return Number(result.rows[0]?.n)
    } finally {
      await pool.end()
    }
  }

  it("purges expired records in the background and ends its pool on close()", async () => {
    const url = postgres.createDatabase("plain_face")
    const server = createAuthorizationServer({
      ...(await serverOptions(url)),
      storage: { type: "postgres", connectionString: url, schema: "keyway", poolSize: 2 },
      maintenance: { purgeEvery: 0.05 },
    } as Parameters<typeof createAuthorizationServer>[0])
    const running = await server.listen()
    try {
      expect((await fetch(`${running.url}/jwks`)).status).toBe(200)
      const past = Math.floor(Date.now() / 1000) - 60
      const expired = newCode({ issued_at: past - 60, expires_at: past })
      await Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(Layer.build(layerPostgres({ connectionString: url, schema: "keyway" })), (context) =>
            Effect.provide(
              Effect.flatMap(GrantStore, (g) => g.createCode(expired)),
              context,
            ),
          ),
        ),
      )
      const codes = async () => {
        const pool = new pg.Pool({ connectionString: url, max: 1 })
        try {
          return Number((await pool.query("SELECT count(*)::int AS n FROM keyway.authorization_codes")).rows[0]?.n)
        } finally {
          await pool.end()
        }
      }
      await eventually(async () => (await codes()) === 0, "expired code purged")
      expect(await connections(postgres.url, "plain_face")).toBeGreaterThan(0)
    } finally {
      await running.close()
      await server.close()
    }
    // The server side notices the closed sockets a moment later.
    await eventually(async () => (await connections(postgres.url, "plain_face")) === 0, "pool ended")
  })
})
