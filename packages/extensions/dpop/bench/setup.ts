/**
 * Benchmark fixtures: the issuer's ES256 key, the client's DPoP key, one token bound to it (`cnf.jkt`) and one
 * unbound token, minted once and shared by the processes through a file.
 */
import { writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK, SignJWT } from "jose"

export const ISSUER = "https://as.example.com"
export const RESOURCE = "https://mcp.bench.example/mcp"

export interface Setup {
  readonly issuerJwk: JWK
  /** The client's DPoP key pair, as JWKs (the load generator signs proofs with it). */
  readonly clientPrivateJwk: JWK
  readonly clientPublicJwk: JWK
  readonly boundToken: string
  readonly bearerToken: string
}

export const writeSetup = async (): Promise<string> => {
  const issuer = await generateKeyPair("ES256")
  const client = await generateKeyPair("ES256", { extractable: true })
  const clientPublicJwk = await exportJWK(client.publicKey)
  const jkt = await calculateJwkThumbprint(clientPublicJwk)
  const mint = (extra: Record<string, unknown>) =>
    new SignJWT({ scope: "mcp", client_id: "bench-client", jti: crypto.randomUUID(), ...extra })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "bench" })
      .setIssuer(ISSUER)
      .setAudience(RESOURCE)
      .setSubject("user")
      .setIssuedAt()
      .setExpirationTime("2h")
      .sign(issuer.privateKey)
  const setup: Setup = {
    issuerJwk: { ...(await exportJWK(issuer.publicKey)), kid: "bench", alg: "ES256", use: "sig" },
    clientPrivateJwk: await exportJWK(client.privateKey),
    clientPublicJwk,
    boundToken: await mint({ cnf: { jkt } }),
    bearerToken: await mint({}),
  }
  const file = join(tmpdir(), `keyway-dpop-bench-${process.pid}.json`)
  writeFileSync(file, JSON.stringify(setup))
  return file
}
