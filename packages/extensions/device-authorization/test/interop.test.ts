import { createServer } from "node:http"
import { Grant } from "@keyway/core"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { closing, listening } from "@keyway/testing"
import * as oauth from "oauth4webapi"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type DeviceServer, decide, startDeviceServer } from "./support/asServer.js"

// oauth4webapi's device flow client (RFC 8628) against Keyway's authorization server, then the token at a Keyway
// resource server.
let server: DeviceServer
let mcp: string
const rs = createServer()
let guard: ReturnType<typeof createProtectedResource> | undefined

beforeAll(async () => {
  mcp = `${await listening(rs)}/mcp`
  // The resource server checks the token's times against the real clock.
  server = await startDeviceServer({ resource: mcp, startAt: Math.floor(Date.now() / 1000) })
  guard = createProtectedResource({
    resource: mcp,
    authorizationServers: [server.issuer],
    verifier: jwt({ jwksUri: `${server.issuer}/jwks` }),
    scopesSupported: ["tools:read", "tools:call"],
    requiredScopes: ["tools:read"],
  })
  rs.on(
    "request",
    toNodeListener(
      guard.protect(async (_request, { token }) => Response.json({ subject: token.subject, client: token.clientId })),
    ),
  )
})
afterAll(async () => {
  await closing(rs)
  await guard?.close()
  await server.close()
})

describe("oauth4webapi's device flow against Keyway", () => {
  it("gets the codes, sees authorization_pending, and after approval a token the resource server accepts", async () => {
    const insecure = { [oauth.allowInsecureRequests]: true }
    const issuer = new URL(server.issuer)
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }),
    )
    expect(as.device_authorization_endpoint).toBe(`${server.issuer}/device_authorization`)
    expect(as.grant_types_supported).toContain(Grant.DEVICE_CODE)
    const client: oauth.Client = { client_id: "-tv" }
    const auth = oauth.None()
    const codes = await oauth.processDeviceAuthorizationResponse(
      as,
      client,
      await oauth.deviceAuthorizationRequest(as, client, auth, { resource: mcp, scope: "tools:read" }, insecure),
    )
    expect(codes.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/)
    expect(codes.interval).toBe(5)

    const pending = await oauth
      .processDeviceCodeResponse(
        as,
        client,
        await oauth.deviceCodeGrantRequest(as, client, auth, codes.device_code, insecure),
      )
      .then(
        () => undefined,
        (error: unknown) => error,
      )
    expect(pending).toBeInstanceOf(oauth.ResponseBodyError)
    expect((pending as oauth.ResponseBodyError).error).toBe("authorization_pending")

    await decide(server.url, codes.user_code, "approve")
    await server.adjust(codes.interval ?? 5)
    const tokens = await oauth.processDeviceCodeResponse(
      as,
      client,
      await oauth.deviceCodeGrantRequest(as, client, auth, codes.device_code, insecure),
    )
    expect(tokens.token_type).toBe("bearer")
    expect(tokens.scope).toBe("tools:read")
    expect(typeof tokens.refresh_token).toBe("string")

    const call = await fetch(mcp, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.access_token}`, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    })
    expect(call.status).toBe(200)
    expect(await call.json()).toEqual({ subject: "alice", client: "-tv" })
  })
})
