import { describe, expect, it } from "vitest"
import { randomToken, sha256 } from "../src/internal/crypto.js"

describe("randomToken", () => {
  it("hands out each value once, across refills of its block of random bytes, at every size", () => {
    const seen = new Set<string>()
    // 4096-byte blocks: 700 values of 32 bytes cross five refills, then sizes around and above a block.
    for (let i = 0; i < 700; i++) seen.add(randomToken())
    for (const bytes of [1, 15, 16, 17, 4095, 4096, 4097, 10_000]) {
      const value = randomToken(bytes)
      expect(Buffer.from(value, "base64url")).toHaveLength(bytes)
      expect(value).toMatch(/^[A-Za-z0-9_-]+$/)
      seen.add(value)
    }
    expect(seen.size).toBe(708)
  })

  it("draws fresh bytes after a block is used up (no value repeats the zeros left behind)", () => {
    for (let i = 0; i < 300; i++) expect(randomToken(32)).not.toBe("A".repeat(43))
  })
})

describe("sha256", () => {
  it("is SHA-256 of the UTF-8 string, base64url without padding", () => {
    expect(sha256("abc")).toBe("ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0")
    expect(sha256("é")).toBe("SplVfkAzw1Od4utlRyAXytX5VX96BiWgnxw_biumnEw")
  })
})
