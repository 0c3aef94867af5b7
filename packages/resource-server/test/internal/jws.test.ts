import { webcrypto } from "node:crypto"
import * as fc from "fast-check"
import { exportJWK, generateKeyPair, importJWK, SignJWT } from "jose"
import { beforeAll, describe, expect, it } from "vitest"
import {
  algorithmOf,
  decodeObject,
  decodeSignature,
  ecdsaToDer,
  fits,
  type SignatureAlgorithm,
  signatureVerifier,
  split,
} from "../../src/internal/jws.js"
import { nodeCrypto } from "../../src/internal/native.js"

const ALL = new Set(["RS256", "PS256", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"])

const algorithm = (alg: string, allowed: ReadonlySet<string> = ALL): SignatureAlgorithm => {
  const found = algorithmOf({ alg }, allowed)
  if (typeof found === "string") throw new Error(`${alg}: ${found}`)
  return found
}

interface Signed {
  readonly alg: string
  /** The verification key as jose's JWKS handling imports it. */
  readonly key: CryptoKey
  readonly token: string
}

const signed = async (alg: string, options: { readonly modulusLength?: number } = {}): Promise<Signed> => {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true, ...options })
  const key = (await importJWK(await exportJWK(publicKey), alg)) as CryptoKey
  const token = await new SignJWT({ sub: "s" }).setProtectedHeader({ alg }).sign(privateKey)
  return { alg, key, token }
}

/** Verifies `token` as the JWT verifier does, with `node:crypto` or (`undefined`) with Web Crypto. */
const verify = async (s: Signed, token: string, crypto: typeof nodeCrypto): Promise<boolean> => {
  const [header, payload, signature] = split(token)!
  const bytes = decodeSignature(signature)!
  return signatureVerifier(crypto)(algorithm(s.alg), s.key, `${header}.${payload}`, bytes)
}

/** The token with one bit of its signature flipped. */
const tampered = (token: string): string => {
  const [header, payload, signature] = split(token)!
  const bytes = decodeSignature(signature)!
  bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] as number) ^ 1
  return `${header}.${payload}.${Buffer.from(bytes).toString("base64url")}`
}

