import { describe, expect, it } from "vitest"
import { makeNonces } from "../src/internal/nonce.js"

describe("stateless rotating nonces (RFC 9449 §8, §9)", () => {
  it("accepts a nonce in its slot and the next, refuses it after", async () => {
    const nonces = makeNonces("secret", 300, "test")
    const nonce = await nonces.current(1000)
    expect(await nonces.valid(nonce, 1000)).toBe(true)
    expect(await nonces.valid(nonce, 1199)).toBe(true)
    expect(await nonces.valid(nonce, 1499)).toBe(true)
    expect(await nonces.valid(nonce, 1500)).toBe(false)
    expect(await nonces.current(1200)).not.toBe(nonce)
  })

  it("is shared by every instance with the same secret, and by no other", async () => {
    const nonce = await makeNonces("secret", 300, "test").current(1000)
    expect(await makeNonces("secret", 300, "test").valid(nonce, 1000)).toBe(true)
    expect(await makeNonces("other", 300, "test").valid(nonce, 1000)).toBe(false)
    expect(await makeNonces("secret", 300, "another context").valid(nonce, 1000)).toBe(false)
    expect(await makeNonces(undefined, 300, "test").valid(nonce, 1000)).toBe(false)
  })

  it("refuses malformed and altered nonces", async () => {
    const nonces = makeNonces("secret", 300, "test")
    const nonce = await nonces.current(1000)
    for (const bad of ["", ".", "x", `${nonce}a`, nonce.slice(0, -1), `zz${nonce}`]) {
      expect(await nonces.valid(bad, 1000)).toBe(false)
    }
  })
})
