import { Grant } from "@keyway/core"
import { createRemoteJWKSet, jwtVerify } from "jose"
import * as oauth from "oauth4webapi"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { API, MCP, SECRET, signIn, startServer, type TestServer } from "./support/server.js"

describe("token exchange interop", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer()
  })
  afterAll(async () => {
    await server?.close()
  })

  it("oauth4webapi (genericTokenEndpointRequest) performs the exchange; jose alone verifies the exchanged token and its act", async () => {
    const user = await signIn(server, "notes:read")
    const issuer = new URL(server.issuer)
    const as = await oauth
      .discoveryRequest(issuer, { algorithm: "oauth2", [oauth.allowInsecureRequests]: true })
      .then((response) => oauth.processDiscoveryResponse(issuer, response))
    expect(as.grant_types_supported).toContain(Grant.TOKEN_EXCHANGE)
    const client: oauth.Client = { client_id: "notes-mcp" }
    const response = await oauth.genericTokenEndpointRequest(
      as,
      client,
      oauth.ClientSecretBasic(SECRET),
      Grant.TOKEN_EXCHANGE,
      {
        subject_token: user.access_token,
        subject_token_type: Grant.ACCESS_TOKEN_TYPE,
        requested_token_type: Grant.ACCESS_TOKEN_TYPE,
        resource: API,
      },
      { [oauth.allowInsecureRequests]: true },
    )
    const result = await oauth.processGenericTokenEndpointResponse(as, client, response)
    expect(result.token_type).toBe("bearer")
    expect(result.issued_token_type).toBe(Grant.ACCESS_TOKEN_TYPE)
    expect(result.scope).toBe("files:read")
    expect(result.refresh_token).toBeUndefined()

    const jwks = createRemoteJWKSet(new URL(as.jwks_uri as string))
    const { payload, protectedHeader } = await jwtVerify(result.access_token, jwks, {
      issuer: server.issuer,
      audience: API,
      typ: "at+jwt",
    })
    expect(protectedHeader.typ).toBe("at+jwt")
    expect(payload).toMatchObject({ sub: "alice", client_id: "notes-mcp", act: { sub: "notes-mcp" } })
    // The token for the MCP server is not one for the API.
    await expect(jwtVerify(user.access_token, jwks, { issuer: server.issuer, audience: API })).rejects.toThrow()
    expect((await jwtVerify(user.access_token, jwks, { audience: MCP })).payload.act).toBeUndefined()
  })
})
