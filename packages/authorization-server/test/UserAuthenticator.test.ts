import { describe, expect, it } from "vitest"
import { fromUsers, hashPassword, verifyPassword } from "../src/UserAuthenticator.js"

describe("scrypt password hashes", () => {
  it("verifies the right password and refuses others", async () => {
    const hash = await hashPassword("hunter2 hunter2")
    expect(hash).toMatch(/^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/)
    expect(await verifyPassword("hunter2 hunter2", hash)).toBe(true)
    expect(await verifyPassword("hunter2 hunter3", hash)).toBe(false)
    expect(await verifyPassword("", hash)).toBe(false)
  })

  it("salts every hash", async () => {
    expect(await hashPassword("same")).not.toBe(await hashPassword("same"))
  })

  it("never matches a malformed hash", async () => {
    for (const bad of ["", "plain", "scrypt$1$2$3", "bcrypt$16384$8$1$AAAA$BBBB", "scrypt$x$8$1$AAAA$BBBB"]) {
      expect(await verifyPassword("x", bad)).toBe(false)
    }
  })

  it("the default authenticator returns the configured subject and refuses unknown users", async () => {
    const authenticate = fromUsers([
      { username: "bob", passwordHash: await hashPassword("pw-bob"), subject: "user-42", displayName: "Bob" },
    ])
    expect(await authenticate({ username: "bob", password: "pw-bob" })).toEqual({
      subject: "user-42",
      displayName: "Bob",
    })
    expect(await authenticate({ username: "bob", password: "pw-alice" })).toBeUndefined()
    expect(await authenticate({ username: "carol", password: "pw-bob" })).toBeUndefined()
  })
})