describe("signature verification", () => {
  const keys: Array<Signed> = []
  beforeAll(async () => {
    for (const alg of ["RS256", "PS256", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"]) {
      keys.push(await signed(alg))
    }
  })

  it("node:crypto is found on Node.js", () => {
    expect(typeof nodeCrypto?.verify).toBe("function")
  })

  it("node:crypto and Web Crypto agree: a good signature passes, a flipped bit or a truncation fails", async () => {
    for (const s of keys) {
      for (const crypto of [nodeCrypto, undefined]) {
        const path = `${s.alg} ${crypto === undefined ? "Web Crypto" : "node:crypto"}`
        expect([path, await verify(s, s.token, crypto)]).toEqual([path, true])
        expect([path, await verify(s, tampered(s.token), crypto)]).toEqual([path, false])
        const [header, payload, signature] = split(s.token)!
        const short = `${header}.${payload}.${signature.slice(0, -4)}`
        expect([path, await verify(s, short, crypto)]).toEqual([path, false])
        const otherPayload = `${header}.${Buffer.from('{"sub":"t"}').toString("base64url")}.${signature}`
        expect([path, await verify(s, otherPayload, crypto)]).toEqual([path, false])
      }
    }
  })

  it("verifies through node:crypto when given it, with one key object per key", async () => {
    const s = keys.find((k) => k.alg === "ES256")!
    const [header, payload, signature] = split(s.token)!
    const native = nodeCrypto!
    let calls = 0
    let conversions = 0
    const spy = {
      ...native,
      verify: ((...args: Array<unknown>) => {
        calls++
        return (native.verify as (...a: Array<unknown>) => unknown)(...args)
      }) as typeof native.verify,
      KeyObject: {
        from: (key: CryptoKey) => {
          conversions++
          return native.KeyObject.from(key)
        },
      } as unknown as typeof native.KeyObject,
    } as typeof native
    const verify = signatureVerifier(spy)
    const key = (await importJWK(await exportJWK(s.key), "ES256")) as CryptoKey
    for (let i = 0; i < 3; i++) {
      expect(await verify(algorithm("ES256"), key, `${header}.${payload}`, decodeSignature(signature)!)).toBe(true)
    }
    expect([calls, conversions]).toEqual([3, 1])
  })

  it("a key is usable only for the algorithm it was imported for, and RSA keys have at least 2048 bits", async () => {
    const es256 = keys.find((k) => k.alg === "ES256")!.key
    const ps256 = keys.find((k) => k.alg === "PS256")!.key
    expect(fits(es256, algorithm("ES256"))).toBe(true)
    expect(fits(es256, algorithm("ES384"))).toBe(false)
    expect(fits(es256, algorithm("RS256"))).toBe(false)
    expect(fits(ps256, algorithm("PS256"))).toBe(true)
    expect(fits(ps256, algorithm("PS512"))).toBe(false)
    expect(fits(ps256, algorithm("RS256"))).toBe(false)
    expect(fits(new Uint8Array(32), algorithm("ES256"))).toBe(false)
    const { publicKey } = await webcrypto.subtle.generateKey(
      { name: "RSASSA-PKCS1-v1_5", modulusLength: 1024, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
      true,
      ["sign", "verify"],
    )
    expect(fits(publicKey, algorithm("RS256"))).toBe(false)
  })
})

describe("ECDSA signatures as DER", () => {
  /** Reads the DER ECDSA-Sig-Value back: the two integers, each checked to be minimally encoded. */
  const readDer = (der: Uint8Array): [bigint, bigint] => {
    let offset = 0
    expect(der[offset++]).toBe(0x30)
    let length = der[offset++] as number
    if (length === 0x81) length = der[offset++] as number
    expect(length).toBe(der.length - offset)
    const integer = (): bigint => {
      expect(der[offset++]).toBe(0x02)
      const size = der[offset++] as number
      const bytes = der.subarray(offset, offset + size)
      offset += size
      expect(bytes.length).toBeGreaterThan(0)
      expect((bytes[0] as number) & 0x80).toBe(0)
      if (bytes.length > 1 && bytes[0] === 0) expect((bytes[1] as number) & 0x80).not.toBe(0)
      return bytes.reduce((value, byte) => (value << 8n) | BigInt(byte), 0n)
    }
    const result: [bigint, bigint] = [integer(), integer()]
    expect(offset).toBe(der.length)
    return result
  }
  const big = (bytes: Uint8Array) => bytes.reduce((value, byte) => (value << 8n) | BigInt(byte), 0n)

  it.each([32, 48, 66])("R || S of %i bytes each become the same two integers, minimally encoded", (size) => {
    const halves = fc.uint8Array({ minLength: size, maxLength: size })
    const edgy = fc.oneof(
      halves,
      halves.map((b) => b.fill(0, 0, size - 1)),
      halves.map((b) => b.fill(0)),
      halves.map((b) => b.fill(0xff)),
    )
    fc.assert(
      fc.property(edgy, edgy, (r, s) => {
        const signature = new Uint8Array([...r, ...s])
        expect(readDer(ecdsaToDer(signature, size)!)).toEqual([big(r), big(s)])
      }),
    )
    expect(ecdsaToDer(new Uint8Array(2 * size - 1), size)).toBeUndefined()
    expect(ecdsaToDer(new Uint8Array(2 * size + 1), size)).toBeUndefined()
  })
})

describe("compact JWS parts and protected header", () => {
  it("splits exactly three parts", () => {
    expect(split("a.b.c")).toEqual(["a", "b", "c"])
    expect(split("a.b.")).toEqual(["a", "b", ""])
    expect(split("a.b")).toBeUndefined()
    expect(split("a.b.c.d")).toBeUndefined()
    expect(split("a.b.c.d.e")).toBeUndefined()
  })

  it("decodes only base64url JSON objects in valid UTF-8", () => {
    const part = (text: string | Uint8Array) => Buffer.from(text).toString("base64url")
    expect(decodeObject(part('{"a":1}'))).toEqual({ a: 1 })
    expect(decodeObject(part("[1]"))).toBeUndefined()
    expect(decodeObject(part("null"))).toBeUndefined()
    expect(decodeObject(part('"x"'))).toBeUndefined()
    expect(decodeObject(part("{"))).toBeUndefined()
    expect(decodeObject("")).toBeUndefined()
    expect(decodeObject(`${part('{"a":1}')}*`)).toBeUndefined()
    expect(decodeObject(part(new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])))).toBeUndefined()
  })

  it("reads parts in the base64url alphabet only, without padding or whitespace (RFC 7515 §2)", () => {
    const bytes = Uint8Array.of(0xfb, 0xff, 0xbf, 0x01)
    const part = Buffer.from(bytes).toString("base64url")
    expect(part).toBe("-_-_AQ")
    expect(decodeSignature(part)).toEqual(Buffer.from(bytes))
    expect(decodeSignature("")).toEqual(Buffer.alloc(0))
    for (const refused of ["-_-_AQ==", "+/+/AQ", "-_-_ AQ", "-_-_\nAQ", "-_-_A", "-_-_AQ.", "-_-_AQ*"]) {
      expect(decodeSignature(refused)).toBeUndefined()
    }
    const object = Buffer.from('{"a":1}').toString("base64url")
    expect(decodeObject(`${object}=`)).toBeUndefined()
    expect(decodeObject(` ${object}`)).toBeUndefined()
  })

  it.each([
    [{ alg: "ES256" }, "ES256"],
    [{ alg: "ES256", crit: ["b64"], b64: true }, "ES256"],
    [{ alg: "ES256", crit: ["b64"], b64: false }, "malformed"],
    [{ alg: "ES256", crit: ["b64"] }, "malformed"],
    [{ alg: "ES256", crit: [] }, "malformed"],
    [{ alg: "ES256", crit: [""] }, "malformed"],
    [{ alg: "ES256", crit: "b64" }, "malformed"],
    [{ alg: "ES256", crit: ["exp"], exp: 1 }, "algorithm-not-allowed"],
    [{}, "malformed"],
    [{ alg: "" }, "malformed"],
    [{ alg: 7 }, "malformed"],
    [{ alg: "none" }, "algorithm-not-allowed"],
    [{ alg: "HS256" }, "algorithm-not-allowed"],
    [{ alg: "RS384" }, "algorithm-not-allowed"],
  ])("header %j: %s", (header, expected) => {
    const found = algorithmOf(header, new Set(["ES256", "HS256", "none", "PS256"]))
    expect(typeof found === "string" ? found : found.name).toBe(expected)
  })

  it("an allowed algorithm that no verifier knows is refused as not allowed", () => {
    expect(algorithmOf({ alg: "ES256K" }, new Set(["ES256K"]))).toBe("algorithm-not-allowed")
  })
})
