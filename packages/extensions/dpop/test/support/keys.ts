import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from "jose"

/** A DPoP key of a test: the private key signs proofs, the public JWK goes in their header, `jkt` is its thumbprint. */
export interface TestKey {
  readonly privateKey: CryptoKey
  readonly jwk: JWK
  readonly jkt: string
}

/** A fresh ES256 key pair. */
export const makeKey = async (): Promise<TestKey> => {
  const pair = await generateKeyPair("ES256")
  const jwk = await exportJWK(pair.publicKey)
  return { privateKey: pair.privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) }
}
