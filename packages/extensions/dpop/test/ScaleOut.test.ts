import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type AuthorizationServer, createAuthorizationServer } from "@keyway/authorization-server"
import { clientCredentialsGrant } from "@keyway/ext-client-credentials/authorization-server"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { SignJWT } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { dpopAuthorizationServer } from "../src/authorization-server.js"
import { type Instance, startInstance } from "./support/fork.js"
import type { InstanceOptions } from "./support/instance.js"
import { callWith, proofFor, startIssuer, type TestIssuer } from "./support/issuer.js"
import { makeKey } from "./support/keys.js"
import { SECRET } from "./support/stack.js"

/**
 * Two MCP server processes behind one resource, as behind a TLS-terminating load balancer: both serve the canonical
 * URL below, each on its own loopback port, and the test plays the load balancer. A proof names the canonical URL
 * (`htu`), so the same proof is valid at both: only a replay store they share can refuse it at the second (RFC 9449
 * §11.1). At the token endpoint, the authorization server keeps the proofs' `jti` values in its grant store, so its
 * instances sharing a database share them too.
 */
const RESOURCE = "https://mcp.example.com/mcp"
const REPLAYED =
  'DPoP resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", algs="ES256", ' +
  'error="invalid_dpop_proof", error_description="the DPoP proof was already used"'

const key = await makeKey()
let issuer: TestIssuer
let postgres: PostgresServer
const dir = mkdtempSync(join(tmpdir(), "keyway-dpop-scale-out-"))

beforeAll(async () => {
  issuer = await startIssuer()
  postgres = await startPostgres()
})

afterAll(async () => {
  await issuer.close()
  postgres.stop()
  rmSync(dir, { recursive: true, force: true })
})

/**
 * Starts two instances on `store` before the tests of the enclosing `describe` (at once: the shared stores make their
 * table when absent, whoever comes first) and stops them after. Two Node.js processes loading the built packages are
 * slow to start on a busy machine: the hook has more time than the default.
 */
const pairOn = (store: () => InstanceOptions["store"]): (() => readonly [Instance, Instance]) => {
  let instances: readonly [Instance, Instance] | undefined
  beforeAll(async () => {
    const options = { resource: RESOURCE, issuer: issuer.issuer, jwksUri: issuer.jwksUri, store: store() }
    const started = await Promise.allSettled([startInstance(options), startInstance(options)])
    const [a, b] = started.map((result) => (result.status === "fulfilled" ? result.value : undefined))
    if (a === undefined || b === undefined) {
      await Promise.all([a?.stop(), b?.stop()])
      throw started.find((result) => result.status === "rejected")?.reason
    }
    instances = [a, b]
  }, 150_000)
  afterAll(async () => {
    await Promise.all((instances ?? []).map((instance) => instance.stop()))
  })
  return () => {
    if (instances === undefined) throw new Error("the instances did not start")
    return instances
  }
}

let databases = 0
const stores: ReadonlyArray<readonly [string, () => InstanceOptions["store"]]> = [
  ["one SQLite file", () => ({ type: "sqlite", path: join(dir, `replay-${++databases}.db`) })],
  [
    "one PostgreSQL database",
    () => ({ type: "postgres", connectionString: postgres.createDatabase(`replay_${++databases}`) }),
  ],
]

