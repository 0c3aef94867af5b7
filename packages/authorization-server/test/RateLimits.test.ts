import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { OAuthError } from "@keyway/core"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { expectOAuthError } from "@keyway/testing/oauth"
import { Effect, type Layer } from "effect"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { ServerOptions, StorageServices } from "../src/AuthorizationServer.js"
import type { AuthorizationServerExtension } from "../src/Extension.js"
import type { StorageError } from "../src/storage/Errors.js"
import { layerMemory, layerPostgres, layerSqlite } from "../src/storage/Storage.js"
import { startEffectServer } from "./support/effectServer.js"
import {
  authorizeUrl,
  basic,
  cookieOf,
  csrfOf,
  MCP,
  PASSWORD,
  publicAppTokens,
  type TestServer,
} from "./support/server.js"
import { RS_SECRET } from "./support/tokens.js"

const dir = mkdtempSync(join(tmpdir(), "keyway-limits-"))
let postgres: PostgresServer | undefined
let postgresUrl = ""
beforeAll(async () => {
  postgres = await startPostgres()
  postgresUrl = postgres.createDatabase("limits")
}, 300_000)
afterAll(async () => {
  await postgres?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const started: Array<TestServer> = []
afterEach(async () => {
  for (const s of started.splice(0)) await s.close()
})

type Storage = () => Layer.Layer<StorageServices, StorageError>
let stores = 0
/** Each storage as a factory of one store; `shared` gives a second connection to the same store. */
const storages: ReadonlyArray<{
  readonly name: string
  readonly fresh: () => { readonly open: Storage; readonly shared: boolean }
}> = [
  { name: "memory", fresh: () => ({ open: () => layerMemory, shared: false }) },
  {
    name: "sqlite file",
    fresh: () => {
      const path = join(dir, `limits-${++stores}.sqlite`)
      return { open: () => layerSqlite({ path }), shared: true }
    },
  },
  {
    name: "postgres",
    fresh: () => {
      const schema = `limits_${++stores}`
      return { open: () => layerPostgres({ connectionString: postgresUrl, schema }), shared: true }
    },
  },
]

/** The test clock starts here for every server, so that several instances agree on the time. */
const START = 1_900_000_000

const start = async (storage: Storage, overrides: Partial<ServerOptions> = {}) => {
  const server = await startEffectServer(storage(), overrides, START)
  started.push(server)
  return server
}

// ---------------------------------------------------------------------------------------------------------------------
// Sign-in
// ---------------------------------------------------------------------------------------------------------------------

/** A login form of `server`: its cookie, CSRF token and the authorization request it carries. */
const loginForm = async (server: TestServer) => {
  const { url } = await authorizeUrl(server)
  const page = await fetch(url, { redirect: "manual" })
  expect(page.status).toBe(200)
  return { cookie: cookieOf(page) ?? "", csrf: csrfOf(await page.text()), request: new URL(url).search.slice(1) }
}

type Form = Awaited<ReturnType<typeof loginForm>>

/** Posts a sign-in to `server` with a form obtained from any instance (the session secret is shared). */
const signIn = (server: TestServer, form: Form, username: string, password: string, from?: string) =>
  fetch(`${server.issuer}/authorize/login`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      cookie: form.cookie,
      ...(from === undefined ? {} : { "x-test-client": from }),
    },
    body: new URLSearchParams({ csrf_token: form.csrf, request: form.request, username, password }).toString(),
  })

/** The error shown on a login page. */
const loginError = async (response: Response) =>
  /<div class="error" role="alert" id="login-error">([^<]*)<\/div>/.exec(await response.text())?.[1]

const expectWrong = async (response: Response) => {
  expect(response.status).toBe(401)
  expect(response.headers.get("retry-after")).toBeNull()
  expect(await loginError(response)).toBe("Wrong username or password.")
}

