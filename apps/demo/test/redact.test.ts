import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  collectHeaders,
  collectJson,
  collectParams,
  describe as describeSecret,
  fingerprint,
  Redactor,
} from "../src/redact.js"

const JWT =
  "eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCJ9.eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xIiwic3ViIjoiYWxpY2UifQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmU"

describe("describe", () => {
  it("keeps the JWT header prefix, the length and a fingerprint", () => {
    expect(describeSecret(JWT)).toBe(`eyJhbGciOi…[redacted, ${JWT.length} chars, fp ${fingerprint(JWT)}]`)
  })

  it("shows nothing of an opaque secret, and no fingerprint of a low-entropy one", () => {
    expect(describeSecret("Qx3v9-opaque-refresh-token")).toBe(
      `[redacted, 26 chars, fp ${fingerprint("Qx3v9-opaque-refresh-token")}]`,
    )
    expect(describeSecret("hunter22", { lowEntropy: true })).toBe("[redacted]")
  })
})

describe("Redactor", () => {
  it("scrubs every registered secret, in plain and URL-encoded form", () => {
    const redactor = new Redactor()
    redactor.add("a/b+c=secret")
    const line = `code=a/b+c=secret and ${encodeURIComponent("a/b+c=secret")}`
    expect(redactor.scrub(line)).toBe(`code=${describeSecret("a/b+c=secret")} and ${describeSecret("a/b+c=secret")}`)
  })

  it("scrubs JWT-shaped strings nobody registered", () => {
    expect(new Redactor().scrub(`Bearer ${JWT}`)).toBe(`Bearer ${describeSecret(JWT)}`)
  })

  it("ignores values too short to be credentials", () => {
    const redactor = new Redactor()
    redactor.add("ab")
    redactor.add("")
    expect(redactor.secrets()).toEqual([])
    expect(redactor.scrub("ab")).toBe("ab")
  })

  it("never lets a registered secret through, whatever surrounds it", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 8, maxLength: 64 }), fc.string(), fc.string(), (secret, before, after) => {
        const redactor = new Redactor()
        redactor.add(secret)
        const scrubbed = redactor.scrub(`${before}${secret}${after}`)
        // The description may not reintroduce the secret (it holds at most a JWT's constant header prefix).
        expect(scrubbed.includes(describeSecret(secret))).toBe(true)
      }),
    )
  })

  it("collects credentials from JSON members, parameters and headers", () => {
    const redactor = new Redactor()
    collectJson(redactor, { token: { access_token: JWT, refresh_token: "refresh-1234", scope: "notes:read" } })
    collectParams(redactor, new URLSearchParams("code=code-5678&state=state-1&password=pw-secret&csrf_token=csrf-9"))
    collectHeaders(
      redactor,
      new Headers([
        ["authorization", `Basic ${Buffer.from("demo-confidential:s3cret%2Bvalue").toString("base64")}`],
        ["cookie", "keyway_session=cookie-value-1; other=cookie-value-2"],
      ]),
    )
    const response = new Headers()
    response.append("set-cookie", "keyway_session=cookie-value-3; Path=/; HttpOnly")
    collectHeaders(redactor, response)
    expect([...redactor.secrets()].sort()).toEqual(
      [
        JWT,
        "refresh-1234",
        "code-5678",
        "pw-secret",
        "csrf-9",
        Buffer.from("demo-confidential:s3cret%2Bvalue").toString("base64"),
        encodeURIComponent(Buffer.from("demo-confidential:s3cret%2Bvalue").toString("base64")),
        // Basic credentials are form-encoded (RFC 6749 §2.3.1): the decoded secret and its encoded form.
        "s3cret+value",
        "s3cret%2Bvalue",
        "cookie-value-1",
        "cookie-value-2",
        "cookie-value-3",
      ].sort(),
    )
    expect(redactor.scrub("pw-secret")).toBe("[redacted]")
  })
})
