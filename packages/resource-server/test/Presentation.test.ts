import { Challenge } from "@keyway/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PresentationScheme } from "../src/Presentation.js"
import { createProtectedResource } from "../src/ProtectedResource.js"
import { jwt } from "../src/TokenVerifier.js"
import type { VerifiedToken } from "../src/VerifiedToken.js"
import { accessToken, makeKey, mint, now, type SigningKey, startJwks, startWebServer } from "./helpers.js"

const ISSUER = "https://as.example.com"

/**
 * A proof-of-possession scheme for the test, shaped as DPoP is: the token carries `cnf.proof`, and a request
 * presenting it with the `Proof` scheme must carry a `Proof` header naming the same value and the request's method.
 */
const proofScheme: PresentationScheme = {
  scheme: "Proof",
  binds: (token) => typeof (token.claims.cnf as { proof?: unknown } | undefined)?.proof === "string",
  confirm: (request, token) => {
    const expected = (token.claims.cnf as { proof?: string } | undefined)?.proof
    const presented = request.header?.("proof")
    if (presented === null || presented === undefined) {
      return { error: "invalid_proof", description: "the Proof header is missing", headers: { "proof-nonce": "n1" } }
    }
    // Asynchronous on purpose: a real scheme may look up a replay cache.
    return Promise.resolve(
      presented === `${request.method} ${expected}`
        ? undefined
        : { error: "invalid_proof", description: "wrong proof" },
    )
  },
  challenge: ({ resourceMetadata, scope, error, description }) =>
    Challenge.format({
      scheme: "Proof",
      params: {
        resource_metadata: resourceMetadata,
        ...(scope === undefined ? {} : { scope }),
        ...(error === undefined ? {} : { error }),
        ...(description === undefined ? {} : { error_description: description }),
        algs: "ES256",
      },
    }),
  metadata: { proof_signing_alg_values_supported: ["ES256"] },
}

let server: Awaited<ReturnType<typeof startWebServer>>
let jwks: Awaited<ReturnType<typeof startJwks>>
let key: SigningKey
let resource: string
let metadataUrl: string

const token = (cnf?: Record<string, unknown>, scope = "mcp:tools") =>
  accessToken(key, ISSUER, resource, scope, cnf === undefined ? {} : { cnf })

const post = (authorization: string | undefined, headers: Record<string, string> = {}, method = "tools/list") =>
  fetch(`${server.origin}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(authorization === undefined ? {} : { authorization }),
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { name: "write" } }),
  })

beforeAll(async () => {
  key = await makeKey("k1")
  jwks = await startJwks([key])
  server = await startWebServer()
  resource = `${server.origin}/mcp`
  metadataUrl = `${server.origin}/.well-known/oauth-protected-resource/mcp`
  const guard = createProtectedResource({
    resource,
    authorizationServers: [ISSUER],
    verifier: jwt({ jwksUri: jwks.url }),
    scopesSupported: ["mcp:tools", "mcp:write"],
    requiredScopes: ["mcp:tools"],
    toolScopes: { write: ["mcp:write"] },
    presentationSchemes: [proofScheme],
  })
  server.setHandler(
    guard.protect(async (_request, { token }: { token: VerifiedToken }) => Response.json({ subject: token.subject })),
  )
})

afterAll(async () => {
  await server.close()
  await jwks.close()
})

const bearer = () => `Bearer resource_metadata="${metadataUrl}", scope="mcp:tools"`

describe("presentation schemes beside Bearer", () => {
  it("adds the scheme's metadata fields and offers its challenge in every 401 beside Bearer's", async () => {
    const metadata = await (await fetch(metadataUrl)).json()
    expect(metadata).toMatchObject({
      proof_signing_alg_values_supported: ["ES256"],
      bearer_methods_supported: ["header"],
    })
    const anonymous = await post(undefined)
    expect(anonymous.status).toBe(401)
    expect(anonymous.headers.get("www-authenticate")).toBe(
      `${bearer()}, Proof resource_metadata="${metadataUrl}", scope="mcp:tools", algs=ES256`,
    )
  })

  it("accepts a bound token presented with the scheme and its proof", async () => {
    const response = await post(`Proof ${await token({ proof: "p1" })}`, { proof: "POST p1" })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ subject: "user-1" })
  })

  it("refuses a missing or wrong proof with the scheme's own error, challenge and headers", async () => {
    const bound = await token({ proof: "p1" })
    const missing = await post(`Proof ${bound}`)
    expect(missing.status).toBe(401)
    expect(missing.headers.get("proof-nonce")).toBe("n1")
    expect(missing.headers.get("www-authenticate")).toBe(
      `Proof resource_metadata="${metadataUrl}", error=invalid_proof, error_description="the Proof header is missing", algs=ES256`,
    )
    expect(await missing.json()).toEqual({ error: "invalid_proof", error_description: "the Proof header is missing" })
    const wrong = await post(`Proof ${bound}`, { proof: "GET p1" })
    expect(wrong.status).toBe(401)
    expect(await wrong.json()).toEqual({ error: "invalid_proof", error_description: "wrong proof" })
  })

  it("refuses a bound token presented as Bearer (invalid_token in the scheme's challenge)", async () => {
    const response = await post(`Bearer ${await token({ proof: "p1" })}`, { proof: "POST p1" })
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({
      error: "invalid_token",
      error_description: "The access token is bound to a key: present it with the Proof scheme",
    })
    expect(response.headers.get("www-authenticate")).toBe(
      `Proof resource_metadata="${metadataUrl}", error=invalid_token, error_description="The access token is bound to a key: present it with the Proof scheme", algs=ES256`,
    )
  })

  it("still accepts unbound Bearer tokens, and checks scopes of scheme-presented tokens (403 in the scheme's challenge)", async () => {
    expect((await post(`Bearer ${await token()}`)).status).toBe(200)
    const response = await post(`Proof ${await token({ proof: "p2" })}`, { proof: "POST p2" }, "tools/call")
    expect(response.status).toBe(403)
    expect(response.headers.get("www-authenticate")).toBe(
      `Proof resource_metadata="${metadataUrl}", scope="mcp:tools mcp:write", error=insufficient_scope, error_description="The access token does not grant the scopes this request needs", algs=ES256`,
    )
  })

  it("verifies scheme-presented tokens as any other: a token for another audience is invalid_token", async () => {
    const foreign = await mint(key, {
      iss: ISSUER,
      aud: "https://elsewhere.example/mcp",
      sub: "user-1",
      scope: "mcp:tools",
      iat: now(),
      exp: now() + 600,
      cnf: { proof: "p3" },
    })
    const response = await post(`Proof ${foreign}`, { proof: "POST p3" })
    expect(response.status).toBe(401)
    expect((await response.json()) as object).toMatchObject({ error: "invalid_token" })
    expect(response.headers.get("www-authenticate")).toMatch(/^Proof /)
  })

  it("refuses scheme credentials that are not a token68: invalid_request", async () => {
    const response = await post("Proof a b")
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "invalid_request",
      error_description: "The access token is not a valid RFC 6750 b64token",
    })
  })

  it("refuses a scheme named Bearer or not a token at configuration", () => {
    expect(() =>
      createProtectedResource({
        resource,
        authorizationServers: [ISSUER],
        verifier: jwt({ jwksUri: jwks.url }),
        presentationSchemes: [{ ...proofScheme, scheme: "bearer" }],
      }),
    ).toThrow('Invalid protected resource configuration: presentationSchemes[0] has an unusable scheme name: "bearer"')
  })
})