/** 429, `Retry-After`, the limit reached and its setting, the wait in words, and the headers every page carries. */
const expectLocked = async (
  response: Response,
  retryAfter: number,
  words: string,
  by: "account" | "address" = "account",
) => {
  expect(response.status).toBe(429)
  expect(response.headers.get("retry-after")).toBe(String(retryAfter))
  expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
  expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
  expect(response.headers.get("x-frame-options")).toBe("DENY")
  expect(response.headers.get("cache-control")).toBe("no-store")
  const which = by === "account" ? "for this account" : "from this address"
  expect(await loginError(response)).toBe(
    `Too many failed sign-in attempts ${which} (rateLimits.login.${by}). Try again in ${words}.`,
  )
}

const SESSION_SECRET = "limits-session-secret-limits-session-secret"
const accountOnly = {
  sessionSecret: SESSION_SECRET,
  rateLimits: {
    login: { account: { freeAttempts: 3, delay: 60, maxDelay: 240, forgetAfter: 3600 }, address: false },
  },
} as const
/** Per address only; the address is the test header, as a reverse proxy's would be. */
const addressOnly = {
  sessionSecret: SESSION_SECRET,
  rateLimits: {
    login: { account: false, address: { freeAttempts: 2, delay: 30, maxDelay: 600, forgetAfter: 3600 } },
    clientAddress: (request: Request) => request.headers.get("x-test-client") ?? undefined,
  },
} as const

// ---------------------------------------------------------------------------------------------------------------------
// Back channel and registration
// ---------------------------------------------------------------------------------------------------------------------

