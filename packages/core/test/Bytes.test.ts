import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Bytes from "../src/Bytes.js"

const ascii = (text: string) => new TextEncoder().encode(text)

describe("Bytes", () => {
  it("encodes the RFC 4648 §10 test vectors in base64url without padding", () => {
    const vectors: ReadonlyArray<readonly [string, string]> = [
      ["", ""],
      ["f", "Zg"],
      ["fo", "Zm8"],
      ["foo", "Zm9v"],
      ["foob", "Zm9vYg"],
      ["fooba", "Zm9vYmE"],
      ["foobar", "Zm9vYmFy"],
    ]
    for (const [input, output] of vectors) expect(Bytes.base64UrlEncode(ascii(input))).toBe(output)
  })

  it("uses - and _ where base64 has + and / (RFC 4648 §5)", () => {
    expect(Bytes.base64UrlEncode(new Uint8Array([0xfb, 0xff, 0xbf]))).toBe("-_-_")
  })

  it("agrees with an independent base64url encoder on any bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const expected = btoa(String.fromCharCode(...bytes))
          .replaceAll("+", "-")
          .replaceAll("/", "_")
          .replaceAll("=", "")
        expect(Bytes.base64UrlEncode(bytes)).toBe(expected)
      }),
    )
  })

  it("draws random values of the requested size, 256 bits by default", () => {
    const first = Bytes.randomBase64Url()
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(Bytes.randomBase64Url()).not.toBe(first)
    expect(Bytes.randomBase64Url(16)).toMatch(/^[A-Za-z0-9_-]{22}$/)
  })

  it("compares strings as equal exactly when they are", () => {
    expect(Bytes.timingSafeEqual("state-1", "state-1")).toBe(true)
    expect(Bytes.timingSafeEqual("state-1", "state-2")).toBe(false)
    expect(Bytes.timingSafeEqual("state", "state-1")).toBe(false)
    expect(Bytes.timingSafeEqual("", "")).toBe(true)
    expect(Bytes.timingSafeEqual("é", "e\u0301")).toBe(false)
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        expect(Bytes.timingSafeEqual(a, b)).toBe(a === b)
        expect(Bytes.timingSafeEqual(a, a)).toBe(true)
      }),
    )
  })
})
