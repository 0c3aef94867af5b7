/**
 * The storage contract: every implementation of the storage services (memory, SQLite, PostgreSQL) runs this
 * same suite. Each test gets a fresh, empty store from the factory.
 */
import { randomBytes } from "node:crypto"
import { Scope } from "@keyway/core"
import { Effect, type Layer, Option, Result } from "effect"
import { describe, expect, it } from "vitest"
import {
  ClientAlreadyExists,
  ClientNotFound,
  ClientStore,
  CodeAlreadyUsed,
  CodeExpired,
  CodeNotFound,
  GrantNotFound,
  GrantRevoked,
  GrantStore,
  KeyAlreadyExists,
  KeyNotFound,
  KeyStore,
  type NewAuthorizationCode,
  type NewClient,
  NoSigningKey,
  RefreshTokenClientMismatch,
  RefreshTokenExpired,
  RefreshTokenNotFound,
  RefreshTokenReused,
  RefreshTokenRevoked,
  type SigningKey,
  type StorageError,
  type Stores,
} from "../../src/storage/index.js"

/** Builds a fresh, empty set of stores. */
export type StoresFactory = () => Layer.Layer<Stores, StorageError>

export const NOW = 1_800_000_000

/** A fresh 256-bit random value, as the server generates codes, tokens and secrets. */
export const secret = (): string => randomBytes(32).toString("base64url")

export const newClient = (overrides: Partial<NewClient> = {}): NewClient => ({
  client_id: `client-${secret().slice(0, 8)}`,
  client_secret_expires_at: 0,
  client_id_issued_at: NOW,
  redirect_uris: ["https://app.example.com/callback"],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "client_secret_basic",
  origin: "dynamic",
  ...overrides,
})

export const newCode = (overrides: Partial<NewAuthorizationCode> = {}): NewAuthorizationCode => ({
  code: secret(),
  client_id: "client-a",
  redirect_uri: "https://app.example.com/callback",
  code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
  code_challenge_method: "S256",
  resource: "https://mcp.example.com/mcp",
  scope: "files:read files:write",
  subject: "alice",
  auth_time: NOW - 5,
  issued_at: NOW,
  expires_at: NOW + 60,
  ...overrides,
})

export const signingKey = (kid: string, overrides: Partial<SigningKey> = {}): SigningKey => ({
  kid,
  alg: "ES256",
  private_jwk: { kty: "EC", crv: "P-256", x: `x-${kid}`, y: `y-${kid}`, d: `d-${kid}`, kid, alg: "ES256" },
  public_jwk: { kty: "EC", crv: "P-256", x: `x-${kid}`, y: `y-${kid}`, kid, alg: "ES256", use: "sig" },
  created_at: NOW,
  activates_at: NOW,
  status: "active",
  ...overrides,
})

/** Runs the program against a fresh store. */
export const runWith =
  (factory: StoresFactory) =>
  <A, E>(program: Effect.Effect<A, E, Stores>): Promise<A> =>
    Effect.runPromise(Effect.provide(program, factory()))

/** The program's typed failure (fails the test if it succeeds). */
const failure = <A, E, R>(program: Effect.Effect<A, E, R>): Effect.Effect<E, never, R> =>
  Effect.flip(program).pipe(Effect.catchCause(() => Effect.die(new Error("expected a typed failure"))))

/** A code redeemed and tokens issued under its grant: the state most grant tests start from. */
const issuedAs = (overrides: Partial<NewAuthorizationCode> = {}) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const input = newCode(overrides)
    const code = yield* grants.createCode(input)
    yield* grants.consumeCode(input.code, NOW + 1)
    const jti = secret()
    yield* grants.recordAccessToken({ grant_id: code.grant_id, jti, expires_at: NOW + 600 })
    const refreshToken = secret()
    const refresh = yield* grants.createRefresh({
      grant_id: code.grant_id,
      token: refreshToken,
      scope: input.scope,
      issued_at: NOW + 1,
      expires_at: NOW + 86_400,
    })
    return { grants, input, code, jti, refreshToken, refresh }
  })
const issued = issuedAs()

