import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import {
  AdminInputError,
  addClient,
  removeClient,
  retireKey,
  revokeGrants,
  revokeKey,
  rotateClientSecret,
  rotateKey,
  updateClient,
} from "../src/Administration.js"
import type { RotationPolicy } from "../src/KeyRotation.js"
import { TokenSigner } from "../src/Signing.js"
import { ClientNotFound, KeyNotFound } from "../src/storage/Errors.js"
import { ClientStore, GrantStore, KeyStore, layerMemory, type Stores } from "../src/storage/Storage.js"

const run = <A, E>(program: Effect.Effect<A, E, Stores>): Promise<A> =>
  Effect.runPromise(Effect.provide(program, layerMemory))

/** The program's typed failure; a success fails the test. */
const failureOf = <A, E, R>(program: Effect.Effect<A, E, R>): Effect.Effect<E, Error, R> =>
  Effect.flip(program).pipe(Effect.mapError(() => new Error("expected a failure")))

const POLICY: RotationPolicy = {
  rotateEvery: false,
  publishAhead: 600,
  accessTokenTtl: 300,
  clockSkew: 60,
  algorithm: "ES256",
}

const grant = (subject: string, clientId: string) =>
  GrantStore.use((g) =>
    g.createCode({
      code: crypto.randomUUID(),
      client_id: clientId,
      redirect_uri: "https://app.example.com/cb",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      resource: "https://mcp.example.com/mcp",
      scope: "read",
      subject,
      auth_time: 0,
      issued_at: 0,
      expires_at: 60,
    }),
  )

describe("Administration: clients", () => {
  it("adds a confidential client with a generated secret stored only as a hash", () =>
    run(
      Effect.gen(function* () {
        const { client, secret } = yield* addClient({ clientName: "Ops", redirectUris: ["https://ops.example/cb"] })
        expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
        expect(client.client_id).toMatch(/^[A-Za-z0-9_-]{22}$/)
        expect(client.origin).toBe("admin")
        expect(JSON.stringify(client)).not.toContain(secret)
        const clients = yield* ClientStore
        expect(yield* clients.verifySecret(client.client_id, secret ?? "", 0)).toBe(true)
        const publicClient = yield* addClient({
          clientId: "cli",
          redirectUris: ["http://127.0.0.1/cb"],
          tokenEndpointAuthMethod: "none",
        })
        expect(publicClient.secret).toBeUndefined()
        expect(publicClient.client.token_endpoint_auth_method).toBe("none")
      }),
    ))

  it("refuses bad input naming the field", () =>
    run(
      Effect.gen(function* () {
        expect(yield* failureOf(addClient({ redirectUris: [] }))).toEqual(
          new AdminInputError({ field: "redirect_uris", message: "needs at least one redirect URI" }),
        )
        expect(yield* failureOf(addClient({ redirectUris: ["http://app.example/cb"] }))).toEqual(
          new AdminInputError({
            field: "redirect_uris",
            message: "http://app.example/cb uses http on a host that is not loopback",
          }),
        )
        expect(
          yield* failureOf(
            addClient({ redirectUris: ["https://a.example/cb"], tokenEndpointAuthMethod: "private_key_jwt" as never }),
          ),
        ).toEqual(
          new AdminInputError({
            field: "token_endpoint_auth_method",
            message: "must be one of none, client_secret_basic, client_secret_post",
          }),
        )
        yield* addClient({ clientId: "twice", redirectUris: ["https://a.example/cb"] })
        expect(yield* failureOf(addClient({ clientId: "twice", redirectUris: ["https://a.example/cb"] }))).toEqual(
          new AdminInputError({ field: "client_id", message: "twice already exists" }),
        )
      }),
    ))

  it("updates, rotates the secret, and removes a client with its grants; leaves configured clients alone", () =>
    run(
      Effect.gen(function* () {
        const clients = yield* ClientStore
        const { client, secret } = yield* addClient({ clientId: "app", redirectUris: ["https://a.example/cb"] })
        const updated = yield* updateClient("app", { clientName: "App", redirectUris: ["https://b.example/cb"] })
        expect([updated.client_name, updated.redirect_uris]).toEqual(["App", ["https://b.example/cb"]])
        expect(yield* clients.verifySecret("app", secret ?? "", 0)).toBe(true)
        const rotated = yield* rotateClientSecret("app")
        expect(yield* clients.verifySecret("app", secret ?? "", 0)).toBe(false)
        expect(yield* clients.verifySecret("app", rotated.secret ?? "", 0)).toBe(true)

        const code = yield* grant("alice", client.client_id)
        expect(yield* removeClient("app")).toEqual([code.grant_id])
        expect((yield* GrantStore.use((g) => g.getGrant(code.grant_id))).revoked_at).toBeDefined()
        expect(yield* failureOf(clients.get("app", 0))).toEqual(new ClientNotFound({ client_id: "app" }))
        expect(yield* failureOf(removeClient("app"))).toEqual(new ClientNotFound({ client_id: "app" }))

        yield* clients.upsert({ ...client, client_id: "configured", origin: "static" })
        const configured = new AdminInputError({
          field: "client_id",
          message: "configured is configured in the configuration file; change it there",
        })
        expect(yield* failureOf(removeClient("configured"))).toEqual(configured)
        expect(yield* failureOf(updateClient("configured", { clientName: "x" }))).toEqual(configured)
        expect(yield* failureOf(rotateClientSecret("configured"))).toEqual(configured)
        yield* addClient({ clientId: "pub", redirectUris: ["https://a.example/cb"], tokenEndpointAuthMethod: "none" })
        expect(yield* failureOf(rotateClientSecret("pub"))).toEqual(
          new AdminInputError({ field: "client_id", message: "pub authenticates with none, not a secret" }),
        )
      }),
    ))
})

