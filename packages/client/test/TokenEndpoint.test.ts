import { json, rpc } from "@keyway/testing/peers"
import { exportJWK, generateKeyPair } from "jose"
import { describe, expect, it } from "vitest"
import type { AuthError } from "../src/AuthError.js"
import { rejection, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })
const initialize = post(rpc("initialize"))
const CALLBACK = "http://127.0.0.1/callback"

describe("token response validation", () => {
  it("rejects a response without access_token", async () => {
    const { as, rs, client } = await world({
      as: { tokenReply: (_grant, { access_token: _, ...rest }) => json(200, rest) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "token", reason: "missing-access-token", url: `${as.issuer}/token` })
    expect((error as AuthError).message).toBe(
      `the token response from ${as.issuer}/token has no access_token; the authorization server must return one (RFC 6749 §5.1)`,
    )
    expect(await client.tokens(rs.url)).toBeUndefined()
  })

  it("rejects a token type other than Bearer", async () => {
    const { as, rs, client } = await world({
      as: { tokenReply: (_grant, body) => json(200, { ...body, token_type: "N_A" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "token", reason: "unsupported-token-type", url: `${as.issuer}/token` })
    expect((error as AuthError).message).toBe(
      `the token response from ${as.issuer}/token has token_type "N_A"; only Bearer tokens can be used`,
    )
  })

  it("accepts the Bearer token type in any case", async () => {
    const { rs, client } = await world({
      as: { tokenReply: (_grant, body) => json(200, { ...body, token_type: "bEaReR" }) },
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect((await client.tokens(rs.url))?.token_type).toBe("Bearer")
  })

  it("rejects a body that is not JSON", async () => {
    const { as, rs, client } = await world({
      as: { tokenReply: () => ({ status: 200, headers: { "content-type": "text/plain" }, body: "access_token=x" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "token", reason: "invalid-json", url: `${as.issuer}/token`, status: 200 })
    expect((error as AuthError).message).toBe(
      `${as.issuer}/token answered HTTP 200 with a body that is not JSON (content-type text/plain); the endpoint must return a JSON document`,
    )
  })

  it("surfaces an OAuth error with its code and status", async () => {
    const { as, rs, client } = await world({
      as: { tokenReply: () => json(400, { error: "invalid_target", error_description: "unknown resource" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "token",
      reason: "oauth-error",
      url: `${as.issuer}/token`,
      status: 400,
      error: "invalid_target",
    })
    expect((error as AuthError).message).toBe(
      `the token endpoint ${as.issuer}/token answered HTTP 400 invalid_target: unknown resource`,
    )
  })

  it("rejects a response with an invalid expires_in", async () => {
    const { rs, client } = await world({
      as: { tokenReply: (_grant, body) => json(200, { ...body, expires_in: "soon" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "token", reason: "invalid-document" })
    expect((error as AuthError).message).toContain("expires_in")
  })
})

describe("credentials only over https or loopback", () => {
  it("refuses to send the code to a plain-http token endpoint on a public host", async () => {
    const { as, rs, client } = await world({
      as: { metadata: (m) => ({ ...m, token_endpoint: "http://as.example.com/token" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "token", reason: "insecure-endpoint", url: "http://as.example.com/token" })
    expect((error as AuthError).message).toBe(
      "refusing to send client credentials to the token endpoint http://as.example.com/token: authorization server endpoints must use https (plain http is only allowed on loopback addresses)",
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("refuses to register at a plain-http registration endpoint on a public host", async () => {
    const { rs, client } = await world({
      as: { metadata: (m) => ({ ...m, registration_endpoint: "http://as.example.com/register" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "registration",
      reason: "insecure-endpoint",
      url: "http://as.example.com/register",
    })
  })
})

describe("client authentication", () => {
  const preRegistered = (method: string, extra: Record<string, unknown> = {}) => ({
    clients: [{ client_id: `pre-${method}`, token_endpoint_auth_method: method, redirect_uris: [CALLBACK], ...extra }],
  })

  it("client_secret_basic sends form-encoded credentials in the Authorization header", async () => {
    const { as, rs, client } = await world({
      as: preRegistered("client_secret_basic", { client_secret: "s3cr&t value" }),
      client: (peer) => ({
        clients: [
          {
            issuer: peer.issuer,
            client_id: "pre-client_secret_basic",
            client_secret: "s3cr&t value",
            token_endpoint_auth_method: "client_secret_basic",
          },
        ],
      }),
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    const request = as.tokenRequests[0]!
    expect(request.authorization).toBe(
      `Basic ${Buffer.from("pre-client_secret_basic:s3cr%26t+value").toString("base64")}`,
    )
    expect(request.params.has("client_secret")).toBe(false)
    expect(as.registrations).toHaveLength(0)
  })

  it("client_secret_post sends credentials in the body", async () => {
    const { as, rs, client } = await world({
      as: preRegistered("client_secret_post", { client_secret: "pw" }),
      client: (peer) => ({
        clients: [
          {
            issuer: peer.issuer,
            client_id: "pre-client_secret_post",
            client_secret: "pw",
            token_endpoint_auth_method: "client_secret_post",
          },
        ],
      }),
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    const request = as.tokenRequests[0]!
    expect(request.authorization).toBeUndefined()
    expect(request.params.get("client_secret")).toBe("pw")
  })

  it("private_key_jwt signs an assertion the server verifies with the client's key", async () => {
    const { publicKey, privateKey } = await generateKeyPair("ES256")
    const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" }
    const { as, rs, client } = await world({
      as: preRegistered("private_key_jwt", { jwks: { keys: [jwk] } }),
      client: (peer) => ({
        privateKeyJwt: { key: privateKey, alg: "ES256", kid: "k1" },
        clients: [
          { issuer: peer.issuer, client_id: "pre-private_key_jwt", token_endpoint_auth_method: "private_key_jwt" },
        ],
      }),
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    expect(as.tokenRequests[0]?.params.get("client_assertion_type")).toBe(
      "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    )
  })

  it("a wrong secret surfaces invalid_client", async () => {
    const { as, rs, client } = await world({
      as: preRegistered("client_secret_post", { client_secret: "right" }),
      client: (peer) => ({
        clients: [
          {
            issuer: peer.issuer,
            client_id: "pre-client_secret_post",
            client_secret: "wrong",
            token_endpoint_auth_method: "client_secret_post",
          },
        ],
      }),
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "token", reason: "oauth-error", status: 401, error: "invalid_client" })
    expect((error as AuthError).message).toBe(
      `the token endpoint ${as.issuer}/token answered HTTP 401 invalid_client: wrong secret`,
    )
  })
})