describe.each(stores)("two MCP server processes sharing %s", (_, store) => {
  const pair = pairOn(store)

  it("refuse at one a proof the other accepted, with the exact invalid_dpop_proof challenge", async () => {
    const [a, b] = pair()
    const token = await issuer.mint(RESOURCE, key)
    const proof = await proofFor(key, RESOURCE, token)
    const accepted = await callWith(a.url, token, proof)
    expect(accepted.status).toBe(200)
    const replayed = await callWith(b.url, token, proof)
    expect(replayed.status).toBe(401)
    expect(replayed.headers.get("www-authenticate")).toBe(REPLAYED)
    // And back: the first instance refuses it too, and both still accept fresh proofs.
    const back = await callWith(a.url, token, proof)
    expect(back.status).toBe(401)
    expect(back.headers.get("www-authenticate")).toBe(REPLAYED)
    expect((await callWith(b.url, token, await proofFor(key, RESOURCE, token))).status).toBe(200)
    expect((await callWith(a.url, token, await proofFor(key, RESOURCE, token))).status).toBe(200)
  })

  it("accept exactly one of the same proof sent to both at once", async () => {
    const [a, b] = pair()
    const token = await issuer.mint(RESOURCE, key)
    for (let round = 0; round < 5; round++) {
      // A jti beginning with "-" and one with quotes: stored as given, whatever they look like.
      const jti = [`-${crypto.randomUUID()}`, `'";${crypto.randomUUID()}`, crypto.randomUUID()][round % 3]
      const proof = await proofFor(key, RESOURCE, token, jti)
      const answers = await Promise.all([a, b, a, b].map((instance) => callWith(instance.url, token, proof)))
      expect(answers.map((answer) => answer.status).sort()).toEqual([200, 401, 401, 401])
      for (const answer of answers.filter((answer) => answer.status === 401)) {
        expect(answer.headers.get("www-authenticate")).toBe(REPLAYED)
      }
    }
  })
})

describe("two MCP server processes with the default in-memory cache", () => {
  const pair = pairOn(() => ({ type: "memory" }))

  it("each remember only their own proofs: the replay is refused only where the proof was used", async () => {
    const [a, b] = pair()
    const token = await issuer.mint(RESOURCE, key)
    const proof = await proofFor(key, RESOURCE, token)
    expect((await callWith(a.url, token, proof)).status).toBe(200)
    expect((await callWith(b.url, token, proof)).status).toBe(200)
    const again = await callWith(a.url, token, proof)
    expect(again.status).toBe(401)
    expect(again.headers.get("www-authenticate")).toBe(REPLAYED)
  })
})

describe("two authorization server instances sharing one SQLite database", () => {
  it("refuse at one a token request's proof the other accepted: DPoP jti values live in the grant store", async () => {
    const issuer = "https://as.example.com"
    const options: AuthorizationServer.AuthorizationServerOptions = {
      issuer,
      resources: [{ uri: RESOURCE, name: "Notes", scopes: { "notes:read": "Read notes" } }],
      storage: { type: "sqlite", path: join(dir, "authorization-server.db") },
      clients: [{ clientId: "machine", clientSecret: SECRET, redirectUris: [], grantTypes: ["client_credentials"] }],
      extensions: [clientCredentialsGrant({}), dpopAuthorizationServer({})],
      warn: () => undefined,
    }
    const a = createAuthorizationServer(options)
    const b = createAuthorizationServer(options)
    try {
      const proof = await new SignJWT({ htm: "POST", htu: `${issuer}/token` })
        .setProtectedHeader({ typ: "dpop+jwt", alg: "ES256", jwk: key.jwk })
        .setJti(`-${crypto.randomUUID()}`)
        .setIssuedAt()
        .sign(key.privateKey)
      const tokenRequest = () =>
        new Request(`${issuer}/token`, {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            authorization: `Basic ${btoa(`machine:${SECRET}`)}`,
            dpop: proof,
          },
          body: new URLSearchParams({ grant_type: "client_credentials", resource: RESOURCE, scope: "notes:read" }),
        })
      const accepted = await a.handler(tokenRequest())
      expect(accepted.status).toBe(200)
      expect(((await accepted.json()) as { token_type: string }).token_type).toBe("DPoP")
      const replayed = await b.handler(tokenRequest())
      expect(replayed.status).toBe(400)
      expect(await replayed.json()).toEqual({
        error: "invalid_dpop_proof",
        error_description: "the DPoP proof was already used",
      })
    } finally {
      await a.close()
      await b.close()
    }
  })
})
