import { createServer } from "node:http"
import { closing, listening } from "@keyway/testing"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { afterEach, describe, expect, it } from "vitest"
import { Resolver } from "../src/outbound/index.js"
import * as TrustedIssuers from "../src/TrustedIssuers.js"

const issuer = "https://issuer.example"
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const keyPair = async () => {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true })
  return { jwk: { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" }, privateKey }
}

const sign = (privateKey: CryptoKey) =>
  new SignJWT({ sub: "agent" }).setProtectedHeader({ alg: "ES256", kid: "k1" }).setIssuer(issuer).sign(privateKey)

/** The key a set finds for a JWT's header, or the error it fails with. */
const keyFor = (keys: ReturnType<typeof TrustedIssuers.keySet>, jwt: string) => {
  const [header = ""] = jwt.split(".")
  return keys(JSON.parse(Buffer.from(header, "base64url").toString()), { payload: "", signature: "" })
}

/** A loopback JWK Set server that counts requests. */
const jwksServer = async (body: () => unknown) => {
  let requests = 0
  const server = createServer((_, res) => {
    requests++
    res.writeHead(200, { "content-type": "application/jwk-set+json" }).end(JSON.stringify(body()))
  })
  const origin = await listening(server)
  cleanups.push(() => closing(server))
  return { jwksUri: `${origin}/jwks`, requests: () => requests }
}

describe("TrustedIssuers.keySet (RFC 7517 §5)", () => {
  it("uses inline keys as they are", async () => {
    const { jwk, privateKey } = await keyPair()
    const keys = TrustedIssuers.keySet({ issuer, jwks: { keys: [jwk] } })
    await expect(keyFor(keys, await sign(privateKey))).resolves.toBeDefined()
  })

  it("fetches jwksUri once through the guard, with the development allowance for http on loopback", async () => {
    const { jwk, privateKey } = await keyPair()
    const server = await jwksServer(() => ({ keys: [jwk] }))
    const keys = TrustedIssuers.keySet({ issuer, jwksUri: server.jwksUri }, { allowHttpLoopback: true })
    const jwt = await sign(privateKey)
    await expect(keyFor(keys, jwt)).resolves.toBeDefined()
    await expect(keyFor(keys, jwt)).resolves.toBeDefined()
    expect(server.requests()).toBe(1)
  })

  it("refuses http and loopback addresses without the development allowance, before any connection", async () => {
    const { jwk, privateKey } = await keyPair()
    const server = await jwksServer(() => ({ keys: [jwk] }))
    const jwt = await sign(privateKey)
    await expect(keyFor(TrustedIssuers.keySet({ issuer, jwksUri: server.jwksUri }), jwt)).rejects.toMatchObject({
      _tag: "OutboundRefused",
      reason: "scheme",
      message: `refused ${server.jwksUri}: only https URLs are fetched`,
    })
    const https = server.jwksUri.replace("http:", "https:")
    await expect(keyFor(TrustedIssuers.keySet({ issuer, jwksUri: https }), jwt)).rejects.toMatchObject({
      _tag: "OutboundRefused",
      reason: "address",
      message: `refused ${https}: address 127.0.0.1 is loopback (127.0.0.0/8)`,
    })
    expect(server.requests()).toBe(0)
  })

  it("refuses a host name that resolves to a private address, also with the development allowance", async () => {
    const { privateKey } = await keyPair()
    const keys = TrustedIssuers.keySet(
      { issuer, jwksUri: "https://keys.issuer.example/jwks" },
      { allowHttpLoopback: true, resolver: Resolver.Resolver.fromMap({ "keys.issuer.example": ["10.0.0.1"] }) },
    )
    await expect(keyFor(keys, await sign(privateKey))).rejects.toMatchObject({
      _tag: "OutboundRefused",
      reason: "address",
      message:
        "refused https://keys.issuer.example/jwks: address 10.0.0.1 of keys.issuer.example is private (10.0.0.0/8)",
    })
  })

  it("uses a given fetch instead of the guard", async () => {
    const { jwk, privateKey } = await keyPair()
    const asked: Array<string> = []
    const keys = TrustedIssuers.keySet(
      { issuer, jwksUri: "https://keys.issuer.example/jwks" },
      {
        fetch: async (url) => {
          asked.push(url)
          return Response.json({ keys: [jwk] })
        },
      },
    )
    await expect(keyFor(keys, await sign(privateKey))).resolves.toBeDefined()
    expect(asked).toEqual(["https://keys.issuer.example/jwks"])
  })
})
