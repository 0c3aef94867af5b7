import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { Cause, Effect, Exit, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AuthorizationServer, createAuthorizationServer, type StorageOption } from "../../src/AuthorizationServer.js"
import { ConfigError } from "../../src/Config.js"
import { ClientStore, layerPostgres, layerSqlite, type StorageError } from "../../src/storage/index.js"
import { UserAuthenticator } from "../../src/UserAuthenticator.js"

const A = "https://a.example.com"
const B = "https://b.example.com/tenant"

/** The refusal of a start for `issuer` on a database that serves `served`. */
const taken = (served: string, issuer: string) =>
  `storage: the database serves the issuer ${served} (its clients, signing keys and tokens are that issuer's), not ${issuer}: ` +
  `give ${issuer} a database of its own (another data directory, SQLite file, or PostgreSQL database or schema), ` +
  `or, to move the database to ${issuer}, start once with previousIssuer set to ${served}`

const options = (issuer: string, clientId: string) => ({
  issuer,
  resources: [{ uri: "https://mcp.example.com/mcp", scopes: { read: "Read" } }],
  clients: [{ clientId, redirectUris: ["https://app.example.com/cb"] }],
  warn: () => undefined,
})

/** Starts the plain face on `storage` for `issuer` and stops it; the error `ready()` rejected with, if any. */
const start = async (
  issuer: string,
  storage: StorageOption,
  more: { readonly clientId?: string; readonly previousIssuer?: string } = {},
): Promise<unknown> => {
  const server = createAuthorizationServer({
    ...options(issuer, more.clientId ?? "app"),
    ...(more.previousIssuer === undefined ? {} : { previousIssuer: more.previousIssuer }),
    storage,
  })
  try {
    await server.ready()
    return undefined
  } catch (error) {
    return error
  } finally {
    await server.close()
  }
}

const expectRefusal = (error: unknown, message: string) => {
  expect(error).toBeInstanceOf(ConfigError)
  expect((error as ConfigError).message).toBe(message)
}

/** The IDs of the clients stored in a database. */
const clientIds = (layer: () => Layer.Layer<ClientStore, StorageError>) =>
  Effect.runPromise(
    Effect.gen(function* () {
      return (yield* (yield* ClientStore).list()).map((c) => c.client_id)
    }).pipe(Effect.provide(layer())),
  )

/** The behaviour every backend that outlives the process shares. */
const issuerSuite = (
  name: string,
  fresh: () => { storage: StorageOption; layer: () => Layer.Layer<ClientStore, StorageError> },
) =>
  describe(`${name}: a database serves the issuer it first started for`, () => {
    it("refuses a start for another issuer, naming both and the fix, and leaves the database as it was", async () => {
      const { storage, layer } = fresh()
      expect(await start(A, storage, { clientId: "a-app" })).toBeUndefined()
      // The issuer's own form is compared: the root slash is not part of it.
      expect(await start(`${A}/`, storage, { clientId: "a-app" })).toBeUndefined()
      expectRefusal(await start(B, storage, { clientId: "b-app" }), taken(A, B))
      // Nothing of B's configuration was written, and A's clients are still there.
      expect(await clientIds(layer)).toEqual(["a-app"])
      expect(await start(A, storage, { clientId: "a-app" })).toBeUndefined()
    })

    it("moves to a new issuer with previousIssuer, and then serves only the new one", async () => {
      const { storage, layer } = fresh()
      expect(await start(A, storage, { clientId: "a-app" })).toBeUndefined()
      expectRefusal(await start(B, storage, { previousIssuer: "https://c.example.com" }), taken(A, B))
      expect(await start(B, storage, { clientId: "-b-app", previousIssuer: A })).toBeUndefined()
      expect(await clientIds(layer)).toEqual(["-b-app"])
      // Left in place, the option changes nothing once moved.
      expect(await start(B, storage, { clientId: "-b-app", previousIssuer: A })).toBeUndefined()
      expectRefusal(await start(A, storage), taken(B, A))
    })

    it("fails the Effect face's layer with the ConfigError, not a defect", async () => {
      const { storage } = fresh()
      expect(await start(A, storage)).toBeUndefined()
      const exit = await Effect.runPromiseExit(
        Layer.build(
          AuthorizationServer.layer(options(B, "app")).pipe(
            Layer.provide(Layer.merge(storageLayerOf(storage), UserAuthenticator.layerUsers([]))),
          ),
        ).pipe(Effect.scoped),
      )
      if (Exit.isSuccess(exit)) throw new Error("the layer was built")
      expect(Cause.hasDies(exit.cause)).toBe(false)
      expectRefusal(Cause.squash(exit.cause), taken(A, B))
    })
  })

const storageLayerOf = (storage: StorageOption) => {
  if (storage.type === "sqlite") return layerSqlite({ path: storage.path })
  if (storage.type === "postgres") {
    return layerPostgres({
      connectionString: storage.connectionString,
      ...(storage.schema === undefined ? {} : { schema: storage.schema }),
    })
  }
  throw new Error(`no layer for ${storage.type}`)
}

const dir = mkdtempSync(join(tmpdir(), "keyway-issuer-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
issuerSuite("sqlite", () => {
  const path = join(dir, `store-${++files}.sqlite`)
  return { storage: { type: "sqlite", path }, layer: () => layerSqlite({ path }) }
})

let server: PostgresServer
let url: string
beforeAll(async () => {
  server = await startPostgres()
  url = server.createDatabase("issuer")
}, 300_000)
afterAll(() => server?.stop())
let schemas = 0
issuerSuite("postgres", () => {
  const schema = `issuer_${++schemas}`
  return {
    storage: { type: "postgres", connectionString: url, schema },
    layer: () => layerPostgres({ connectionString: url, schema }),
  }
})

describe("postgres: instances of two issuers starting together on a new database", () => {
  it("exactly one records its issuer; the other is refused, naming it", async () => {
    const storage: StorageOption = { type: "postgres", connectionString: url, schema: "race" }
    const [a, b] = await Promise.all([start(A, storage), start(B, storage)])
    if (a === undefined) expectRefusal(b, taken(A, B))
    else {
      expect(b).toBeUndefined()
      expectRefusal(a, taken(B, A))
    }
  })
})

describe("memory storage", () => {
  it("is never another issuer's: every start records its own", async () => {
    expect(await start(A, { type: "memory" })).toBeUndefined()
    expect(await start(B, { type: "memory" })).toBeUndefined()
  })
})
