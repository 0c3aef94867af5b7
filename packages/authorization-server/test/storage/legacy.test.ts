/**
 * A database written by an earlier Keyway opens with this one and keeps working: the version-1 schema and rows as the
 * first releases wrote them (PostgreSQL's consent scopes as an unsorted set), then every kind of record read and the
 * state machine driven on them.
 */
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { Effect, type Layer, Option } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  ClientStore,
  GrantStore,
  KeyStore,
  layerPostgres,
  layerSqlite,
  RefreshTokenReused,
  type StorageError,
  type Stores,
} from "../../src/storage/index.js"
import { MIGRATIONS as POSTGRES_MIGRATIONS } from "../../src/storage/internal/postgres.js"
import { MIGRATIONS as SQLITE_MIGRATIONS } from "../../src/storage/internal/sqlite.js"
import { NOW, runWith, secret, signingKey } from "./contract.js"
import { POSTGRES_V1, SQLITE_V1 } from "./legacy-schema.js"

const hash = (raw: string) => createHash("sha256").update(raw, "utf8").digest("base64url")

const RESOURCE = "https://mcp.example.com/mcp"
const clientSecret = secret()
const registrationToken = secret()
const code = secret()
const refreshToken = secret()
const key = signingKey("k1")
const metadata = {
  client_id: "legacy-client",
  client_secret_expires_at: 0,
  client_id_issued_at: NOW,
  redirect_uris: ["https://app.example.com/callback"],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "client_secret_basic",
  client_name: "Legacy",
  origin: "dynamic",
}

// A client of a DPoP-enabled server as releases before extension_metadata stored it: the extension's field beside
// the server's own.
const boundMetadata = {
  client_id: "legacy-bound",
  client_secret_expires_at: 0,
  client_id_issued_at: NOW,
  redirect_uris: ["http://127.0.0.1/callback"],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
  application_type: "native",
  software_version: "1.0",
  dpop_bound_access_tokens: true,
  contacts: ["ops@example.com"],
  origin: "dynamic",
} as const

/** The rows, column by column, as the first releases wrote them; `scopes` is the backend's own encoding. */
const seed = (scopes: unknown): ReadonlyArray<readonly [string, Record<string, unknown>]> => [
  [
    "clients",
    {
      client_id: "legacy-bound",
      origin: "dynamic",
      expires_at: null,
      client_secret_expires_at: 0,
      client_secret_hash: null,
      registration_access_token_hash: null,
      metadata: JSON.stringify(boundMetadata),
    },
  ],
  [
    "clients",
    {
      client_id: "legacy-client",
      origin: "dynamic",
      expires_at: null,
      client_secret_expires_at: 0,
      client_secret_hash: hash(clientSecret),
      registration_access_token_hash: hash(registrationToken),
      metadata: JSON.stringify(metadata),
    },
  ],
  ...["g-code", "g-refresh"].map(
    (grant_id) =>
      [
        "grants",
        {
          grant_id,
          client_id: "client-a",
          subject: "alice",
          resource: RESOURCE,
          scope: "files:read files:write",
          auth_time: NOW - 5,
          created_at: NOW,
          revoked_at: null,
        },
      ] as const,
  ),
  [
    "authorization_codes",
    {
      code_hash: hash(code),
      grant_id: "g-code",
      client_id: "client-a",
      redirect_uri: "https://app.example.com/callback",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope: "files:read files:write",
      subject: "alice",
      auth_time: NOW - 5,
      issued_at: NOW,
      expires_at: NOW + 60,
      nonce: "n-1",
      consumed_at: null,
    },
  ],
  ["access_tokens", { jti: "jti-live", grant_id: "g-refresh", expires_at: NOW + 600 }],
  ["revoked_access_tokens", { jti: "jti-revoked", expires_at: NOW + 600 }],
  ["refresh_families", { family_id: "f-1", grant_id: "g-refresh", created_at: NOW, revoked_at: null }],
  [
    "refresh_tokens",
    {
      token_hash: hash(refreshToken),
      family_id: "f-1",
      scope: "files:read",
      issued_at: NOW,
      expires_at: NOW + 1000,
      rotated_at: null,
    },
  ],
  ["consents", { subject: "alice", client_id: "client-a", resource: RESOURCE, scopes, granted_at: NOW }],
  ["assertion_jtis", { client_id: "client-a", jti: "used", expires_at: NOW + 60 }],
  [
    "signing_keys",
    {
      kid: key.kid,
      alg: key.alg,
      private_jwk: JSON.stringify(key.private_jwk),
      public_jwk: JSON.stringify(key.public_jwk),
      created_at: key.created_at,
      activates_at: key.activates_at,
      retires_at: null,
      status: key.status,
    },
  ],
]

