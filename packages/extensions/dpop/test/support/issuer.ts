import { createServer } from "node:http"
import { closing, listening } from "@keyway/testing"
import { base64url, exportJWK, generateKeyPair, SignJWT } from "jose"
import type { TestKey } from "./keys.js"

/** The authorization server as a resource server sees it: an issuer name, a JWKS on loopback, and its access tokens. */
export interface TestIssuer {
  readonly issuer: string
  readonly jwksUri: string
  /** An RFC 9068 access token for `resource`, bound to `key` (`cnf.jkt`). */
  readonly mint: (resource: string, key: TestKey) => Promise<string>
  readonly close: () => Promise<void>
}

export const ISSUER = "https://as.example.com"

/** Serves a fresh ES256 signing key as a JWKS on 127.0.0.1. */
export const startIssuer = async (): Promise<TestIssuer> => {
  const { privateKey, publicKey } = await generateKeyPair("ES256")
  const jwk = { ...(await exportJWK(publicKey)), kid: "as-key", alg: "ES256", use: "sig" }
  const server = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] }))
  })
  const origin = await listening(server)
  return {
    issuer: ISSUER,
    jwksUri: `${origin}/jwks`,
    mint: (resource, key) =>
      new SignJWT({ scope: "notes:read", client_id: "machine", cnf: { jkt: key.jkt } })
        .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "as-key" })
        .setIssuer(ISSUER)
        .setAudience(resource)
        .setSubject("alice")
        .setJti(crypto.randomUUID())
        .setIssuedAt()
        .setExpirationTime("10m")
        .sign(privateKey),
    close: () => closing(server),
  }
}

/** A DPoP proof by `key` for a POST to `htu` carrying `token`; `jti` random unless given. */
export const proofFor = async (key: TestKey, htu: string, token: string, jti: string = crypto.randomUUID()) =>
  new SignJWT({
    htm: "POST",
    htu,
    ath: base64url.encode(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)))),
  })
    .setProtectedHeader({ typ: "dpop+jwt", alg: "ES256", jwk: key.jwk })
    .setJti(jti)
    .setIssuedAt()
    .sign(key.privateKey)

/** `tools/list` presented with the DPoP scheme. */
export const callWith = (url: string, token: string, proof: string) =>
  fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `DPoP ${token}`,
      dpop: proof,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  })