export const storageContract = (name: string, factory: StoresFactory): void => {
  const run = runWith(factory)

  describe(`${name}: ClientStore`, () => {
    it("creates a client, keeps only hashes, and returns it from get and list", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const clientSecret = secret()
          const registrationToken = secret()
          const input = newClient({
            client_id: "client-full",
            client_secret: clientSecret,
            registration_access_token: registrationToken,
            client_secret_expires_at: NOW + 3600,
            client_name: "Full Client",
            client_uri: "https://app.example.com",
            logo_uri: "https://app.example.com/logo.png",
            tos_uri: "https://app.example.com/tos",
            policy_uri: "https://app.example.com/policy",
            contacts: ["ops@example.com"],
            scope: "files:read",
            jwks: { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y", kid: "k1" }] },
            application_type: "native",
            software_id: "4NRB1-0XZABZI9E6-5SM3R",
            software_version: "2.1",
            extension_metadata: { example_tier: "gold", example_limits: { level: 2, regions: ["eu", "us"] } },
            token_endpoint_auth_method: "client_secret_post",
          })
          const created = yield* clients.create(input)
          const { client_secret: _s, registration_access_token: _r, ...metadata } = input
          expect(created).toEqual({
            ...metadata,
            client_secret_hash: created.client_secret_hash,
            registration_access_token_hash: created.registration_access_token_hash,
          })
          expect(created.client_secret_hash).toMatch(/^[A-Za-z0-9_-]{43}$/)
          expect(created.client_secret_hash).not.toBe(clientSecret)
          expect(created.registration_access_token_hash).not.toBe(registrationToken)
          expect(JSON.stringify(created)).not.toContain(clientSecret)
          expect(JSON.stringify(created)).not.toContain(registrationToken)
          expect(yield* clients.get("client-full", NOW)).toEqual(created)
          expect(yield* clients.list()).toEqual([created])
        }),
      ))

    it("round-trips a public client with a jwks_uri and no secret", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const input = newClient({
            client_id: "https://client.example.com/metadata.json",
            token_endpoint_auth_method: "private_key_jwt",
            jwks_uri: "https://client.example.com/jwks.json",
            origin: "metadata-document",
            expires_at: NOW + 300,
          })
          const created = yield* clients.create(input)
          expect(created).toEqual(input)
          expect(yield* clients.get(input.client_id, NOW)).toEqual(input)
        }),
      ))

    it("refuses a second client with the same client_id", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          yield* clients.create(newClient({ client_id: "dup" }))
          const error = yield* failure(clients.create(newClient({ client_id: "dup", client_name: "Other" })))
          expect(error).toEqual(new ClientAlreadyExists({ client_id: "dup" }))
          expect((yield* clients.get("dup", NOW)).client_name).toBeUndefined()
        }),
      ))

    it("answers ClientNotFound for unknown clients on get, update, delete and verification", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const notFound = new ClientNotFound({ client_id: "nobody" })
          expect(yield* failure(clients.get("nobody", NOW))).toEqual(notFound)
          expect(yield* failure(clients.update(newClient({ client_id: "nobody" })))).toEqual(notFound)
          expect(yield* failure(clients.delete("nobody"))).toEqual(notFound)
          expect(yield* failure(clients.verifySecret("nobody", secret(), NOW))).toEqual(notFound)
          expect(yield* failure(clients.verifyRegistrationAccessToken("nobody", secret()))).toEqual(notFound)
        }),
      ))

    it("verifies the client secret: right, wrong, absent, expired, never-expiring", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const s = secret()
          yield* clients.create(newClient({ client_id: "conf", client_secret: s }))
          expect(yield* clients.verifySecret("conf", s, NOW)).toBe(true)
          expect(yield* clients.verifySecret("conf", s, NOW + 10 * 365 * 86_400)).toBe(true)
          expect(yield* clients.verifySecret("conf", secret(), NOW)).toBe(false)
          expect(yield* clients.verifySecret("conf", `${s.slice(0, -1)}${s.endsWith("A") ? "B" : "A"}`, NOW)).toBe(
            false,
          )
          expect(yield* clients.verifySecret("conf", "", NOW)).toBe(false)
          expect(yield* clients.verifySecret("conf", `${s}x`, NOW)).toBe(false)

          yield* clients.create(newClient({ client_id: "public", token_endpoint_auth_method: "none" }))
          expect(yield* clients.verifySecret("public", "", NOW)).toBe(false)
          expect(yield* clients.verifySecret("public", s, NOW)).toBe(false)

          const e = secret()
          yield* clients.create(
            newClient({ client_id: "expiring", client_secret: e, client_secret_expires_at: NOW + 10 }),
          )
          expect(yield* clients.verifySecret("expiring", e, NOW + 9)).toBe(true)
          expect(yield* clients.verifySecret("expiring", e, NOW + 10)).toBe(false)
        }),
      ))

    it("verifies the registration access token", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const t = secret()
          yield* clients.create(newClient({ client_id: "reg", registration_access_token: t }))
          yield* clients.create(newClient({ client_id: "noreg" }))
          expect(yield* clients.verifyRegistrationAccessToken("reg", t)).toBe(true)
          expect(yield* clients.verifyRegistrationAccessToken("reg", secret())).toBe(false)
          expect(yield* clients.verifyRegistrationAccessToken("noreg", t)).toBe(false)
        }),
      ))

    it("updates metadata, keeping, removing or replacing the secret as asked", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const s1 = secret()
          const t1 = secret()
          yield* clients.create(newClient({ client_id: "c", client_secret: s1, registration_access_token: t1 }))

          const kept = yield* clients.update(
            newClient({ client_id: "c", client_name: "Renamed", extension_metadata: { example_tier: "silver" } }),
          )
          expect(kept.client_name).toBe("Renamed")
          expect((yield* clients.get("c", NOW)).client_name).toBe("Renamed")
          expect((yield* clients.get("c", NOW)).extension_metadata).toEqual({ example_tier: "silver" })
          expect(yield* clients.verifySecret("c", s1, NOW)).toBe(true)
          expect(yield* clients.verifyRegistrationAccessToken("c", t1)).toBe(true)

          const s2 = secret()
          yield* clients.update(newClient({ client_id: "c", client_secret: s2 }))
          expect(yield* clients.verifySecret("c", s1, NOW)).toBe(false)
          expect(yield* clients.verifySecret("c", s2, NOW)).toBe(true)
          expect((yield* clients.get("c", NOW)).client_name).toBeUndefined()
          expect((yield* clients.get("c", NOW)).extension_metadata).toBeUndefined()

          const removed = yield* clients.update({
            ...newClient({ client_id: "c" }),
            client_secret: null,
            registration_access_token: null,
          })
          expect(removed.client_secret_hash).toBeUndefined()
          expect(removed.registration_access_token_hash).toBeUndefined()
          expect(yield* clients.verifySecret("c", s2, NOW)).toBe(false)
          expect(yield* clients.verifyRegistrationAccessToken("c", t1)).toBe(false)
        }),
      ))

    it("upserts: creates, then wholly replaces", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const s1 = secret()
          const first = yield* clients.upsert(newClient({ client_id: "static", origin: "static", client_secret: s1 }))
          expect(yield* clients.get("static", NOW)).toEqual(first)
          const s2 = secret()
          yield* clients.upsert(
            newClient({
              client_id: "static",
              origin: "static",
              client_secret: s2,
              redirect_uris: ["http://127.0.0.1/cb"],
            }),
          )
          const after = yield* clients.get("static", NOW)
          expect(after.redirect_uris).toEqual(["http://127.0.0.1/cb"])
          expect(yield* clients.verifySecret("static", s1, NOW)).toBe(false)
          expect(yield* clients.verifySecret("static", s2, NOW)).toBe(true)
          yield* clients.upsert(newClient({ client_id: "static", origin: "static" }))
          expect(yield* clients.verifySecret("static", s2, NOW)).toBe(false)
          expect(yield* clients.list()).toHaveLength(1)
        }),
      ))

    it("deletes a client", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          yield* clients.create(newClient({ client_id: "gone" }))
          yield* clients.delete("gone")
          expect(yield* failure(clients.get("gone", NOW))).toEqual(new ClientNotFound({ client_id: "gone" }))
          expect(yield* clients.list()).toEqual([])
        }),
      ))

    it("lists clients by client_id, optionally of one origin", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          yield* clients.create(newClient({ client_id: "b", origin: "static" }))
          yield* clients.create(newClient({ client_id: "c", origin: "dynamic" }))
          yield* clients.create(newClient({ client_id: "a", origin: "dynamic" }))
          expect((yield* clients.list()).map((c) => c.client_id)).toEqual(["a", "b", "c"])
          expect((yield* clients.list({ origin: "dynamic" })).map((c) => c.client_id)).toEqual(["a", "c"])
          expect((yield* clients.list({ origin: "metadata-document" })).map((c) => c.client_id)).toEqual([])
        }),
      ))

    it("treats a cached client past expires_at as absent and purges it", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          yield* clients.create(newClient({ client_id: "cached", origin: "metadata-document", expires_at: NOW + 60 }))
          yield* clients.create(newClient({ client_id: "registered" }))
          expect((yield* clients.get("cached", NOW + 59)).client_id).toBe("cached")
          expect(yield* failure(clients.get("cached", NOW + 60))).toEqual(new ClientNotFound({ client_id: "cached" }))
          expect(yield* clients.purgeExpired(NOW + 59)).toBe(0)
          expect(yield* clients.purgeExpired(NOW + 60)).toBe(1)
          expect((yield* clients.list()).map((c) => c.client_id)).toEqual(["registered"])
        }),
      ))
  })

  describe(`${name}: GrantStore codes`, () => {
    it("creates a code under a new grant and redeems it once", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode({ nonce: "n-0S6_WzA2Mj" })
          const created = yield* grants.createCode(input)
          const { code: _c, ...fields } = input
          expect(created).toEqual({ ...fields, grant_id: created.grant_id })
          expect(JSON.stringify(created)).not.toContain(input.code)
          expect(yield* grants.getGrant(created.grant_id)).toEqual({
            grant_id: created.grant_id,
            client_id: input.client_id,
            subject: input.subject,
            resource: input.resource,
            scope: input.scope,
            auth_time: input.auth_time,
            created_at: input.issued_at,
          })
          expect(yield* grants.consumeCode(input.code, NOW + 1)).toEqual(created)
        }),
      ))

    it("keeps one live grant per subject, client and resource, its scope the union of every authorization", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const first = yield* grants.createCode(newCode({ scope: "files:read", auth_time: NOW - 50 }))
          const stepUp = yield* grants.createCode(
            newCode({ scope: "files:write files:read", auth_time: NOW - 20, issued_at: NOW + 10 }),
          )
          // An authorization with an older login (another browser) leaves the later auth_time.
          const again = yield* grants.createCode(newCode({ scope: "admin", auth_time: NOW - 40, issued_at: NOW + 20 }))
          expect([stepUp.grant_id, again.grant_id]).toEqual([first.grant_id, first.grant_id])
          // Each code keeps the scope it was issued for; the grant holds them all.
          expect([first.scope, stepUp.scope, again.scope]).toEqual(["files:read", "files:write files:read", "admin"])
          const grant = {
            grant_id: first.grant_id,
            client_id: "client-a",
            subject: "alice",
            resource: "https://mcp.example.com/mcp",
            scope: "files:read files:write admin",
            auth_time: NOW - 20,
            created_at: NOW,
          }
          expect(yield* grants.getGrant(first.grant_id)).toEqual(grant)
          expect(yield* grants.listGrants({ subject: "alice" })).toEqual([{ ...grant, last_used_at: NOW + 20 }])
          // Another subject, client or resource is another grant.
          const others = [
            yield* grants.createCode(newCode({ subject: "bob" })),
            yield* grants.createCode(newCode({ client_id: "client-b" })),
            yield* grants.createCode(newCode({ resource: "https://other.example.com/mcp" })),
          ].map((c) => c.grant_id)
          expect(new Set([first.grant_id, ...others]).size).toBe(4)
          expect(yield* grants.listGrants()).toHaveLength(4)
        }),
      ))

    it("widens the remembered consent to cover the grant's whole scope", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const resource = "https://mcp.example.com/mcp"
          yield* grants.grantConsent({
            subject: "alice",
            client_id: "client-a",
            resource,
            scopes: ["files:read"],
            granted_at: NOW,
          })
          yield* grants.createCode(newCode({ scope: "files:read" }))
          // Already covered: the remembered consent is left as it was.
          expect(yield* grants.getConsent("alice", "client-a", resource)).toEqual(
            Option.some({ subject: "alice", client_id: "client-a", resource, scopes: ["files:read"], granted_at: NOW }),
          )
          // Consent forgotten while the grant lives: the next authorization's consent covers the whole grant again.
          expect(yield* grants.revokeConsent("alice", "client-a")).toBe(1)
          yield* grants.createCode(newCode({ scope: "files:write", issued_at: NOW + 30 }))
          expect(yield* grants.getConsent("alice", "client-a", resource)).toEqual(
            Option.some({
              subject: "alice",
              client_id: "client-a",
              resource,
              scopes: ["files:read", "files:write"],
              granted_at: NOW + 30,
            }),
          )
        }),
      ))

    it("never revives a revoked grant: the next authorization opens a new one with its own scope", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const before = newCode({ scope: "files:read files:write" })
          const revoked = yield* grants.createCode(before)
          yield* grants.revokeGrant(revoked.grant_id, NOW + 5)
          const after = newCode({ scope: "files:read", issued_at: NOW + 10 })
          const fresh = yield* grants.createCode(after)
          expect(fresh.grant_id).not.toBe(revoked.grant_id)
          expect(yield* grants.getGrant(fresh.grant_id)).toEqual({
            grant_id: fresh.grant_id,
            client_id: "client-a",
            subject: "alice",
            resource: "https://mcp.example.com/mcp",
            scope: "files:read",
            auth_time: NOW - 5,
            created_at: NOW + 10,
          })
          expect((yield* grants.getGrant(revoked.grant_id)).revoked_at).toBe(NOW + 5)
          expect((yield* grants.listGrants()).map((g) => g.grant_id)).toEqual([fresh.grant_id])
          // A code issued before the revocation stays revoked; the new one works.
          expect(yield* failure(grants.consumeCode(before.code, NOW + 11))).toEqual(
            new GrantRevoked({ grant_id: revoked.grant_id }),
          )
          expect((yield* grants.consumeCode(after.code, NOW + 11)).grant_id).toBe(fresh.grant_id)
          // The next authorization merges into the new grant, not the revoked one.
          expect((yield* grants.createCode(newCode({ scope: "admin", issued_at: NOW + 12 }))).grant_id).toBe(
            fresh.grant_id,
          )
          expect((yield* grants.getGrant(fresh.grant_id)).scope).toBe("files:read admin")
        }),
      ))

    it("answers CodeNotFound for a code never issued", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          yield* grants.createCode(newCode())
          expect(yield* failure(grants.consumeCode(secret(), NOW))).toEqual(new CodeNotFound())
        }),
      ))

    it("answers CodeAlreadyUsed on replay and revokes everything issued under the grant", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, jti, refreshToken, refresh } = yield* issued
          expect(yield* grants.isAccessTokenRevoked(jti)).toBe(false)

          const replay = yield* failure(grants.consumeCode(input.code, NOW + 2))
          expect(replay).toEqual(new CodeAlreadyUsed({ grant_id: code.grant_id }))
          expect((yield* grants.getGrant(code.grant_id)).revoked_at).toBe(NOW + 2)
          expect(yield* grants.isAccessTokenRevoked(jti)).toBe(true)
          expect(yield* failure(grants.getRefresh(refreshToken, NOW + 3))).toEqual(
            new RefreshTokenRevoked({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
          expect(
            yield* failure(grants.recordAccessToken({ grant_id: code.grant_id, jti: secret(), expires_at: NOW + 600 })),
          ).toEqual(new GrantRevoked({ grant_id: code.grant_id }))
          expect(
            yield* failure(
              grants.createRefresh({ grant_id: code.grant_id, token: secret(), scope: "", issued_at: NOW }),
            ),
          ).toEqual(new GrantRevoked({ grant_id: code.grant_id }))
          // A third presentation is still a replay, and the first revocation time stands.
          expect(yield* failure(grants.consumeCode(input.code, NOW + 9))).toEqual(replay)
          expect((yield* grants.getGrant(code.grant_id)).revoked_at).toBe(NOW + 2)
        }),
      ))

    it("answers CodeExpired from expires_at on, and a later valid presentation is not possible", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const early = newCode({ expires_at: NOW + 60 })
          const created = yield* grants.createCode(early)
          expect(yield* failure(grants.consumeCode(early.code, NOW + 60))).toEqual(
            new CodeExpired({ grant_id: created.grant_id }),
          )
          expect(yield* failure(grants.consumeCode(early.code, NOW + 61))).toEqual(
            new CodeExpired({ grant_id: created.grant_id }),
          )
          const onTime = newCode({ expires_at: NOW + 60 })
          yield* grants.createCode(onTime)
          expect((yield* grants.consumeCode(onTime.code, NOW + 59)).expires_at).toBe(NOW + 60)
        }),
      ))

    it("answers GrantRevoked for an unused code whose grant was revoked", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode()
          const created = yield* grants.createCode(input)
          yield* grants.revokeGrant(created.grant_id, NOW + 1)
          expect(yield* failure(grants.consumeCode(input.code, NOW + 2))).toEqual(
            new GrantRevoked({ grant_id: created.grant_id }),
          )
        }),
      ))

    it("redeems exactly once under 50 concurrent redemptions", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode()
          const created = yield* grants.createCode(input)
          const results = yield* Effect.all(
            Array.from({ length: 50 }, () => Effect.result(grants.consumeCode(input.code, NOW + 1))),
            { concurrency: "unbounded" },
          )
          const wins = results.filter(Result.isSuccess)
          expect(wins).toHaveLength(1)
          expect(wins[0]?.success).toEqual(created)
          const losses = results.filter(Result.isFailure).map((r) => r.failure)
          expect(losses).toEqual(Array.from({ length: 49 }, () => new CodeAlreadyUsed({ grant_id: created.grant_id })))
        }),
      ))
  })

  describe(`${name}: GrantStore grants and access tokens`, () => {
    it("answers GrantNotFound for unknown grants", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const notFound = new GrantNotFound({ grant_id: "missing" })
          expect(yield* failure(grants.getGrant("missing"))).toEqual(notFound)
          expect(yield* failure(grants.revokeGrant("missing", NOW))).toEqual(notFound)
          expect(
            yield* failure(grants.recordAccessToken({ grant_id: "missing", jti: "j", expires_at: NOW + 60 })),
          ).toEqual(notFound)
          expect(
            yield* failure(grants.createRefresh({ grant_id: "missing", token: secret(), scope: "", issued_at: NOW })),
          ).toEqual(notFound)
        }),
      ))

    it("revokes a grant: its access tokens, its refresh family, its unused codes; idempotently", () =>
      run(
        Effect.gen(function* () {
          const { grants, code, jti, refreshToken, refresh } = yield* issued
          const otherJti = secret()
          yield* grants.recordAccessToken({ grant_id: code.grant_id, jti: otherJti, expires_at: NOW + 900 })
          const unrelated = yield* issuedAs({ subject: "bob" })

          yield* grants.revokeGrant(code.grant_id, NOW + 5)
          yield* grants.revokeGrant(code.grant_id, NOW + 7)
          expect((yield* grants.getGrant(code.grant_id)).revoked_at).toBe(NOW + 5)
          expect(yield* grants.isAccessTokenRevoked(jti)).toBe(true)
          expect(yield* grants.isAccessTokenRevoked(otherJti)).toBe(true)
          expect(yield* failure(grants.getRefresh(refreshToken, NOW + 6))).toEqual(
            new RefreshTokenRevoked({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
          expect(yield* grants.isAccessTokenRevoked(unrelated.jti)).toBe(false)
          expect((yield* grants.getRefresh(unrelated.refreshToken, NOW + 6)).grant_id).toBe(unrelated.code.grant_id)
        }),
      ))

    it("finds the live grant an access token is recorded under, with the grant's whole scope", () =>
      run(
        Effect.gen(function* () {
          const { grants, code, jti } = yield* issued
          const grant = yield* grants.getGrant(code.grant_id)
          expect(yield* grants.accessTokenGrant(jti)).toEqual(
            Option.some({ grant_id: code.grant_id, scope: grant.scope, resource: grant.resource }),
          )
          // A jti recorded under no grant (client credentials), or never issued; a jti that begins with "-".
          expect(yield* grants.accessTokenGrant("-unknown-jti")).toEqual(Option.none())
          const unrelated = yield* issuedAs({ subject: "bob" })
          yield* grants.revokeGrant(code.grant_id, NOW + 5)
          expect(yield* grants.accessTokenGrant(jti)).toEqual(Option.none())
          expect(Option.map(yield* grants.accessTokenGrant(unrelated.jti), (g) => g.grant_id)).toEqual(
            Option.some(unrelated.code.grant_id),
          )
        }),
      ))

    it("lists grants not revoked, by subject and by client, with when each was last used", () =>
      run(
        Effect.gen(function* () {
          const { grants, code } = yield* issued
          const bob = newCode({ subject: "bob", client_id: "client-b", issued_at: NOW + 10 })
          const bobCode = yield* grants.createCode(bob)
          const revoked = yield* grants.createCode(
            newCode({ resource: "https://other.example.com/mcp", issued_at: NOW + 20 }),
          )
          yield* grants.revokeGrant(revoked.grant_id, NOW + 21)
          const later = yield* grants.createRefresh({
            grant_id: code.grant_id,
            token: secret(),
            scope: "files:read",
            issued_at: NOW + 30,
          })
          expect(later.issued_at).toBe(NOW + 30)
          const all = yield* grants.listGrants()
          expect(all.map((g) => [g.grant_id, g.subject, g.client_id, g.last_used_at])).toEqual([
            [code.grant_id, "alice", "client-a", NOW + 30],
            [bobCode.grant_id, "bob", "client-b", bobCode.issued_at],
          ])
          expect((yield* grants.listGrants({ subject: "bob" })).map((g) => g.grant_id)).toEqual([bobCode.grant_id])
          expect((yield* grants.listGrants({ client_id: "client-a" })).map((g) => g.grant_id)).toEqual([code.grant_id])
          expect(yield* grants.listGrants({ subject: "bob", client_id: "client-a" })).toEqual([])
        }),
      ))

    it("revokes single access tokens by jti until they expire", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          expect(yield* grants.isAccessTokenRevoked("unknown-jti")).toBe(false)
          yield* grants.revokeAccessToken("jti-1", NOW + 60)
          yield* grants.revokeAccessToken("jti-1", NOW + 60)
          expect(yield* grants.isAccessTokenRevoked("jti-1")).toBe(true)
          expect(yield* grants.isAccessTokenRevoked("jti-2")).toBe(false)
          yield* grants.purgeExpired(NOW + 59)
          expect(yield* grants.isAccessTokenRevoked("jti-1")).toBe(true)
          yield* grants.purgeExpired(NOW + 60)
          expect(yield* grants.isAccessTokenRevoked("jti-1")).toBe(false)
        }),
      ))
  })

  describe(`${name}: GrantStore refresh tokens`, () => {
    it("starts a family under the grant and looks the token up", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          expect(refresh).toEqual({
            family_id: refresh.family_id,
            grant_id: code.grant_id,
            client_id: input.client_id,
            subject: input.subject,
            resource: input.resource,
            scope: input.scope,
            issued_at: NOW + 1,
            expires_at: NOW + 86_400,
          })
          expect(JSON.stringify(refresh)).not.toContain(refreshToken)
          expect(yield* grants.getRefresh(refreshToken, NOW + 2)).toEqual(refresh)
          // Looking up does not rotate: the token keeps working.
          expect(yield* grants.getRefresh(refreshToken, NOW + 3)).toEqual(refresh)
        }),
      ))

    it("keeps a refresh token without expiry valid", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode()
          const code = yield* grants.createCode(input)
          const token = secret()
          const created = yield* grants.createRefresh({
            grant_id: code.grant_id,
            token,
            scope: "files:read",
            issued_at: NOW,
          })
          expect(created.expires_at).toBeUndefined()
          expect(yield* grants.getRefresh(token, NOW + 10 * 365 * 86_400)).toEqual(created)
        }),
      ))

    it("rotates: the successor works, narrowed scope, same family", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, refreshToken, refresh } = yield* issued
          const next = secret()
          const rotated = yield* grants.rotate({
            token: refreshToken,
            new_token: next,
            client_id: input.client_id,
            scope: "files:read",
            now: NOW + 10,
            expires_at: NOW + 90_000,
          })
          expect(rotated).toEqual({
            ...refresh,
            scope: "files:read",
            issued_at: NOW + 10,
            expires_at: NOW + 90_000,
          })
          expect(yield* grants.getRefresh(next, NOW + 11)).toEqual(rotated)
          const third = secret()
          const again = yield* grants.rotate({
            token: next,
            new_token: third,
            client_id: input.client_id,
            scope: "files:read",
            now: NOW + 12,
          })
          expect(again.family_id).toBe(refresh.family_id)
          expect(again.expires_at).toBeUndefined()
        }),
      ))

    it("detects reuse of a rotated-out token (lookup or rotate) and revokes the family and grant", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, jti, refreshToken, refresh } = yield* issued
          const next = secret()
          yield* grants.rotate({
            token: refreshToken,
            new_token: next,
            client_id: input.client_id,
            scope: input.scope,
            now: NOW + 10,
          })
          const reused = new RefreshTokenReused({ family_id: refresh.family_id, grant_id: code.grant_id })
          expect(yield* failure(grants.getRefresh(refreshToken, NOW + 20))).toEqual(reused)
          const revoked = new RefreshTokenRevoked({ family_id: refresh.family_id, grant_id: code.grant_id })
          expect(yield* failure(grants.getRefresh(next, NOW + 21))).toEqual(revoked)
          expect(
            yield* failure(
              grants.rotate({ token: next, new_token: secret(), client_id: input.client_id, scope: "", now: NOW + 22 }),
            ),
          ).toEqual(revoked)
          expect((yield* grants.getGrant(code.grant_id)).revoked_at).toBe(NOW + 20)
          expect(yield* grants.isAccessTokenRevoked(jti)).toBe(true)
        }),
      ))

    it("detects reuse when the rotated-out token is presented to rotate", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          const rotation = { token: refreshToken, client_id: input.client_id, scope: input.scope }
          yield* grants.rotate({ ...rotation, new_token: secret(), now: NOW + 10 })
          expect(yield* failure(grants.rotate({ ...rotation, new_token: secret(), now: NOW + 11 }))).toEqual(
            new RefreshTokenReused({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
        }),
      ))

    it("refuses a token presented by another client without changing anything", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, refreshToken, refresh } = yield* issued
          expect(
            yield* failure(
              grants.rotate({
                token: refreshToken,
                new_token: secret(),
                client_id: "client-b",
                scope: input.scope,
                now: NOW + 10,
              }),
            ),
          ).toEqual(new RefreshTokenClientMismatch({ family_id: refresh.family_id, client_id: "client-b" }))
          expect(yield* grants.getRefresh(refreshToken, NOW + 11)).toEqual(refresh)
        }),
      ))

    it("answers RefreshTokenNotFound and RefreshTokenExpired", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, refreshToken, refresh } = yield* issued
          expect(yield* failure(grants.getRefresh(secret(), NOW))).toEqual(new RefreshTokenNotFound())
          expect(
            yield* failure(
              grants.rotate({ token: secret(), new_token: secret(), client_id: input.client_id, scope: "", now: NOW }),
            ),
          ).toEqual(new RefreshTokenNotFound())
          const expired = new RefreshTokenExpired({ family_id: refresh.family_id })
          expect(yield* failure(grants.getRefresh(refreshToken, NOW + 86_400))).toEqual(expired)
          expect(
            yield* failure(
              grants.rotate({
                token: refreshToken,
                new_token: secret(),
                client_id: input.client_id,
                scope: input.scope,
                now: NOW + 86_400,
              }),
            ),
          ).toEqual(expired)
          expect((yield* grants.getRefresh(refreshToken, NOW + 86_399)).family_id).toBe(refresh.family_id)
        }),
      ))

    it("revokes a family by id", () =>
      run(
        Effect.gen(function* () {
          const { grants, code, refreshToken, refresh } = yield* issued
          expect(yield* grants.revokeFamily(refresh.family_id, NOW + 5)).toBe(true)
          expect(yield* grants.revokeFamily(refresh.family_id, NOW + 6)).toBe(true)
          expect(yield* grants.revokeFamily("no-such-family", NOW + 5)).toBe(false)
          expect(yield* failure(grants.getRefresh(refreshToken, NOW + 6))).toEqual(
            new RefreshTokenRevoked({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
        }),
      ))

    it("finds a refresh token without side effects and reports whether it is active", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          expect(yield* grants.findRefresh(secret(), NOW + 5)).toEqual(Option.none())
          // The grant's auth_time comes with it (the refreshed access token's auth_time).
          expect(yield* grants.findRefresh(refreshToken, NOW + 5)).toEqual(
            Option.some({ ...refresh, active: true, auth_time: input.auth_time }),
          )
          expect(Option.getOrThrow(yield* grants.findRefresh(refreshToken, NOW + 86_401)).active).toBe(false)
          const next = secret()
          yield* grants.rotate({
            token: refreshToken,
            new_token: next,
            client_id: input.client_id,
            scope: input.scope,
            now: NOW + 10,
          })
          // A rotated-out token is inactive, and looking it up is not reuse: the grant stays live.
          expect(Option.getOrThrow(yield* grants.findRefresh(refreshToken, NOW + 11)).active).toBe(false)
          expect((yield* grants.getGrant(code.grant_id)).revoked_at).toBeUndefined()
          expect(Option.getOrThrow(yield* grants.findRefresh(next, NOW + 11)).active).toBe(true)
          yield* grants.revokeGrant(code.grant_id, NOW + 12)
          const revoked = Option.getOrThrow(yield* grants.findRefresh(next, NOW + 13))
          expect(revoked.active).toBe(false)
          expect(revoked.client_id).toBe(input.client_id)
        }),
      ))

    it("revokes the grant behind a refresh token (RFC 7009), and ignores unknown tokens", () =>
      run(
        Effect.gen(function* () {
          const { grants, code, jti, refreshToken } = yield* issued
          expect(yield* grants.revokeByRefreshToken(secret(), NOW + 5)).toEqual(Option.none())
          expect(yield* grants.revokeByRefreshToken(refreshToken, NOW + 5)).toEqual(Option.some(code.grant_id))
          expect((yield* grants.getGrant(code.grant_id)).revoked_at).toBe(NOW + 5)
          expect(yield* grants.isAccessTokenRevoked(jti)).toBe(true)
        }),
      ))

    it("rotates exactly once under 50 concurrent rotations and revokes the family for the losers", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          const successors = Array.from({ length: 50 }, () => secret())
          const results = yield* Effect.all(
            successors.map((next) =>
              Effect.result(
                grants.rotate({
                  token: refreshToken,
                  new_token: next,
                  client_id: input.client_id,
                  scope: input.scope,
                  now: NOW + 10,
                }),
              ),
            ),
            { concurrency: "unbounded" },
          )
          const winners = results.flatMap((r, i) => (Result.isSuccess(r) ? [successors[i] ?? ""] : []))
          expect(winners).toHaveLength(1)
          const losses = results.filter(Result.isFailure).map((r) => r.failure)
          expect(losses).toEqual(
            Array.from(
              { length: 49 },
              () => new RefreshTokenReused({ family_id: refresh.family_id, grant_id: code.grant_id }),
            ),
          )
          expect(yield* failure(grants.getRefresh(winners[0] ?? "", NOW + 11))).toEqual(
            new RefreshTokenRevoked({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
        }),
      ))
  })

  describe(`${name}: GrantStore token requests in one transaction`, () => {
    const access = () => ({ jti: secret(), expires_at: NOW + 600 })
    /** A rotating refresh by `clientId` at `now`, with a fresh access token and the given reuse interval. */
    const rotateAs = (
      grants: GrantStore["Service"],
      clientId: string,
      token: string,
      now: number,
      reuse_interval = 60,
    ) => grants.refresh({ token, client_id: clientId, now, access_token: access(), rotation: { reuse_interval } })
    const isRevoked = (grants: GrantStore["Service"], jti: string) => grants.isAccessTokenRevoked(jti)

    it("finds a code without consuming it, and remembers whether redirect_uri was sent", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const sent = newCode({ redirect_uri_sent: true })
          const created = yield* grants.createCode(sent)
          expect(created.redirect_uri_sent).toBe(true)
          expect(yield* grants.findCode(sent.code)).toEqual(Option.some(created))
          const omitted = newCode()
          const plain = yield* grants.createCode(omitted)
          expect(plain.redirect_uri_sent).toBeUndefined()
          expect(yield* grants.findCode(omitted.code)).toEqual(Option.some(plain))
          expect(yield* grants.findCode(secret())).toEqual(Option.none())
          expect(yield* grants.consumeCode(sent.code, NOW + 1)).toEqual(created)
        }),
      ))

    it("keeps a code's confirmation and a family's through redemption, lookup and rotation (RFC 9449 §5, §10)", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const jkt = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
          const bound = newCode({ confirmation: jkt })
          const created = yield* grants.createCode(bound)
          expect(created.confirmation).toBe(jkt)
          expect(yield* grants.findCode(bound.code)).toEqual(Option.some(created))
          const refreshToken = secret()
          const redeemed = yield* grants.redeemCode({
            code: bound.code,
            now: NOW + 1,
            access_token: access(),
            refresh: { token: refreshToken, expires_at: NOW + 86_400, confirmation: jkt },
          })
          expect(redeemed.code.confirmation).toBe(jkt)
          expect(redeemed.refresh?.confirmation).toBe(jkt)
          const found = yield* grants.findRefresh(refreshToken, NOW + 2)
          expect(Option.map(found, (t) => t.confirmation)).toEqual(Option.some(jkt))
          const rotated = yield* rotateAs(grants, bound.client_id, refreshToken, NOW + 3)
          expect(rotated.token.confirmation).toBe(jkt)
          expect((yield* grants.getRefresh(rotated.refresh_token ?? "", NOW + 4)).confirmation).toBe(jkt)

          const plain = newCode()
          expect((yield* grants.createCode(plain)).confirmation).toBeUndefined()
          const unbound = secret()
          const opened = yield* grants.redeemCode({
            code: plain.code,
            now: NOW + 1,
            access_token: access(),
            refresh: { token: unbound },
          })
          expect(opened.refresh?.confirmation).toBeUndefined()
          expect((yield* grants.getRefresh(unbound, NOW + 2)).confirmation).toBeUndefined()
        }),
      ))

    it("redeems a code, records the access token and opens the family together; a replay revokes all of it", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode()
          const created = yield* grants.createCode(input)
          const token = access()
          const refreshToken = secret()
          const redeemed = yield* grants.redeemCode({
            code: input.code,
            now: NOW + 1,
            access_token: token,
            refresh: { token: refreshToken, expires_at: NOW + 86_400 },
          })
          expect(redeemed.code).toEqual(created)
          expect(redeemed.refresh).toEqual({
            family_id: redeemed.refresh?.family_id,
            grant_id: created.grant_id,
            client_id: input.client_id,
            subject: input.subject,
            resource: input.resource,
            scope: input.scope,
            issued_at: NOW + 1,
            expires_at: NOW + 86_400,
          })
          expect((yield* grants.getRefresh(refreshToken, NOW + 2)).family_id).toBe(redeemed.refresh?.family_id)
          expect(yield* isRevoked(grants, token.jti)).toBe(false)
          expect(yield* failure(grants.redeemCode({ code: input.code, now: NOW + 2, access_token: access() }))).toEqual(
            new CodeAlreadyUsed({ grant_id: created.grant_id }),
          )
          expect(yield* isRevoked(grants, token.jti)).toBe(true)
          expect(yield* failure(grants.getRefresh(refreshToken, NOW + 3))).toEqual(
            new RefreshTokenRevoked({ family_id: redeemed.refresh?.family_id ?? "", grant_id: created.grant_id }),
          )
        }),
      ))

    it("redeems without a refresh token, and refuses unknown, expired and revoked codes", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode()
          const created = yield* grants.createCode(input)
          expect(yield* grants.redeemCode({ code: input.code, now: NOW + 1, access_token: access() })).toEqual({
            code: created,
          })
          expect(yield* failure(grants.redeemCode({ code: secret(), now: NOW, access_token: access() }))).toEqual(
            new CodeNotFound(),
          )
          const late = newCode()
          const lateCode = yield* grants.createCode(late)
          expect(yield* failure(grants.redeemCode({ code: late.code, now: NOW + 60, access_token: access() }))).toEqual(
            new CodeExpired({ grant_id: lateCode.grant_id }),
          )
          const revoked = newCode()
          const revokedCode = yield* grants.createCode(revoked)
          yield* grants.revokeGrant(revokedCode.grant_id, NOW)
          expect(
            yield* failure(grants.redeemCode({ code: revoked.code, now: NOW + 1, access_token: access() })),
          ).toEqual(new GrantRevoked({ grant_id: revokedCode.grant_id }))
        }),
      ))

    it("keeps the families of earlier authorizations working, each with its scope and auth_time; revoking the grant revokes them all", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const first = newCode({ scope: "files:read", auth_time: NOW - 50 })
          yield* grants.createCode(first)
          const firstAccess = access()
          const firstToken = secret()
          const a = yield* grants.redeemCode({
            code: first.code,
            now: NOW + 1,
            access_token: firstAccess,
            refresh: { token: firstToken, expires_at: NOW + 86_400 },
          })
          const stepUp = newCode({ scope: "files:read files:write", auth_time: NOW + 5, issued_at: NOW + 10 })
          yield* grants.createCode(stepUp)
          const stepUpAccess = access()
          const stepUpToken = secret()
          const b = yield* grants.redeemCode({
            code: stepUp.code,
            now: NOW + 11,
            access_token: stepUpAccess,
            refresh: { token: stepUpToken, expires_at: NOW + 86_400 },
          })
          const grantId = a.code.grant_id
          expect([b.code.grant_id, a.refresh?.grant_id, b.refresh?.grant_id]).toEqual([grantId, grantId, grantId])
          expect(b.refresh?.family_id).not.toBe(a.refresh?.family_id)
          // The earlier family refreshes on with its own scope and the auth_time of its own login.
          expect(yield* grants.findRefresh(firstToken, NOW + 12)).toEqual(
            Option.some({ ...a.refresh, active: true, auth_time: NOW - 50 }),
          )
          expect(yield* grants.findRefresh(stepUpToken, NOW + 12)).toEqual(
            Option.some({ ...b.refresh, active: true, auth_time: NOW + 5 }),
          )
          const rotated = yield* rotateAs(grants, "client-a", firstToken, NOW + 20)
          expect([rotated.token.family_id, rotated.token.scope]).toEqual([a.refresh?.family_id, "files:read"])
          expect(
            Option.map(yield* grants.findRefresh(rotated.refresh_token ?? "", NOW + 21), (t) => t.auth_time),
          ).toEqual(Option.some(NOW - 50))
          expect((yield* grants.getGrant(grantId)).scope).toBe("files:read files:write")

          yield* grants.revokeGrant(grantId, NOW + 30)
          expect(yield* failure(grants.getRefresh(rotated.refresh_token ?? "", NOW + 31))).toEqual(
            new RefreshTokenRevoked({ family_id: a.refresh?.family_id ?? "", grant_id: grantId }),
          )
          expect(yield* failure(grants.getRefresh(stepUpToken, NOW + 31))).toEqual(
            new RefreshTokenRevoked({ family_id: b.refresh?.family_id ?? "", grant_id: grantId }),
          )
          expect([yield* isRevoked(grants, firstAccess.jti), yield* isRevoked(grants, stepUpAccess.jti)]).toEqual([
            true,
            true,
          ])
        }),
      ))

    it("converges concurrent authorizations and redemptions of one subject, client and resource on one grant", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const scopes = Array.from({ length: 20 }, (_, i) => `tool:${i}`)
          const flows = yield* Effect.all(
            scopes.map((scope, i) =>
              Effect.gen(function* () {
                const input = newCode({ scope, issued_at: NOW + i })
                const created = yield* grants.createCode(input)
                const redeemed = yield* grants.redeemCode({
                  code: input.code,
                  now: NOW + 30,
                  access_token: access(),
                  refresh: { token: secret() },
                })
                return [created.grant_id, redeemed.refresh?.grant_id]
              }),
            ),
            { concurrency: "unbounded" },
          )
          const listed = yield* grants.listGrants()
          expect(listed).toHaveLength(1)
          const grant = listed[0]
          expect(flows.flat()).toEqual(Array.from({ length: 40 }, () => grant?.grant_id))
          expect([...Scope.parse(grant?.scope)].sort()).toEqual([...scopes].sort())
          expect(
            Option.map(yield* grants.getConsent("alice", "client-a", "https://mcp.example.com/mcp"), (c) => c.scopes),
          ).toEqual(Option.some([...scopes].sort()))
        }),
      ))

    it("keeps a dynamically registered client from its first redemption on", () =>
      run(
        Effect.gen(function* () {
          const clients = yield* ClientStore
          const grants = yield* GrantStore
          const unused = newClient({ client_id: "dyn-unused", expires_at: NOW + 100 })
          const used = newClient({ client_id: "dyn-used", expires_at: NOW + 100 })
          const cached = newClient({
            client_id: "https://app.example.com/cimd",
            origin: "metadata-document",
            expires_at: NOW + 100,
          })
          for (const c of [unused, used, cached]) yield* clients.create(c)
          for (const clientId of ["dyn-used", "https://app.example.com/cimd"]) {
            const input = newCode({ client_id: clientId })
            yield* grants.createCode(input)
            yield* grants.redeemCode({ code: input.code, now: NOW + 1, access_token: access() })
          }
          expect((yield* clients.get("dyn-used", NOW + 1)).expires_at).toBeUndefined()
          expect((yield* clients.get("dyn-unused", NOW + 1)).expires_at).toBe(NOW + 100)
          // A cached metadata document still expires as its HTTP caching says.
          expect((yield* clients.get("https://app.example.com/cimd", NOW + 1)).expires_at).toBe(NOW + 100)
          expect(yield* clients.purgeExpired(NOW + 100)).toBe(2)
          expect((yield* clients.get("dyn-used", NOW + 200)).client_id).toBe("dyn-used")
          expect(yield* failure(clients.get("dyn-unused", NOW + 1))).toEqual(
            new ClientNotFound({ client_id: "dyn-unused" }),
          )
        }),
      ))

    it("redeems exactly once under 50 concurrent redemptions, recording only the winner's access token", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode()
          const created = yield* grants.createCode(input)
          const tokens = Array.from({ length: 50 }, access)
          const results = yield* Effect.all(
            tokens.map((token) =>
              Effect.result(
                grants.redeemCode({
                  code: input.code,
                  now: NOW + 1,
                  access_token: token,
                  refresh: { token: secret() },
                }),
              ),
            ),
            { concurrency: "unbounded" },
          )
          expect(results.filter(Result.isSuccess)).toHaveLength(1)
          expect(results.filter(Result.isFailure).map((r) => r.failure)).toEqual(
            Array.from({ length: 49 }, () => new CodeAlreadyUsed({ grant_id: created.grant_id })),
          )
        }),
      ))

    it("refreshes: records the access token and rotates to a successor that works", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          const token = access()
          const refreshed = yield* grants.refresh({
            token: refreshToken,
            client_id: input.client_id,
            now: NOW + 10,
            access_token: token,
            rotation: { expires_at: NOW + 1000, reuse_interval: 60 },
          })
          expect(refreshed.replayed).toBe(false)
          expect(refreshed.refresh_token).toMatch(/^[A-Za-z0-9_-]{43}$/)
          expect(refreshed.refresh_token).not.toBe(refreshToken)
          expect(refreshed.token).toEqual({
            ...refresh,
            issued_at: NOW + 10,
            expires_at: NOW + 1000,
          })
          expect(yield* grants.getRefresh(refreshed.refresh_token ?? "", NOW + 11)).toEqual(refreshed.token)
          // The access token was recorded under the grant: revoking the grant revokes it.
          yield* grants.revokeGrant(code.grant_id, NOW + 12)
          expect(yield* isRevoked(grants, token.jti)).toBe(true)
        }),
      ))

    it("refreshes without rotation (the token stays), recording the access token", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, refreshToken, refresh } = yield* issued
          const refreshed = yield* grants.refresh({
            token: refreshToken,
            client_id: input.client_id,
            now: NOW + 10,
            access_token: access(),
          })
          expect(refreshed).toEqual({ token: refresh, replayed: false })
          expect(yield* grants.getRefresh(refreshToken, NOW + 11)).toEqual(refresh)
        }),
      ))

    it("answers a rotated-out token within the reuse interval with the same successor; after it, reuse revokes", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          const rotate = (token: string, now: number) => rotateAs(grants, input.client_id, token, now)
          const first = yield* rotate(refreshToken, NOW + 10)
          const retry = yield* rotate(refreshToken, NOW + 70)
          expect(retry).toEqual({ ...first, replayed: true })
          const late = yield* failure(rotate(refreshToken, NOW + 71))
          expect(late).toEqual(new RefreshTokenReused({ family_id: refresh.family_id, grant_id: code.grant_id }))
          expect(yield* failure(grants.getRefresh(first.refresh_token ?? "", NOW + 72))).toEqual(
            new RefreshTokenRevoked({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
        }),
      ))

    it("treats a token two rotations old as reuse even within the interval, and a zero interval as no grace", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          const rotate = (token: string, now: number, reuse = 60) =>
            rotateAs(grants, input.client_id, token, now, reuse)
          const second = yield* rotate(refreshToken, NOW + 10)
          yield* rotate(second.refresh_token ?? "", NOW + 11)
          expect(yield* failure(rotate(refreshToken, NOW + 12))).toEqual(
            new RefreshTokenReused({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
          const other = yield* issued
          const next = yield* rotateAs(grants, other.input.client_id, other.refreshToken, NOW + 10, 0)
          expect(next.refresh_token).toBeDefined()
          expect(yield* failure(rotate(other.refreshToken, NOW + 10, 0))).toEqual(
            new RefreshTokenReused({ family_id: other.refresh.family_id, grant_id: other.code.grant_id }),
          )
        }),
      ))

    it("refuses another client's token, also within the interval, and expired, revoked and unknown tokens", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, code, refreshToken, refresh } = yield* issued
          const attempt = (token: string, clientId: string, now: number) =>
            failure(rotateAs(grants, clientId, token, now))
          expect(yield* attempt(refreshToken, "client-b", NOW + 5)).toEqual(
            new RefreshTokenClientMismatch({ family_id: refresh.family_id, client_id: "client-b" }),
          )
          expect(yield* attempt(secret(), input.client_id, NOW + 5)).toEqual(new RefreshTokenNotFound())
          expect(yield* attempt(refreshToken, input.client_id, NOW + 86_401)).toEqual(
            new RefreshTokenExpired({ family_id: refresh.family_id }),
          )
          yield* rotateAs(grants, input.client_id, refreshToken, NOW + 10)
          expect(yield* attempt(refreshToken, "client-b", NOW + 11)).toEqual(
            new RefreshTokenReused({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
          expect(yield* attempt(refreshToken, input.client_id, NOW + 12)).toEqual(
            new RefreshTokenReused({ family_id: refresh.family_id, grant_id: code.grant_id }),
          )
        }),
      ))

    it("converges 50 concurrent refreshes of one token on one successor, all answered", () =>
      run(
        Effect.gen(function* () {
          const { grants, input, refreshToken } = yield* issued
          const results = yield* Effect.all(
            Array.from({ length: 50 }, () => rotateAs(grants, input.client_id, refreshToken, NOW + 10)),
            { concurrency: "unbounded" },
          )
          expect(new Set(results.map((r) => r.refresh_token)).size).toBe(1)
          expect(results.filter((r) => !r.replayed)).toHaveLength(1)
          const successor = results[0]?.refresh_token ?? ""
          expect((yield* grants.findRefresh(successor, NOW + 11)).pipe(Option.map((t) => t.active))).toEqual(
            Option.some(true),
          )
        }),
      ))
  })

  describe(`${name}: GrantStore consents`, () => {
    const consent = (scopes: ReadonlyArray<string>, at = NOW, overrides = {}) => ({
      subject: "alice",
      client_id: "client-a",
      resource: "https://mcp.example.com/mcp",
      scopes,
      granted_at: at,
      ...overrides,
    })

    it("remembers, merges, checks coverage and lists", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          expect(yield* grants.getConsent("alice", "client-a", "https://mcp.example.com/mcp")).toEqual(Option.none())
          expect(yield* grants.consentCovers("alice", "client-a", "https://mcp.example.com/mcp", [])).toBe(false)

          const first = yield* grants.grantConsent(consent(["files:write", "files:read", "files:read"]))
          expect(first).toEqual(consent(["files:read", "files:write"]))
          const merged = yield* grants.grantConsent(consent(["admin", "files:read"], NOW + 10))
          expect(merged).toEqual(consent(["admin", "files:read", "files:write"], NOW + 10))
          expect(yield* grants.getConsent("alice", "client-a", "https://mcp.example.com/mcp")).toEqual(
            Option.some(merged),
          )

          const covers = (scopes: ReadonlyArray<string>) =>
            grants.consentCovers("alice", "client-a", "https://mcp.example.com/mcp", scopes)
          expect(yield* covers(["files:read"])).toBe(true)
          expect(yield* covers(["files:read", "admin"])).toBe(true)
          expect(yield* covers([])).toBe(true)
          expect(yield* covers(["files:delete"])).toBe(false)
          expect(yield* covers(["files:read", "files:delete"])).toBe(false)
          expect(yield* grants.consentCovers("alice", "client-b", "https://mcp.example.com/mcp", ["files:read"])).toBe(
            false,
          )
          expect(yield* grants.consentCovers("bob", "client-a", "https://mcp.example.com/mcp", ["files:read"])).toBe(
            false,
          )
          expect(
            yield* grants.consentCovers("alice", "client-a", "https://other.example.com/mcp", ["files:read"]),
          ).toBe(false)

          const other = yield* grants.grantConsent(consent(["x"], NOW, { resource: "https://a.example.com/mcp" }))
          const otherClient = yield* grants.grantConsent(consent(["y"], NOW, { client_id: "client-0" }))
          yield* grants.grantConsent(consent(["z"], NOW, { subject: "bob" }))
          expect(yield* grants.listConsents("alice")).toEqual([otherClient, other, merged])
          expect(yield* grants.listConsents("carol")).toEqual([])
        }),
      ))

    it("revokes consent for one resource or for all of a client's resources", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          yield* grants.grantConsent(consent(["a"]))
          yield* grants.grantConsent(consent(["a"], NOW, { resource: "https://b.example.com/mcp" }))
          yield* grants.grantConsent(consent(["a"], NOW, { resource: "https://c.example.com/mcp" }))
          yield* grants.grantConsent(consent(["a"], NOW, { client_id: "client-b" }))

          expect(yield* grants.revokeConsent("alice", "client-a", "https://b.example.com/mcp")).toBe(1)
          expect(yield* grants.revokeConsent("alice", "client-a", "https://b.example.com/mcp")).toBe(0)
          expect(yield* grants.getConsent("alice", "client-a", "https://b.example.com/mcp")).toEqual(Option.none())
          expect(yield* grants.revokeConsent("alice", "client-a")).toBe(2)
          expect((yield* grants.listConsents("alice")).map((c) => c.client_id)).toEqual(["client-b"])
        }),
      ))
  })

  describe(`${name}: GrantStore client assertion jti cache`, () => {
    it("accepts a jti once per client until it expires", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          expect(yield* grants.rememberJti("client-a", "jti-1", NOW + 60)).toBe(true)
          expect(yield* grants.rememberJti("client-a", "jti-1", NOW + 60)).toBe(false)
          expect(yield* grants.rememberJti("client-b", "jti-1", NOW + 60)).toBe(true)
          expect(yield* grants.purgeExpired(NOW + 59)).toBe(0)
          expect(yield* grants.rememberJti("client-a", "jti-1", NOW + 60)).toBe(false)
          expect(yield* grants.purgeExpired(NOW + 60)).toBe(2)
          expect(yield* grants.rememberJti("client-a", "jti-1", NOW + 120)).toBe(true)
        }),
      ))

    it("lets exactly one of 50 concurrent uses of a jti through", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const results = yield* Effect.all(
            Array.from({ length: 50 }, () => grants.rememberJti("client-a", "jti-race", NOW + 60)),
            { concurrency: "unbounded" },
          )
          expect(results.filter((fresh) => fresh)).toHaveLength(1)
        }),
      ))
  })

  describe(`${name}: GrantStore purge`, () => {
    it("removes expired codes, ids, tokens, dead families and empty grants, and nothing live", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          // Grant A: redeemed, one access token, one refresh family.
          const a = newCode({ expires_at: NOW + 100 })
          const grantA = (yield* grants.createCode(a)).grant_id
          yield* grants.consumeCode(a.code, NOW + 1)
          yield* grants.recordAccessToken({ grant_id: grantA, jti: "a1", expires_at: NOW + 200 })
          const refreshA = secret()
          yield* grants.createRefresh({
            grant_id: grantA,
            token: refreshA,
            scope: a.scope,
            issued_at: NOW + 1,
            expires_at: NOW + 1000,
          })
          // Grant B: a code never redeemed.
          const grantB = (yield* grants.createCode(newCode({ subject: "bob", expires_at: NOW + 100 }))).grant_id
          yield* grants.revokeAccessToken("x", NOW + 150)
          yield* grants.rememberJti("client-a", "assertion", NOW + 150)

          expect(yield* grants.purgeExpired(NOW + 99)).toBe(0)
          // Two codes, a1, x, the assertion id, and grant B.
          expect(yield* grants.purgeExpired(NOW + 300)).toBe(6)
          expect(yield* failure(grants.getGrant(grantB))).toEqual(new GrantNotFound({ grant_id: grantB }))
          expect((yield* grants.getGrant(grantA)).grant_id).toBe(grantA)
          expect((yield* grants.getRefresh(refreshA, NOW + 300)).grant_id).toBe(grantA)
          expect(yield* failure(grants.consumeCode(a.code, NOW + 300))).toEqual(new CodeNotFound())

          // Once revoked, the family's token, the family and the grant go.
          yield* grants.revokeGrant(grantA, NOW + 300)
          expect(yield* grants.purgeExpired(NOW + 301)).toBe(3)
          expect(yield* failure(grants.getGrant(grantA))).toEqual(new GrantNotFound({ grant_id: grantA }))
          expect(yield* failure(grants.getRefresh(refreshA, NOW + 301))).toEqual(new RefreshTokenNotFound())
          expect(yield* grants.purgeExpired(NOW + 302)).toBe(0)
        }),
      ))

    it("removes expired refresh tokens and then their family and grant", () =>
      run(
        Effect.gen(function* () {
          const grants = yield* GrantStore
          const input = newCode({ expires_at: NOW + 60 })
          const grantId = (yield* grants.createCode(input)).grant_id
          yield* grants.consumeCode(input.code, NOW + 1)
          const token = secret()
          yield* grants.createRefresh({ grant_id: grantId, token, scope: "", issued_at: NOW, expires_at: NOW + 500 })
          const next = secret()
          yield* grants.rotate({
            token,
            new_token: next,
            client_id: input.client_id,
            scope: "",
            now: NOW + 10,
            expires_at: NOW + 400,
          })
          // The code; the two refresh tokens; the family; the grant.
          expect(yield* grants.purgeExpired(NOW + 500)).toBe(5)
          expect(yield* failure(grants.getRefresh(next, NOW + 500))).toEqual(new RefreshTokenNotFound())
        }),
      ))
  })

  describe(`${name}: KeyStore`, () => {
    it("adds, gets and lists keys oldest first, JWKs intact", () =>
      run(
        Effect.gen(function* () {
          const keys = yield* KeyStore
          const k2 = signingKey("k2", { created_at: NOW + 10 })
          const k1 = signingKey("k1")
          const k0 = signingKey("k0", { created_at: NOW + 10 })
          expect(yield* keys.add(k2)).toEqual(k2)
          yield* keys.add(k1)
          yield* keys.add(k0)
          expect(yield* keys.get("k1")).toEqual(k1)
          expect((yield* keys.list()).map((k) => k.kid)).toEqual(["k1", "k0", "k2"])
        }),
      ))

    it("answers KeyAlreadyExists, KeyNotFound and NoSigningKey", () =>
      run(
        Effect.gen(function* () {
          const keys = yield* KeyStore
          expect(yield* failure(keys.current(NOW))).toEqual(new NoSigningKey())
          yield* keys.add(signingKey("k1"))
          expect(yield* failure(keys.add(signingKey("k1", { alg: "RS256" })))).toEqual(
            new KeyAlreadyExists({ kid: "k1" }),
          )
          expect((yield* keys.get("k1")).alg).toBe("ES256")
          expect(yield* failure(keys.get("nope"))).toEqual(new KeyNotFound({ kid: "nope" }))
          expect(yield* failure(keys.retire("nope", NOW))).toEqual(new KeyNotFound({ kid: "nope" }))
        }),
      ))

    it("publishes a new key before it signs, then switches, and keeps the old one published until it retires", () =>
      run(
        Effect.gen(function* () {
          const keys = yield* KeyStore
          yield* keys.add(signingKey("old", { created_at: NOW - 1000, activates_at: NOW - 1000 }))
          const fresh = signingKey("new", { created_at: NOW, activates_at: NOW + 3600 })
          yield* keys.add(fresh)

          expect((yield* keys.published(NOW)).map((k) => k.kid)).toEqual(["old", "new"])
          expect((yield* keys.current(NOW)).kid).toBe("old")
          expect((yield* keys.current(NOW + 3599)).kid).toBe("old")
          expect(yield* keys.current(NOW + 3600)).toEqual(fresh)

          const retired = yield* keys.retire("old", NOW + 7200)
          expect(retired).toEqual({
            ...signingKey("old", { created_at: NOW - 1000, activates_at: NOW - 1000 }),
            status: "retired",
            retires_at: NOW + 7200,
          })
          expect(yield* keys.get("old")).toEqual(retired)
          expect((yield* keys.published(NOW + 7199)).map((k) => k.kid)).toEqual(["old", "new"])
          expect((yield* keys.published(NOW + 7200)).map((k) => k.kid)).toEqual(["new"])
          expect(yield* keys.purgeExpired(NOW + 7199)).toBe(0)
          expect(yield* keys.purgeExpired(NOW + 7200)).toBe(1)
          expect((yield* keys.list()).map((k) => k.kid)).toEqual(["new"])
        }),
      ))

    it("never signs with a retired key, even before its retires_at", () =>
      run(
        Effect.gen(function* () {
          const keys = yield* KeyStore
          yield* keys.add(signingKey("only"))
          yield* keys.retire("only", NOW + 3600)
          expect(yield* failure(keys.current(NOW + 1))).toEqual(new NoSigningKey())
          expect((yield* keys.published(NOW + 1)).map((k) => k.kid)).toEqual(["only"])
        }),
      ))

    it("picks the latest activated key, ties broken by newest then kid", () =>
      run(
        Effect.gen(function* () {
          const keys = yield* KeyStore
          yield* keys.add(signingKey("a", { activates_at: NOW, created_at: NOW }))
          yield* keys.add(signingKey("b", { activates_at: NOW, created_at: NOW }))
          expect((yield* keys.current(NOW)).kid).toBe("b")
          yield* keys.add(signingKey("c", { activates_at: NOW, created_at: NOW + 1 }))
          expect((yield* keys.current(NOW + 1)).kid).toBe("c")
          yield* keys.add(signingKey("d", { activates_at: NOW + 5, created_at: NOW - 10 }))
          expect((yield* keys.current(NOW + 5)).kid).toBe("d")
        }),
      ))
  })
}
