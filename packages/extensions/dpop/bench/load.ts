/**
 * Load generator process: autocannon against the endpoint with the unbound token as Bearer, or the bound token with
 * the DPoP scheme and a fresh proof per request (pre-signed before the clock starts, each with its own jti).
 * Prints the figures as one JSON line.
 */
import { readFileSync } from "node:fs"
import autocannon from "autocannon"
import { base64url, importJWK, SignJWT } from "jose"
import { RESOURCE, type Setup } from "./setup.ts"

const [url, setupFile, mode, duration, connections, proofCount] = process.argv.slice(2)
const setup = JSON.parse(readFileSync(setupFile!, "utf8")) as Setup
const proofs: Array<string> = []
if (mode === "dpop") {
  const key = await importJWK(setup.clientPrivateJwk, "ES256")
  const ath = base64url.encode(
    new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(setup.boundToken))),
  )
  const iat = Math.floor(Date.now() / 1000)
  for (let i = 0; i < Number(proofCount ?? "100000"); i++) {
    proofs.push(
      await new SignJWT({ htm: "GET", htu: RESOURCE, ath })
        .setProtectedHeader({ typ: "dpop+jwt", alg: "ES256", jwk: setup.clientPublicJwk })
        .setJti(`${i}-${crypto.randomUUID()}`)
        .setIssuedAt(iat)
        .sign(key),
    )
  }
}
let next = 0
const result = await autocannon({
  url: url!,
  connections: Number(connections ?? "32"),
  duration: Number(duration ?? "10"),
  ...(mode === "bearer" ? { headers: { authorization: `Bearer ${setup.bearerToken}` } } : {}),
  ...(mode === "dpop"
    ? {
        requests: [
          {
            setupRequest: (request) => {
              request.headers = {
                ...request.headers,
                authorization: `DPoP ${setup.boundToken}`,
                dpop: proofs[next++ % proofs.length]!,
              }
              return request
            },
          },
        ],
      }
    : {}),
})
process.stdout.write(
  `${JSON.stringify({
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    non2xx: result.non2xx,
    proofsUsed: next,
    proofs: proofs.length,
  })}\n`,
)
