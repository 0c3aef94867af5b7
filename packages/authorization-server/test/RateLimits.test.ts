import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import type { Layer } from "effect"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { ServerOptions, StorageServices } from "../src/AuthorizationServer.js"
import type { StorageError } from "../src/storage/Errors.js"
import { layerMemory, layerPostgres, layerSqlite } from "../src/storage/Storage.js"
import { startEffectServer } from "./support/effectServer.js"
import { authorizeUrl, basic, cookieOf, csrfOf, PASSWORD, type TestServer } from "./support/server.js"
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

/** 429, `Retry-After`, the wait in words, and the headers every page carries. */
const expectLocked = async (response: Response, retryAfter: number, words: string) => {
  expect(response.status).toBe(429)
  expect(response.headers.get("retry-after")).toBe(String(retryAfter))
  expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
  expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
  expect(response.headers.get("x-frame-options")).toBe("DENY")
  expect(response.headers.get("cache-control")).toBe("no-store")
  expect(await loginError(response)).toBe(`Too many failed sign-in attempts. Try again in ${words}.`)
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

const register = (server: TestServer, from?: string) =>
  fetch(`${server.issuer}/register`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(from === undefined ? {} : { "x-test-client": from }) },
    body: JSON.stringify({ redirect_uris: ["https://app.example.com/cb"], token_endpoint_auth_method: "none" }),
  })

/** 429 with `Retry-After` (exposed to browsers) and the OAuth error body. */
const expectTooMany = async (response: Response, retryAfter: number, description: string) => {
  expect(response.status).toBe(429)
  expect(response.headers.get("retry-after")).toBe(String(retryAfter))
  expect(response.headers.get("content-type")).toBe("application/json")
  expect(response.headers.get("cache-control")).toBe("no-store")
  expect(response.headers.get("access-control-allow-origin")).toBe("*")
  expect(response.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate, Retry-After")
  expect(await response.json()).toEqual({
    error: "invalid_request",
    error_description: `${description}; retry after ${retryAfter} seconds`,
  })
}

/** A refresh grant that fails after the limit (the token is unknown): what counts is the answer's status. */
const refresh = (server: TestServer, clientId: string) =>
  postForm(server, "token", { grant_type: "refresh_token", refresh_token: "unknown", client_id: clientId })

const expectInvalidGrant = async (response: Response) => {
  expect(response.status).toBe(400)
  expect((await response.json()) as { error: string }).toMatchObject({ error: "invalid_grant" })
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
        await expectLocked(await signIn(server, form, "bob", "wrong", "198.51.100.7"), 30, "30 seconds")
        await expectLocked(await signIn(server, form, "alice", PASSWORD, "198.51.100.7"), 30, "30 seconds")
        // Another address, and the same /64 of IPv6 counted as one address.
        await expectWrong(await signIn(server, form, "carol", "wrong", "203.0.113.1"))
        await expectWrong(await signIn(server, form, "carol", "wrong", "2001:db8:1:2::1"))
        await expectLocked(await signIn(server, form, "dave", "wrong", "2001:db8:1:2:ffff::9"), 30, "30 seconds")
        await server.adjust(30)
        await expectLocked(await signIn(server, form, "erin", "wrong", "198.51.100.7"), 60, "1 minute")
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
        await expectTooMany(await register(server, "198.51.100.7"), 3600, "too many registrations from this address")
        expect((await register(server, "203.0.113.1")).status).toBe(201)
        await server.adjust(3599)
        await expectTooMany(await register(server, "198.51.100.7"), 1, "too many registrations from this address")
        await server.adjust(1)
        expect((await register(server, "198.51.100.7")).status).toBe(201)
      })

      it("counts the TCP peer's address by default (127.0.0.1 here), never a forwarded header", async () => {
        const server = await start(fresh().open, { registration: true, rateLimits: { registration: { max: 1 } } })
        expect((await register(server, "198.51.100.7")).status).toBe(201)
        await expectTooMany(await register(server, "203.0.113.1"), 3600, "too many registrations from this address")
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
            "<p data-error-description>the client ID metadata document could not be fetched: too many fetches from 127.0.0.1; retry after 60 seconds</p>",
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
            error_description: `the client's jwks_uri could not be fetched: too many fetches from 127.0.0.1; retry after 60 seconds`,
          })
          expect(fetched).toEqual(["/client.json"])
        } finally {
          await new Promise<void>((resolve) => documents.close(() => resolve()))
        }
      })
    })

    describe("token, revocation and introspection endpoints", () => {
      it("token: per claimed client (form client_id, Basic, client_assertion), before authentication", async () => {
        const server = await start(fresh().open, { rateLimits: { token: { max: 2, window: 60 } } })
        await expectInvalidGrant(await refresh(server, "public-app"))
        await expectInvalidGrant(await refresh(server, "public-app"))
        await expectTooMany(await refresh(server, "public-app"), 60, "too many token requests for this client")
        // Another client has its own count; the Basic id is the claim, and a wrong secret still counts.
        const wrongSecret = { authorization: basic("rs", "not-the-secret") }
        for (let i = 0; i < 2; i++) {
          const response = await postForm(
            server,
            "token",
            { grant_type: "refresh_token", refresh_token: "x" },
            wrongSecret,
          )
          expect(response.status).toBe(401)
        }
        await expectTooMany(
          await postForm(server, "token", { grant_type: "refresh_token", refresh_token: "x" }, wrongSecret),
          60,
          "too many token requests for this client",
        )
        // A client assertion claims its sub: public-app is still over its limit.
        const assertion = await new SignJWT({})
          .setProtectedHeader({ alg: "HS256" })
          .setSubject("public-app")
          .setIssuer("public-app")
          .sign(new TextEncoder().encode(RS_SECRET))
        await expectTooMany(
          await postForm(server, "token", {
            grant_type: "refresh_token",
            refresh_token: "x",
            client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            client_assertion: assertion,
          }),
          60,
          "too many token requests for this client",
        )
        await server.adjust(60)
        await expectInvalidGrant(await refresh(server, "public-app"))
      })

      it("revocation and introspection: per claimed client, each endpoint its own count", async () => {
        const server = await start(fresh().open, {
          rateLimits: { revocation: { max: 1, window: 60 }, introspection: { max: 1, window: 30 } },
        })
        const rs = { authorization: basic("rs", RS_SECRET) }
        expect((await postForm(server, "revoke", { token: "unknown" }, rs)).status).toBe(200)
        await expectTooMany(
          await postForm(server, "revoke", { token: "unknown" }, rs),
          60,
          "too many revocation requests for this client",
        )
        const first = await postForm(server, "introspect", { token: "unknown" }, rs)
        expect(first.status).toBe(200)
        expect(await first.json()).toEqual({ active: false })
        await expectTooMany(
          await postForm(server, "introspect", { token: "unknown" }, rs),
          30,
          "too many introspection requests for this client",
        )
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
      await expectTooMany(await refresh(b, "public-app"), 60, "too many token requests for this client")
      await expectTooMany(await refresh(a, "public-app"), 60, "too many token requests for this client")
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
