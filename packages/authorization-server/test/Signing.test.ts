import { Effect, Layer } from "effect"
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose"
import { describe, expect, it } from "vitest"
import { type SigningAlgorithm, TokenSigner } from "../src/Signing.js"
import { layerMemory } from "../src/storage/Storage.js"

/** Signs `count` tokens with a fresh key of `alg` and returns them with the JWK Set the signer publishes. */
const signMany = (alg: SigningAlgorithm, count: number) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const signer = yield* TokenSigner
      const tokens: Array<string> = []
      for (let i = 0; i < count; i++) tokens.push(yield* signer.sign({ sub: `user-${i}`, n: i }, "at+jwt"))
      return { tokens, jwks: yield* signer.jwks }
    }).pipe(Effect.provide(TokenSigner.layer(alg).pipe(Layer.provide(layerMemory)))),
  )

describe("TokenSigner", () => {
  // ECDSA halves that begin with zero bytes come out of OpenSSL's DER shorter than the curve's size (about one
  // signature in 64 for P-256): enough signatures that such halves occur, each verified by jose as R || S.
  it.each([
    ["ES256", 2000],
    ["ES384", 600],
    ["EdDSA", 20],
    ["RS256", 5],
    ["PS256", 5],
  ] as const)("signs %s tokens that jose verifies with the published key", async (alg, count) => {
    const { tokens, jwks } = await signMany(alg, count)
    expect(jwks.keys).toHaveLength(1)
    const kid = jwks.keys[0]?.kid
    const keySet = createLocalJWKSet(jwks as unknown as JSONWebKeySet)
    for (const [i, token] of tokens.entries()) {
      expect(decodeProtectedHeader(token)).toStrictEqual({ alg, kid, typ: "at+jwt" })
      const { payload } = await jwtVerify(token, keySet, { algorithms: [alg], typ: "at+jwt" })
      expect(payload).toStrictEqual({ sub: `user-${i}`, n: i })
    }
  })
})
