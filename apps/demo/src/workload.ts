/**
 * The demo's workload platform (what Kubernetes or a SPIFFE server is to a real workload): a loopback issuer that
 * publishes its public key as a JWK Set and mints short-lived JWTs for its one workload.
 *
 * @module
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { exportJWK, generateKeyPair, SignJWT } from "jose"

/** The workload's identity, as a SPIFFE ID. */
export const WORKLOAD_SUBJECT = "spiffe://demo.keyway.test/ns/agents/sa/notes-reader"

/** A running workload platform. */
export interface WorkloadPlatform {
  /** The `iss` of its JWTs. */
  readonly issuer: string
  readonly jwksUri: string
  /** A JWT for the workload with `aud` set to `audience`, valid five minutes, and its claims. */
  readonly mint: (audience: string) => Promise<{ readonly jwt: string; readonly claims: Record<string, unknown> }>
  readonly close: () => Promise<void>
}

/** Starts the platform on a free loopback port. */
export const startWorkloadPlatform = async (): Promise<WorkloadPlatform> => {
  const { privateKey, publicKey } = await generateKeyPair("ES256")
  const jwk = { ...(await exportJWK(publicKey)), kid: "platform-1", alg: "ES256", use: "sig" }
  const server = createServer((request, response) => {
    if (request.method === "GET" && request.url === "/jwks.json") {
      response.writeHead(200, { "content-type": "application/jwk-set+json", "cache-control": "max-age=300" })
      response.end(JSON.stringify({ keys: [jwk] }))
      return
    }
    response.writeHead(404).end()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    issuer,
    jwksUri: `${issuer}/jwks.json`,
    mint: async (audience) => {
      // The demo's platform reads the wall clock, as a real one does.
      const iat = Math.floor(Date.now() / 1000)
      const claims = {
        iss: issuer,
        sub: WORKLOAD_SUBJECT,
        aud: audience,
        jti: crypto.randomUUID(),
        iat,
        exp: iat + 300,
      }
      const jwt = await new SignJWT(claims)
        .setProtectedHeader({ alg: "ES256", kid: "platform-1", typ: "JWT" })
        .sign(privateKey)
      return { jwt, claims }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