const postForm = (server: TestServer, path: string, body: Record<string, string>, headers = {}) =>
  fetch(`${server.issuer}/${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(body).toString(),
  })

const REGISTRATIONS = "too many registrations from this address"

const register = (server: TestServer, from?: string) =>
  fetch(`${server.issuer}/register`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(from === undefined ? {} : { "x-test-client": from }) },
    body: JSON.stringify({ redirect_uris: ["https://app.example.com/cb"], token_endpoint_auth_method: "none" }),
  })

/**
 * 429 with `Retry-After` (exposed to browsers) and the OAuth error body, whose description names what was refused, the
 * setting that changes it and its limit, and when to retry.
 */
const expectTooMany = async (
  response: Response,
  retryAfter: number,
  what: string,
  setting: string,
  limit: { readonly max: number; readonly window: number },
) => {
  expect(response.status).toBe(429)
  expect(response.headers.get("retry-after")).toBe(String(retryAfter))
  expect(response.headers.get("content-type")).toBe("application/json")
  expect(response.headers.get("cache-control")).toBe("no-store")
  expect(response.headers.get("access-control-allow-origin")).toBe("*")
  expect(response.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate, Retry-After")
  expect(await response.json()).toEqual({
    error: "invalid_request",
    error_description: `${what}: ${setting} allows ${limit.max} in ${limit.window} seconds; retry after ${retryAfter} seconds`,
  })
}

/** Client addresses, as a reverse proxy would write them in the test header. */
const A = "198.51.100.7"
const B = "203.0.113.1"
const C = "2001:db8:1:2::1"
const D = "192.0.2.200"
const clientAddress = (request: Request) => request.headers.get("x-test-client") ?? undefined

const TOKENS_FROM_ADDRESS = "too many token requests from this address"
const FAILURES = "too many failed client authentications for this client from this address"
const JWT_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/** A refresh grant by a public client, from `from` when given; an unknown token fails after the limits. */
const refresh = (server: TestServer, clientId: string, from?: string, token = "unknown") =>
  postForm(
    server,
    "token",
    { grant_type: "refresh_token", refresh_token: token, client_id: clientId },
    from === undefined ? {} : { "x-test-client": from },
  )

/** A code redemption by public-app with a code that does not exist. */
const redeem = (server: TestServer, from: string) =>
  postForm(
    server,
    "token",
    { grant_type: "authorization_code", code: "unknown", code_verifier: "v".repeat(43), client_id: "public-app" },
    { "x-test-client": from },
  )

const expectInvalidGrant = (response: Response) =>
  expectOAuthError(response, 400, "invalid_grant", "the refresh token is invalid")

const TICKET_GRANT = "urn:example:ticket"
/**
 * A made-up grant without a client: a ticket `<subject>.<number>` is valid once; the identity it proves is counted
 * through the server's `limitIdentity` once the ticket is found unused.
 */
const ticketGrant: AuthorizationServerExtension = {
  id: "test/ticket",
  grants: [
    {
      grantType: TICKET_GRANT,
      clientAuthentication: "optional",
      handle: (context) =>
        Effect.gen(function* () {
          const ticket = /^([a-z]+)\.\d+$/.exec(context.form.get("ticket") ?? "")
          if (ticket === null) return yield* Effect.fail(OAuthError.make("invalid_grant", "the ticket is not valid"))
          const fresh = yield* context.rememberJti("test/ticket", ticket[0], context.now + 60)
          if (!fresh) return yield* Effect.fail(OAuthError.make("invalid_grant", "the ticket was already used"))
          yield* context.limitIdentity("https://tickets.example", ticket[1]!)
          const resource = yield* context.resource(context.form.get("resource"))
          return yield* context.issue({
            subject: ticket[1]!,
            clientId: "ticket-holder",
            resource: resource.uri,
            scope: "",
          })
        }),
    },
  ],
}

for (const { name, fresh } of storages) {
  describe(`abuse limits over HTTP (${name})`, () => {
    describe("sign-in", () => {
      it("per account: 401 until the third failure, then 429 with growing delays; the right password waits too; success resets", async () => {
        const server = await start(fresh().open, accountOnly)
        const form = await loginForm(server)
        await expectWrong(await signIn(server, form, "alice", "wrong"))
        await expectWrong(await signIn(server, form, "alice", "wrong"))
        await expectLocked(await signIn(server, form, "alice", "wrong"), 60, "1 minute")
        // Locked: the password is not even checked.
        await expectLocked(await signIn(server, form, "alice", PASSWORD), 60, "1 minute")
        await server.adjust(59)
        await expectLocked(await signIn(server, form, "alice", PASSWORD), 1, "1 second")
        await server.adjust(1)
        await expectLocked(await signIn(server, form, "alice", "wrong"), 120, "2 minutes")
        await server.adjust(120)
        await expectLocked(await signIn(server, form, "alice", "wrong"), 240, "4 minutes")
        await server.adjust(240)
        // At maxDelay: no longer doubles.
        await expectLocked(await signIn(server, form, "alice", "wrong"), 240, "4 minutes")
        // Another account is not affected; names are compared case-insensitively.
        await expectWrong(await signIn(server, form, "bob", "wrong"))
        await expectLocked(await signIn(server, form, "ALICE", PASSWORD), 240, "4 minutes")
        await server.adjust(240)
        const success = await signIn(server, form, "alice", PASSWORD)
        expect(success.status).toBe(303)
        // The success reset the count: two more failures cost nothing.
        await expectWrong(await signIn(server, form, "alice", "wrong"))
        await expectWrong(await signIn(server, form, "alice", "wrong"))
        await expectLocked(await signIn(server, form, "alice", "wrong"), 60, "1 minute")
      })

      it("an unknown account is answered exactly as a known one, so the limit reveals nothing", async () => {
        const server = await start(fresh().open, accountOnly)
        const form = await loginForm(server)
        const transcript = async (username: string) => {
          const answers: Array<{ status: number; retryAfter: string | null; error: string | undefined }> = []
          for (const password of ["wrong", "wrong", "wrong", PASSWORD]) {
            const response = await signIn(server, form, username, password)
            answers.push({
              status: response.status,
              retryAfter: response.headers.get("retry-after"),
              error: await loginError(response),
            })
          }
          return answers
        }
        const known = await transcript("alice")
        expect(await transcript("mallory")).toEqual(known)
        expect(known.map((a) => a.status)).toEqual([401, 401, 429, 429])
      })

      it("per client address: failures for any account count for the address; other addresses and successes do not", async () => {
        const server = await start(fresh().open, addressOnly)
        const form = await loginForm(server)
        await expectWrong(await signIn(server, form, "alice", "wrong", "198.51.100.7"))
        // A success gives its attempt back to the address.
        expect((await signIn(server, form, "alice", PASSWORD, "198.51.100.7")).status).toBe(303)
        await expectLocked(await signIn(server, form, "bob", "wrong", "198.51.100.7"), 30, "30 seconds", "address")
        await expectLocked(await signIn(server, form, "alice", PASSWORD, "198.51.100.7"), 30, "30 seconds", "address")
        // Another address, and the same /64 of IPv6 counted as one address.
        await expectWrong(await signIn(server, form, "carol", "wrong", "203.0.113.1"))
        await expectWrong(await signIn(server, form, "carol", "wrong", "2001:db8:1:2::1"))
        await expectLocked(
          await signIn(server, form, "dave", "wrong", "2001:db8:1:2:ffff::9"),
          30,
          "30 seconds",
          "address",
        )
        await server.adjust(30)
        await expectLocked(await signIn(server, form, "erin", "wrong", "198.51.100.7"), 60, "1 minute", "address")
      })

      it("with the limits off, failures never lock", async () => {
        const server = await start(fresh().open, { rateLimits: false })
        const form = await loginForm(server)
        for (let i = 0; i < 25; i++) await expectWrong(await signIn(server, form, "alice", "wrong"))
        expect((await signIn(server, form, "alice", PASSWORD)).status).toBe(303)
      })

      it("by default, the fifth failure for an account locks it for a minute", async () => {
        const server = await start(fresh().open)
        const form = await loginForm(server)
        for (let i = 0; i < 4; i++) await expectWrong(await signIn(server, form, "alice", "wrong"))
        await expectLocked(await signIn(server, form, "alice", "wrong"), 60, "1 minute")
      })
    })

    describe("registration", () => {
      it("per client address per window: 429 invalid_request with Retry-After, until the window ends", async () => {
        const server = await start(fresh().open, {
          registration: true,
          rateLimits: {
            registration: { max: 2, window: 3600 },
            clientAddress: (request) => request.headers.get("x-test-client") ?? undefined,
          },
        })
        expect((await register(server, "198.51.100.7")).status).toBe(201)
        expect((await register(server, "198.51.100.7")).status).toBe(201)
        await expectTooMany(await register(server, "198.51.100.7"), 3600, REGISTRATIONS, "rateLimits.registration", {
          max: 2,
          window: 3600,
        })
        expect((await register(server, "203.0.113.1")).status).toBe(201)
        await server.adjust(3599)
        await expectTooMany(await register(server, "198.51.100.7"), 1, REGISTRATIONS, "rateLimits.registration", {
          max: 2,
          window: 3600,
        })
        await server.adjust(1)
        expect((await register(server, "198.51.100.7")).status).toBe(201)
      })

      it("counts the TCP peer's address by default (127.0.0.1 here), never a forwarded header", async () => {
        const server = await start(fresh().open, { registration: true, rateLimits: { registration: { max: 1 } } })
        expect((await register(server, "198.51.100.7")).status).toBe(201)
        await expectTooMany(await register(server, "203.0.113.1"), 3600, REGISTRATIONS, "rateLimits.registration", {
          max: 1,
          window: 3600,
        })
      })
    })

    describe("metadata-document fetches", () => {
      it("per host: over the limit the authorization endpoint answers 429 temporarily_unavailable with Retry-After", async () => {
        // A client ID metadata document host on loopback: every path is a client whose document names itself.
        const documents = createServer((request, response) => {
          fetched.push(request.url ?? "")
          const clientId = `http://127.0.0.1:${(documents.address() as AddressInfo).port}${request.url}`
          response.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=3600" })
          response.end(
            JSON.stringify({
              client_id: clientId,
              client_name: "Document App",
              redirect_uris: ["https://app.example.com/callback"],
              token_endpoint_auth_method: "none",
            }),
          )
        })
        const fetched: Array<string> = []
        await new Promise<void>((resolve) => documents.listen(0, "127.0.0.1", resolve))
        try {
          const host = `http://127.0.0.1:${(documents.address() as AddressInfo).port}`
          const server = await start(fresh().open, {
            clientIdMetadataDocuments: { allowHttpLoopbackClientIds: true },
            rateLimits: { metadataFetches: { max: 2, window: 60 } },
          })
          const authorize = async (path: string) =>
            fetch((await authorizeUrl(server, { client_id: `${host}${path}` })).url, { redirect: "manual" })
          expect((await authorize("/a")).status).toBe(200)
          expect((await authorize("/b")).status).toBe(200)
          // A cached document costs no fetch.
          expect((await authorize("/a")).status).toBe(200)
          const refused = await authorize("/c")
          expect(refused.status).toBe(429)
          expect(refused.headers.get("retry-after")).toBe("60")
          expect(refused.headers.get("location")).toBeNull()
          expect(refused.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
          expect(refused.headers.get("x-frame-options")).toBe("DENY")
          const html = await refused.text()
          expect(html).toContain('<code data-error="temporarily_unavailable">temporarily_unavailable</code>')
          expect(html).toContain(
            "<p data-error-description>the client ID metadata document could not be fetched: too many fetches from 127.0.0.1: rateLimits.metadataFetches allows 2 in 60 seconds; retry after 60 seconds</p>",
          )
          expect(fetched).toEqual(["/a", "/b"])
          await server.adjust(60)
          expect((await authorize("/c")).status).toBe(200)
          expect(fetched).toEqual(["/a", "/b", "/c"])
        } finally {
          await new Promise<void>((resolve) => documents.close(() => resolve()))
        }
      })

      it("per host: a jwks_uri the token endpoint may not fetch yet is answered 429 with Retry-After", async () => {
        const pair = await generateKeyPair("ES256", { extractable: true })
        const jwk = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "ES256" }
        const fetched: Array<string> = []
        const documents = createServer((request, response) => {
          fetched.push(request.url ?? "")
          const base = `http://127.0.0.1:${(documents.address() as AddressInfo).port}`
          response.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=3600" })
          response.end(
            JSON.stringify(
              request.url === "/jwks.json"
                ? { keys: [jwk] }
                : {
                    client_id: `${base}${request.url}`,
                    client_name: "Key App",
                    redirect_uris: ["https://app.example.com/callback"],
                    token_endpoint_auth_method: "private_key_jwt",
                    jwks_uri: `${base}/jwks.json`,
                  },
            ),
          )
        })
        await new Promise<void>((resolve) => documents.listen(0, "127.0.0.1", resolve))
        try {
          const clientId = `http://127.0.0.1:${(documents.address() as AddressInfo).port}/client.json`
          const server = await start(fresh().open, {
            clientIdMetadataDocuments: { allowHttpLoopbackClientIds: true },
            // The document is one fetch; its key set would be the second.
            rateLimits: { metadataFetches: { max: 1, window: 60 } },
          })
          const assertion = await new SignJWT({ jti: crypto.randomUUID() })
            .setProtectedHeader({ alg: "ES256", kid: "k1" })
            .setIssuer(clientId)
            .setSubject(clientId)
            .setAudience(`${server.issuer}/token`)
            .setIssuedAt(START)
            .setExpirationTime(START + 60)
            .sign(pair.privateKey)
          const refused = await fetch(`${server.issuer}/token`, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({
              grant_type: "authorization_code",
              code: "not-a-code",
              code_verifier: "v".repeat(43),
              client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
              client_assertion: assertion,
            }),
          })
          expect(refused.status).toBe(429)
          expect(refused.headers.get("retry-after")).toBe("60")
          expect(refused.headers.get("www-authenticate")).toBeNull()
          expect(await refused.json()).toEqual({
            error: "invalid_request",
            error_description:
              "the client's jwks_uri could not be fetched: too many fetches from 127.0.0.1: rateLimits.metadataFetches allows 1 in 60 seconds; retry after 60 seconds",
          })
          expect(fetched).toEqual(["/client.json"])
        } finally {
          await new Promise<void>((resolve) => documents.close(() => resolve()))
        }
      })
    })

    describe("token, revocation and introspection endpoints", () => {
      it("token: a public client counts per client address, never per client ID alone", async () => {
        const server = await start(fresh().open, { rateLimits: { token: { max: 2, window: 60 }, clientAddress } })
        await expectInvalidGrant(await refresh(server, "public-app", A))
        await expectInvalidGrant(await refresh(server, "public-app", A))
        await expectTooMany(await refresh(server, "public-app", A), 60, TOKENS_FROM_ADDRESS, "rateLimits.token", {
          max: 2,
          window: 60,
        })
        // Any public request from that address, a code redemption too.
        await expectTooMany(await redeem(server, A), 60, TOKENS_FROM_ADDRESS, "rateLimits.token", {
          max: 2,
          window: 60,
        })
        // Every other user of the same client ID is not affected.
        await expectInvalidGrant(await refresh(server, "public-app", B))
        await expectInvalidGrant(await refresh(server, "public-app", B))
        await server.adjust(60)
        await expectInvalidGrant(await refresh(server, "public-app", A))
      })

      it("token: a public client's refreshes count per refresh-token family too, from whatever address", async () => {
        const server = await start(fresh().open, { rateLimits: { refresh: { max: 2, window: 60 }, clientAddress } })
        let token = (await publicAppTokens(server)).refresh_token
        for (const from of [A, B]) {
          const response = await refresh(server, "public-app", from, token)
          expect(response.status).toBe(200)
          token = ((await response.json()) as { refresh_token: string }).refresh_token
        }
        const refused = await refresh(server, "public-app", C, token)
        await expectTooMany(refused, 60, "too many refresh requests for this refresh token", "rateLimits.refresh", {
          max: 2,
          window: 60,
        })
        // Another grant of the same client, from the same address, has its own count.
        const other = (await publicAppTokens(server)).refresh_token
        expect((await refresh(server, "public-app", C, other)).status).toBe(200)
        // The refused request did not use the token up.
        await server.adjust(60)
        expect((await refresh(server, "public-app", C, token)).status).toBe(200)
      })

      it("failed client authentications count per claimed client and address, apart from the client's allowance", async () => {
        const server = await start(fresh().open, {
          rateLimits: {
            introspection: { max: 3, window: 60 },
            clientAuthentication: { max: 2, window: 60 },
            clientAddress,
          },
        })
        const introspect = (from: string, authorization: string, body: Record<string, string> = {}) =>
          postForm(server, "introspect", { token: "unknown", ...body }, { authorization, "x-test-client": from })
        const wrong = basic("rs", "not-the-secret")
        const right = basic("rs", RS_SECRET)
        for (let i = 0; i < 2; i++) {
          const response = await introspect(A, wrong)
          expect(response.status).toBe(401)
          expect(response.headers.get("www-authenticate")).toBe('Basic realm="introspection"')
          expect(await response.json()).toEqual({
            error: "invalid_client",
            error_description: "client authentication failed",
          })
        }
        const tooManyFailures = async (response: Response) =>
          expectTooMany(response, 60, FAILURES, "rateLimits.clientAuthentication", { max: 2, window: 60 })
        await tooManyFailures(await introspect(A, wrong))
        // From that address the right secret is refused alike, so a guess that happens to be right tells nothing.
        await tooManyFailures(await introspect(A, right))
        // A forged assertion naming the client counts too, at any back-channel endpoint.
        const forged = await new SignJWT({})
          .setProtectedHeader({ alg: "HS256" })
          .setSubject("rs")
          .setIssuer("rs")
          .sign(new TextEncoder().encode("not-the-key-not-the-key-not-the-key"))
        await tooManyFailures(
          await postForm(
            server,
            "token",
            {
              grant_type: "refresh_token",
              refresh_token: "x",
              client_assertion_type: JWT_ASSERTION,
              client_assertion: forged,
            },
            { "x-test-client": A },
          ),
        )
        // The real client, from its own address, is not refused: none of this spent its allowance.
        const active = await introspect(B, right)
        expect(active.status).toBe(200)
        expect(await active.json()).toEqual({ active: false })
        // Its allowance is its own, wherever it asks from (the refused request from A, which had the secret, counted).
        expect((await introspect(C, right)).status).toBe(200)
        await expectTooMany(
          await introspect(B, right),
          60,
          "too many introspection requests for this client",
          "rateLimits.introspection",
          { max: 3, window: 60 },
        )
        await server.adjust(60)
        expect((await introspect(A, right)).status).toBe(200)
      })

      it("token: a client that authenticates spends its own allowance, and only its correct requests do", async () => {
        const server = await start(fresh().open, {
          clients: [
            { clientId: "public-app", clientName: "Public App", redirectUris: ["https://app.example.com/callback"] },
            { clientId: "-svc", clientSecret: RS_SECRET, redirectUris: ["https://svc.example.com/cb"] },
          ],
          introspectionClients: [],
          rateLimits: { token: { max: 2, window: 60 }, clientAddress },
        })
        const request = (from: string, secret: string) =>
          postForm(
            server,
            "token",
            { grant_type: "refresh_token", refresh_token: "unknown" },
            { authorization: basic("-svc", secret), "x-test-client": from },
          )
        for (let i = 0; i < 5; i++) expect((await request(A, "not-the-secret")).status).toBe(401)
        await expectInvalidGrant(await request(B, RS_SECRET))
        await expectInvalidGrant(await request(C, RS_SECRET))
        await expectTooMany(
          await request(B, RS_SECRET),
          60,
          "too many token requests for this client",
          "rateLimits.token",
          {
            max: 2,
            window: 60,
          },
        )
      })

      it("revocation: per authenticated client; a public client per client address", async () => {
        const server = await start(fresh().open, { rateLimits: { revocation: { max: 1, window: 60 }, clientAddress } })
        const revoke = (from: string, headers: Record<string, string>, body: Record<string, string> = {}) =>
          postForm(server, "revoke", { token: "unknown", ...body }, { ...headers, "x-test-client": from })
        const rs = { authorization: basic("rs", RS_SECRET) }
        expect((await revoke(A, {}, { client_id: "public-app" })).status).toBe(200)
        await expectTooMany(
          await revoke(A, {}, { client_id: "public-app" }),
          60,
          "too many revocation requests from this address",
          "rateLimits.revocation",
          { max: 1, window: 60 },
        )
        expect((await revoke(B, {}, { client_id: "public-app" })).status).toBe(200)
        expect((await revoke(A, rs)).status).toBe(200)
        await expectTooMany(
          await revoke(B, rs),
          60,
          "too many revocation requests for this client",
          "rateLimits.revocation",
          { max: 1, window: 60 },
        )
      })

      it("introspection: a confidential client's allowance per endpoint", async () => {
        const server = await start(fresh().open, {
          rateLimits: { revocation: { max: 1, window: 60 }, introspection: { max: 1, window: 30 } },
        })
        const rs = { authorization: basic("rs", RS_SECRET) }
        expect((await postForm(server, "revoke", { token: "unknown" }, rs)).status).toBe(200)
        const first = await postForm(server, "introspect", { token: "unknown" }, rs)
        expect(first.status).toBe(200)
        expect(await first.json()).toEqual({ active: false })
        await expectTooMany(
          await postForm(server, "introspect", { token: "unknown" }, rs),
          30,
          "too many introspection requests for this client",
          "rateLimits.introspection",
          { max: 1, window: 30 },
        )
      })

      it("a grant without a client: per client address, and per identity once the grant has verified it", async () => {
        const server = await start(fresh().open, {
          extensions: [ticketGrant],
          rateLimits: { token: { max: 3, window: 60 }, workload: { max: 2, window: 60 }, clientAddress },
        })
        const ticket = (from: string, value: string) =>
          postForm(
            server,
            "token",
            { grant_type: TICKET_GRANT, ticket: value, resource: MCP },
            { "x-test-client": from },
          )
        const badTicket = async (response: Response) => {
          expect(response.status).toBe(400)
          expect(await response.json()).toEqual({
            error: "invalid_grant",
            error_description: "the ticket is not valid",
          })
        }
        for (let i = 0; i < 3; i++) await badTicket(await ticket(A, "forged"))
        await expectTooMany(await ticket(A, "alice.1"), 60, TOKENS_FROM_ADDRESS, "rateLimits.token", {
          max: 3,
          window: 60,
        })
        expect((await ticket(B, "alice.1")).status).toBe(200)
        expect((await ticket(C, "alice.2")).status).toBe(200)
        await expectTooMany(
          await ticket(D, "alice.3"),
          60,
          "too many token requests for this workload",
          "rateLimits.workload",
          {
            max: 2,
            window: 60,
          },
        )
        // A replayed ticket spends nothing of anyone's (the grant counts a ticket once it is found unused).
        expect(await (await ticket(D, "bob.1")).json()).toMatchObject({ token_type: "Bearer" })
        const replayed = await ticket(D, "bob.1")
        expect(replayed.status).toBe(400)
        expect(await replayed.json()).toEqual({
          error: "invalid_grant",
          error_description: "the ticket was already used",
        })
        expect((await ticket(B, "bob.2")).status).toBe(200)
      })

      it("a streamed body over maxBodyBytes still gets the endpoint's own 413", async () => {
        const server = await start(fresh().open, { maxBodyBytes: 1024 })
        const chunk = new TextEncoder().encode(`client_id=public-app&pad=${"a".repeat(1000)}`)
        const response = await fetch(`${server.issuer}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new ReadableStream({
            start(controller) {
              controller.enqueue(chunk)
              controller.enqueue(chunk)
              controller.close()
            },
          }),
          duplex: "half",
        } as RequestInit)
        expect(response.status).toBe(413)
        expect(await response.json()).toEqual({
          error: "invalid_request",
          error_description: "the body exceeds 1024 bytes",
        })
      })

      it("with a limit off, that endpoint is not counted", async () => {
        const server = await start(fresh().open, { rateLimits: { token: false } })
        for (let i = 0; i < 30; i++) await expectInvalidGrant(await refresh(server, "public-app"))
      })
    })
  })
}

for (const { name, fresh } of storages.filter((s) => s.name !== "memory")) {
  // The instances stand behind one issuer (a database serves one), each answering on its own port.
  describe(`two instances sharing one store enforce one limit (${name})`, () => {
    it("token requests counted on either instance add up", async () => {
      const store = fresh()
      const options = { rateLimits: { token: { max: 3, window: 60 } } }
      const a = await start(store.open, options)
      const b = await start(store.open, { ...options, issuer: a.issuer })
      await expectInvalidGrant(await refresh(a, "public-app"))
      await expectInvalidGrant(await refresh(b, "public-app"))
      await expectInvalidGrant(await refresh(a, "public-app"))
      await expectTooMany(await refresh(b, "public-app"), 60, TOKENS_FROM_ADDRESS, "rateLimits.token", {
        max: 3,
        window: 60,
      })
      await expectTooMany(await refresh(a, "public-app"), 60, TOKENS_FROM_ADDRESS, "rateLimits.token", {
        max: 3,
        window: 60,
      })
    })

    it("concurrent requests to both instances: exactly max get through", async () => {
      const store = fresh()
      const options = { rateLimits: { token: { max: 5, window: 60 } } }
      const a = await start(store.open, options)
      const b = await start(store.open, { ...options, issuer: a.issuer })
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => refresh(i % 2 === 0 ? a : b, "public-app").then((r) => r.status)),
      )
      expect(answers.filter((s) => s === 400)).toHaveLength(5)
      expect(answers.filter((s) => s === 429)).toHaveLength(15)
    })

    it("a sign-in locked on one instance is locked on the other", async () => {
      const store = fresh()
      const a = await start(store.open, accountOnly)
      const b = await start(store.open, { ...accountOnly, issuer: a.issuer })
      const form = await loginForm(a)
      await expectWrong(await signIn(a, form, "alice", "wrong"))
      await expectWrong(await signIn(b, form, "alice", "wrong"))
      await expectLocked(await signIn(a, form, "alice", "wrong"), 60, "1 minute")
      await expectLocked(await signIn(b, form, "alice", PASSWORD), 60, "1 minute")
      await a.adjust(60)
      await b.adjust(60)
      expect((await signIn(b, form, "alice", PASSWORD)).status).toBe(303)
    })
  })
}
