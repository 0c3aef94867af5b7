/**
 * Interop with an independent DPoP implementation: panva's oidc-provider (certified, with its `dPoP` feature and
 * server nonces) as the authorization server, Keyway's client with the DPoP extension, and Keyway's resource server
 * checking the provider's DPoP-bound JWT access tokens.
 */
import { randomBytes } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { createAuthClient, UserAgent } from "@keyway/client"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader, type JWK } from "jose"
import Provider from "oidc-provider"
import { afterEach, describe, expect, it } from "vitest"
import { dpop } from "../src/client.js"
import { dpopScheme } from "../src/resource-server.js"

const CLIENT_ID = "keyway-dpop"
const REDIRECT = "http://127.0.0.1/callback"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const listening = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

interface Seen {
  readonly path: string
  readonly authorization: string | null
  readonly dpop: string | null
  readonly status: number
}

describe("oidc-provider (DPoP with nonces) and Keyway's client and resource server", () => {
  it("binds the provider's JWT access token to the client's key, and Keyway's resource server accepts it", async () => {
    const asServer = createServer()
    const issuer = await listening(asServer)
    const rsServer = createServer()
    const origin = await listening(rsServer)
    const resource = `${origin}/mcp`
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: CLIENT_ID,
          application_type: "native",
          token_endpoint_auth_method: "none",
          redirect_uris: [REDIRECT],
          grant_types: ["authorization_code"],
          response_types: ["code"],
          dpop_bound_access_tokens: true,
          id_token_signed_response_alg: "ES256",
        },
      ],
      cookies: { keys: ["a test key that is long enough to sign the cookies"] },
      features: {
        dPoP: { enabled: true, nonceSecret: randomBytes(32), requireNonce: () => true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => resource,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, indicator) => ({
            scope: "notes:read",
            audience: indicator,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256" } },
          }),
        },
      },
      jwks: { keys: [await generateSigningJwk()] },
      renderError: (ctx, out) => {
        ctx.body = JSON.stringify(out)
      },
      findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
    })
    const tokenRequests: Array<Seen> = []
    asServer.on("request", (request, response) => {
      if (request.url?.startsWith("/token") === true) {
        response.on("finish", () =>
          tokenRequests.push({
            path: "/token",
            authorization: null,
            dpop: (request.headers.dpop as string | undefined) ?? null,
            status: response.statusCode,
          }),
        )
      }
      provider.callback()(request, response)
    })

    const guard = createProtectedResource({
      resource,
      authorizationServers: [issuer],
      verifier: jwt({ jwksUri: `${issuer}/jwks` }),
      scopesSupported: ["openid", "notes:read"],
      requiredScopes: ["notes:read"],
      presentationSchemes: [dpopScheme({ nonce: {} })],
    })
    cleanups.push(() => guard.close())
    const mcpRequests: Array<Seen> = []
    const protect = guard.protect(async (_request, { token }) =>
      Response.json({ jsonrpc: "2.0", id: 1, result: { subject: token.subject } }),
    )
    rsServer.on(
      "request",
      toNodeListener(async (request) => {
        const response = await protect(request)
        if (new URL(request.url).pathname === "/mcp") {
          mcpRequests.push({
            path: "/mcp",
            authorization: request.headers.get("authorization"),
            dpop: request.headers.get("dpop"),
            status: response.status,
          })
        }
        return response
      }),
    )

    const authorizations: Array<URL> = []
    const auth = createAuthClient({
      clients: [{ issuer, client_id: CLIENT_ID }],
      extensions: [dpop()],
      userAgent: UserAgent.testUser({
        username: "alice",
        password: "any password: the provider's development pages accept every login",
        fetch: (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input))
          if (url.pathname === "/auth") authorizations.push(url)
          return globalThis.fetch(input, init)
        },
      }),
    })
    cleanups.push(() => auth.dispose())

    const response = await auth.fetch(resource, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ result: { subject: "alice" } })

    // The provider asked for a nonce once; the retry carried it.
    expect(tokenRequests.map((r) => [r.status, decodeJwt(r.dpop ?? "").nonce !== undefined])).toEqual([
      [400, false],
      [200, true],
    ])
    const jwk = decodeProtectedHeader(tokenRequests[0]?.dpop ?? "").jwk as JWK
    const jkt = await calculateJwkThumbprint(jwk)
    expect(authorizations[0]?.searchParams.get("dpop_jkt")).toBe(jkt)
    // Keyway's resource server asked for its own nonce once too, then accepted the provider's bound token.
    const presented = mcpRequests.filter((r) => r.authorization !== null)
    expect(presented.map((r) => [r.authorization?.split(" ")[0], r.status])).toEqual([
      ["DPoP", 401],
      ["DPoP", 200],
    ])
    const accessToken = presented[1]?.authorization?.slice("DPoP ".length) ?? ""
    expect(decodeJwt(accessToken)).toMatchObject({ iss: issuer, aud: resource, cnf: { jkt } })
  })
})

/** An ES256 signing key for the provider's JWT access tokens. */
async function generateSigningJwk(): Promise<JWK> {
  const { exportJWK, generateKeyPair } = await import("jose")
  const { privateKey } = await generateKeyPair("ES256", { extractable: true })
  return { ...(await exportJWK(privateKey)), alg: "ES256", use: "sig", kid: "es256" }
}