describe("Administration: grants", () => {
  it("revokes by id, by subject, by client; nothing twice", () =>
    run(
      Effect.gen(function* () {
        const a1 = yield* grant("alice", "c1")
        const a2 = yield* grant("alice", "c2")
        const b1 = yield* grant("bob", "c1")
        expect(yield* revokeGrants({ grantId: a2.grant_id })).toEqual([a2.grant_id])
        expect(yield* revokeGrants({ grantId: a2.grant_id })).toEqual([])
        expect(yield* revokeGrants({ subject: "alice" })).toEqual([a1.grant_id])
        expect(yield* revokeGrants({ client_id: "c1" })).toEqual([b1.grant_id])
        expect(yield* GrantStore.use((g) => g.listGrants())).toEqual([])
      }),
    ))
})

describe("Administration: signing keys", () => {
  const withSigner = <A, E>(program: Effect.Effect<A, E, Stores | TokenSigner>) =>
    run(Effect.provide(program, TokenSigner.layer("ES256")))

  it("retires a key that no longer signs, refuses the one signing, and revokes a compromised one at once", () =>
    withSigner(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        const [first] = yield* keys.list()
        const firstKid = first?.kid ?? ""
        expect(yield* failureOf(retireKey(POLICY, firstKid))).toEqual(
          new AdminInputError({
            field: "kid",
            message: `${firstKid} is the key signing now; rotate first and retire it once its successor signs`,
          }),
        )
        const rotation = yield* rotateKey(POLICY)
        expect(rotation.created).toBe(true)
        // The new key is published but does not sign yet: retiring it keeps it published for the tokens' lifetime.
        const retired = yield* retireKey(POLICY, rotation.kid)
        expect(retired.key.status).toBe("retired")
        expect((yield* keys.published(Math.floor(Date.now() / 1000))).map((k) => k.kid)).toContain(rotation.kid)

        const revoked = yield* revokeKey(POLICY, firstKid)
        expect(revoked.replacement).toMatch(/./)
        const published = (yield* TokenSigner.use((s) => s.jwks)).keys.map((k) => k.kid)
        expect(published).not.toContain(firstKid)
        expect(published).toContain(revoked.replacement)
        expect((yield* keys.current(Math.floor(Date.now() / 1000) + 1)).kid).toBe(revoked.replacement)
        expect(yield* failureOf(revokeKey(POLICY, "nope"))).toEqual(new KeyNotFound({ kid: "nope" }))
      }),
    ))
})
