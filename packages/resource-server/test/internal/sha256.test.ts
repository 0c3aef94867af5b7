import { createHash } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { sha256Words } from "../../src/internal/sha256.js"

const hex = (words: Int32Array): string =>
  Array.from(words, (word) => (word >>> 0).toString(16).padStart(8, "0")).join("")

describe("sha256Words", () => {
  it("reproduces the FIPS 180-4 example digests", () => {
    expect(hex(sha256Words("abc"))).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(hex(sha256Words(""))).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect(hex(sha256Words("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))).toBe(
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    )
    expect(hex(sha256Words("a".repeat(1_000_000)))).toBe(
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
    )
  })

  it("agrees with node:crypto on every padding boundary and on any text, UTF-8 included", () => {
    for (let length = 0; length <= 130; length++) {
      const text = "x".repeat(length)
      expect(hex(sha256Words(text))).toBe(createHash("sha256").update(text, "utf8").digest("hex"))
    }
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 600 }), (text) => {
        expect(hex(sha256Words(text))).toBe(createHash("sha256").update(text, "utf8").digest("hex"))
      }),
    )
  })
})
