import { join } from "node:path"
import { ClientAuth, Grant } from "@keyway/core"
import { describe, expect, it } from "vitest"
import { startAuthorizationServer } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { codeFlow, PASSWORD, RESOURCE, refresh, registerClient, SCOPES } from "./support/flow.js"
import { tokensIssued } from "./support/metrics.js"

const { defer, dir } = testCleanups()

const MACHINE_SECRET = "machine-secret-machine-secret-machine-secret"

describe("keyway_tokens_issued_total", () => {
  it("has a grant_type label for every grant the server serves, from zero, counting each grant", async () => {
    const server = await startAuthorizationServer(
      {
        port: 0,
        database: join(await dir(), "keyway.db"),
        users: [{ username: "alice", password: PASSWORD }],
        resources: [{ uri: RESOURCE, scopes: SCOPES }],
        clients: [
          {
            clientId: "nightly",
            clientSecret: MACHINE_SECRET,
            redirectUris: [],
            grantTypes: [Grant.CLIENT_CREDENTIALS, Grant.JWT_BEARER],
          },
        ],
        extensions: {
          clientCredentials: {},
          enterpriseManaged: {
            authorizationServer: { identityProviders: [{ issuer: "https://idp.example.com", jwks: { keys: [] } }] },
          },
        },
        metrics: { port: 0 },
      },
      { log: () => undefined },
    )
    defer(server.close)
    const metrics = server.metricsUrl ?? ""
    const zero = {
      authorization_code: 0,
      refresh_token: 0,
      client_credentials: 0,
      [Grant.JWT_BEARER]: 0,
    }
    expect(await tokensIssued(metrics)).toEqual(zero)

    const clientId = await registerClient(server.issuer)
    const tokens = await codeFlow(server.issuer, { clientId })
    expect(await tokensIssued(metrics)).toEqual({ ...zero, authorization_code: 1 })

    expect((await refresh(server.issuer, clientId, tokens.refresh_token)).status).toBe(200)
    expect(await tokensIssued(metrics)).toEqual({ ...zero, authorization_code: 1, refresh_token: 1 })

    const machine = await fetch(`${server.issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: ClientAuth.encodeClientSecretBasic("nightly", MACHINE_SECRET),
      },
      body: new URLSearchParams({ grant_type: Grant.CLIENT_CREDENTIALS, resource: RESOURCE }),
    })
    expect(machine.status).toBe(200)
    expect(await tokensIssued(metrics)).toEqual({
      ...zero,
      authorization_code: 1,
      refresh_token: 1,
      client_credentials: 1,
    })

    // A refused grant counts nothing: an identity assertion from an identity provider the server does not trust.
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url")
    const untrusted = `${part({ alg: "ES256", typ: Grant.ID_JAG_TYP })}.${part({ iss: "https://evil.example.com" })}.c2ln`
    const refused = await fetch(`${server.issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: ClientAuth.encodeClientSecretBasic("nightly", MACHINE_SECRET),
      },
      body: new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion: untrusted }),
    })
    expect([refused.status, await refused.json()]).toEqual([
      400,
      {
        error: "invalid_grant",
        error_description: "the assertion's issuer https://evil.example.com is not a trusted identity provider",
      },
    ])
    expect(await tokensIssued(metrics)).toEqual({
      ...zero,
      authorization_code: 1,
      refresh_token: 1,
      client_credentials: 1,
    })
  })
})