/** Reads every kind of record the old database holds, then drives the state machine on them. */
const check = (layer: () => Layer.Layer<Stores, StorageError>) =>
  runWith(layer)(
    Effect.gen(function* () {
      const clients = yield* ClientStore
      const grants = yield* GrantStore
      const keys = yield* KeyStore
      const client = yield* clients.get("legacy-client", NOW)
      expect(client).toEqual({
        ...metadata,
        client_secret_hash: hash(clientSecret),
        registration_access_token_hash: hash(registrationToken),
      })
      // The field an extension gave meaning to reads back where extensions' fields are kept now, and stays there
      // once the record is written again.
      const { dpop_bound_access_tokens, ...own } = boundMetadata
      const bound = { ...own, extension_metadata: { dpop_bound_access_tokens } }
      expect(yield* clients.get("legacy-bound", NOW)).toEqual(bound)
      expect(yield* clients.list({ origin: "dynamic" })).toEqual([bound, expect.objectContaining(metadata)])
      yield* clients.update({ ...bound, client_name: "Bound" })
      expect(yield* clients.get("legacy-bound", NOW)).toEqual({ ...bound, client_name: "Bound" })
      expect(yield* clients.verifySecret("legacy-client", clientSecret, NOW)).toBe(true)
      expect(yield* clients.verifyRegistrationAccessToken("legacy-client", registrationToken)).toBe(true)

      expect(yield* grants.consumeCode(code, NOW + 1)).toEqual({
        grant_id: "g-code",
        client_id: "client-a",
        redirect_uri: "https://app.example.com/callback",
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
        resource: RESOURCE,
        scope: "files:read files:write",
        subject: "alice",
        auth_time: NOW - 5,
        issued_at: NOW,
        expires_at: NOW + 60,
        nonce: "n-1",
      })

      // The two grants of alice, client-a and the resource are one now: the older (by id on a tie), g-code.
      const refresh = {
        family_id: "f-1",
        grant_id: "g-code",
        client_id: "client-a",
        subject: "alice",
        resource: RESOURCE,
        scope: "files:read",
        issued_at: NOW,
        expires_at: NOW + 1000,
      }
      expect(yield* grants.getRefresh(refreshToken, NOW + 1)).toEqual(refresh)
      expect(yield* grants.isAccessTokenRevoked("jti-live")).toBe(false)
      expect(yield* grants.isAccessTokenRevoked("jti-revoked")).toBe(true)
      const next = secret()
      yield* grants.rotate({
        token: refreshToken,
        new_token: next,
        client_id: "client-a",
        scope: "files:read",
        now: NOW + 2,
      })
      expect(yield* Effect.flip(grants.getRefresh(refreshToken, NOW + 3))).toEqual(
        new RefreshTokenReused({ family_id: "f-1", grant_id: "g-code" }),
      )
      expect(yield* grants.isAccessTokenRevoked("jti-live")).toBe(true)

      const consent = { subject: "alice", client_id: "client-a", resource: RESOURCE }
      expect(yield* grants.getConsent("alice", "client-a", RESOURCE)).toEqual(
        Option.some({ ...consent, scopes: ["files:read", "files:write"], granted_at: NOW }),
      )
      expect(yield* grants.grantConsent({ ...consent, scopes: ["admin"], granted_at: NOW + 5 })).toEqual({
        ...consent,
        scopes: ["admin", "files:read", "files:write"],
        granted_at: NOW + 5,
      })
      expect(yield* grants.rememberJti("client-a", "used", NOW + 60)).toBe(false)

      expect(yield* keys.current(NOW)).toEqual(key)
      expect(yield* keys.list()).toEqual([key])
    }),
  )

describe("a SQLite file written by the version-1 schema", () => {
  const dir = mkdtempSync(join(tmpdir(), "keyway-legacy-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("opens, migrates to the current schema and keeps working", async () => {
    const path = join(dir, "v1.sqlite")
    const db = new DatabaseSync(path)
    db.exec("PRAGMA journal_mode = WAL")
    db.exec(SQLITE_V1)
    db.prepare("INSERT INTO keyway_migrations (version, name, applied_at) VALUES (1, 'initial', ?)").run(NOW)
    for (const [table, values] of seed(JSON.stringify(["files:read", "files:write"]))) {
      const columns = Object.keys(values)
      db.prepare(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`).run(
        ...(Object.values(values) as Array<string | number | null>),
      )
    }
    db.close()

    await check(() => layerSqlite({ path }))

    const after = new DatabaseSync(path, { readOnly: true })
    try {
      const applied = after.prepare("SELECT version, name, applied_at FROM keyway_migrations ORDER BY version").all()
      expect(applied.map(({ version, name }) => ({ version, name }))).toEqual(
        SQLITE_MIGRATIONS.map(({ version, name }) => ({ version, name })),
      )
      expect(applied[0]?.applied_at).toBe(NOW)
    } finally {
      after.close()
    }
  })
})

describe("a PostgreSQL schema written by the version-1 schema", () => {
  let server: PostgresServer
  beforeAll(async () => {
    server = await startPostgres()
  }, 300_000)
  afterAll(() => server?.stop())

  it("opens, migrates to the current schema and keeps working", async () => {
    const url = server.createDatabase("legacy")
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    try {
      await pool.query('CREATE SCHEMA "old"')
      await pool.query(`SET search_path TO "old"; ${POSTGRES_V1}`)
      await pool.query("INSERT INTO keyway_migrations (version, name, applied_at) VALUES (1, 'initial', $1)", [NOW])
      // The first releases merged consent scopes in SQL and kept them unsorted.
      for (const [table, values] of seed(["files:write", "files:read"])) {
        const columns = Object.keys(values)
        await pool.query(
          `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`,
          Object.values(values),
        )
      }
    } finally {
      await pool.end()
    }

    await check(() => layerPostgres({ connectionString: url, schema: "old" }))

    const after = new pg.Pool({ connectionString: url, max: 1 })
    try {
      const applied = await after.query(
        'SELECT version, name, applied_at::int AS applied_at FROM "old".keyway_migrations ORDER BY version',
      )
      expect(applied.rows.map(({ version, name }) => ({ version, name }))).toEqual(
        POSTGRES_MIGRATIONS.map(({ version, name }) => ({ version, name })),
      )
      expect(applied.rows[0]?.applied_at).toBe(NOW)
    } finally {
      await after.end()
    }
  })
})
