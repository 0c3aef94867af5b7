/**
 * Benchmark fixtures shared by the processes: one ES256 key, one token repeated, and distinct tokens, minted once.
 */
import { writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose"

export const ISSUER = "https://as.example.com"
/** The audience of the benchmark tokens; a configured identifier, independent of the port. */
export const RESOURCE = "https://mcp.bench.example/mcp"

export interface Setup {
  readonly publicJwk: JWK
  readonly sameToken: string
  readonly tokens: ReadonlyArray<string>
}

export const writeSetup = async (distinct: number): Promise<string> => {
  const { privateKey, publicKey } = await generateKeyPair("ES256")
  const publicJwk = { ...(await exportJWK(publicKey)), kid: "bench", alg: "ES256", use: "sig" }
  const mint = (jti: string) =>
    new SignJWT({ scope: "mcp profile", client_id: "bench-client", jti })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "bench" })
      .setIssuer(ISSUER)
      .setAudience(RESOURCE)
      .setSubject("user")
      .setIssuedAt()
      .setExpirationTime("2h")
      .sign(privateKey)
  const tokens: Array<string> = []
  for (let i = 0; i < distinct; i++) tokens.push(await mint(`t${i}`))
  const setup: Setup = { publicJwk, sameToken: await mint("same"), tokens }
  const file = join(tmpdir(), `keyway-bench-${process.pid}.json`)
  writeFileSync(file, JSON.stringify(setup))
  return file
}
