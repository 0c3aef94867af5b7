import { describe, expect, it } from "vitest"
import { ConfigError, limits, passwordProblem } from "../src/Config.js"
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
    expect(await hashPassword("the same password")).not.toBe(await hashPassword("the same password"))
  })

  it("never matches a malformed hash", async () => {
    for (const bad of ["", "plain", "scrypt$1$2$3", "bcrypt$16384$8$1$AAAA$BBBB", "scrypt$x$8$1$AAAA$BBBB"]) {
      expect(await verifyPassword("x", bad)).toBe(false)
    }
  })

  it("the default authenticator returns the configured subject and refuses unknown users", async () => {
    const authenticate = fromUsers([
      {
        username: "bob",
        passwordHash: await hashPassword("bob's own password"),
        subject: "user-42",
        displayName: "Bob",
      },
    ])
    expect(await authenticate({ username: "bob", password: "bob's own password" })).toEqual({
      subject: "user-42",
      displayName: "Bob",
    })
    expect(await authenticate({ username: "bob", password: "pw-alice" })).toBeUndefined()
    expect(await authenticate({ username: "carol", password: "bob's own password" })).toBeUndefined()
  })
})

describe("new passwords are at least 15 characters long (NIST SP 800-63B-4 §3.1.1.2)", () => {
  const refusal =
    "password: must be at least 15 characters long (NIST SP 800-63B-4 §3.1.1.2, a password used alone); a few unrelated words make one easy to remember"

  it.each([
    ["empty", ""],
    ["14 characters", "fourteen chars"],
    ["14 emoji (28 UTF-16 code units)", "\u{1F511}".repeat(14)],
    ["14 accented letters written with combining marks (28 code points, 14 once composed)", "e\u0301".repeat(14)],
  ])("hashPassword refuses %s with a ConfigError naming the minimum", async (_, password) => {
    const error = await hashPassword(password).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).message).toBe(refusal)
  })

  it.each([
    ["15 characters", "fifteen chars!!"],
    ["15 emoji", "\u{1F511}".repeat(15)],
    ["15 composed letters", "\u00e9".repeat(15)],
  ])("hashPassword accepts %s", async (_, password) => {
    expect(passwordProblem(password)).toBeUndefined()
    expect(await verifyPassword(password, await hashPassword(password))).toBe(true)
  })

  it("a password hashed before the rule still signs in", async () => {
    // A hash of "short" made without the rule (same parameters as hashPassword).
    const { scryptSync } = await import("node:crypto")
    const salt = Buffer.alloc(16, 7)
    const key = scryptSync("short", salt, 32, { N: 16384, r: 8, p: 1 })
    const hash = `scrypt$16384$8$1$${salt.toString("base64url")}$${key.toString("base64url")}`
    expect(await verifyPassword("short", hash)).toBe(true)
    expect(limits.passwordMinLength).toBe(15)
  })
})
