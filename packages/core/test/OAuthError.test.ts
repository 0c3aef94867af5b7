import { Effect, Exit } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as OAuthError from "../src/OAuthError.js"

/** Each code with the specification that defines it and the status it must be answered with. */
const table: ReadonlyArray<readonly [OAuthError.ErrorCode, string, number]> = [
  ["invalid_request", "RFC 6749 §5.2", 400],
  ["invalid_client", "RFC 6749 §5.2", 401],
  ["invalid_grant", "RFC 6749 §5.2", 400],
  ["unauthorized_client", "RFC 6749 §5.2", 400],
  ["unsupported_grant_type", "RFC 6749 §5.2", 400],
  ["invalid_scope", "RFC 6749 §5.2", 400],
  ["access_denied", "RFC 6749 §4.1.2.1, RFC 8628 §3.5", 400],
  ["unsupported_response_type", "RFC 6749 §4.1.2.1", 400],
  ["server_error", "RFC 6749 §4.1.2.1", 500],
  ["temporarily_unavailable", "RFC 6749 §4.1.2.1", 503],
  ["invalid_token", "RFC 6750 §3.1", 401],
  ["insufficient_scope", "RFC 6750 §3.1", 403],
  ["invalid_redirect_uri", "RFC 7591 §3.2.2", 400],
  ["invalid_client_metadata", "RFC 7591 §3.2.2", 400],
  ["invalid_software_statement", "RFC 7591 §3.2.2", 400],
  ["unapproved_software_statement", "RFC 7591 §3.2.2", 400],
  ["invalid_target", "RFC 8707 §2", 400],
  ["unsupported_token_type", "RFC 7009 §2.2.1", 400],
  ["invalid_dpop_proof", "RFC 9449 §5", 400],
  ["use_dpop_nonce", "RFC 9449 §8", 400],
  ["authorization_pending", "RFC 8628 §3.5", 400],
  ["slow_down", "RFC 8628 §3.5", 400],
  ["expired_token", "RFC 8628 §3.5", 400],
]

describe("OAuthError codes", () => {
  it("knows exactly the codes of the specifications, each once", () => {
    expect([...OAuthError.codes].sort()).toEqual(table.map(([code]) => code).sort())
    expect(new Set(OAuthError.codes).size).toBe(OAuthError.codes.length)
  })

  it.each(table)("%s (%s) is answered with %i", (code, _spec, status) => {
    expect(OAuthError.statusOf(code)).toBe(status)
    expect(OAuthError.make(code).status).toBe(status)
    expect(OAuthError.isErrorCode(code)).toBe(true)
  })

  it("rejects unknown and differently cased codes", () => {
    for (const s of ["", "Invalid_Request", "invalid-request", "invalid_request ", "login_required", "toString"]) {
      expect(OAuthError.isErrorCode(s)).toBe(false)
    }
  })
})

describe("error_description", () => {
  it("accepts exactly %x20-21 / %x23-5B / %x5D-7E", () => {
    for (let c = 0; c < 0x100; c++) {
      const ch = String.fromCharCode(c)
      const allowed = (c >= 0x20 && c <= 0x21) || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e)
      expect(OAuthError.isValidDescription(ch), `U+${c.toString(16)}`).toBe(allowed)
    }
    expect(OAuthError.isValidDescription("")).toBe(true)
    expect(OAuthError.isValidDescription("The code has expired (after 600 s).")).toBe(true)
  })

  it("sanitises quotes, backslashes, line breaks, control and non-ASCII characters", () => {
    expect(OAuthError.sanitizeDescription('say "hi"')).toBe("say 'hi'")
    expect(OAuthError.sanitizeDescription("C:\\path")).toBe("C:/path")
    expect(OAuthError.sanitizeDescription("line1\r\nline2\tend")).toBe("line1  line2 end")
    expect(OAuthError.sanitizeDescription("bell\u0007 del\u007f")).toBe("bell? del?")
    expect(OAuthError.sanitizeDescription("café 😀")).toBe("caf? ?")
    expect(OAuthError.sanitizeDescription("already fine")).toBe("already fine")
  })

  it("always produces a valid description, and leaves valid ones unchanged", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (s) => {
        const out = OAuthError.sanitizeDescription(s)
        expect(OAuthError.isValidDescription(out)).toBe(true)
        if (OAuthError.isValidDescription(s)) expect(out).toBe(s)
      }),
    )
  })

  it("make sanitises the description it is given", () => {
    const error = OAuthError.make("invalid_request", 'missing "code"\n')
    expect(error.error_description).toBe("missing 'code' ")
  })
})

describe("OAuthError", () => {
  it("is a tagged Error with a readable message", () => {
    const error = OAuthError.make("invalid_grant", "authorization code expired")
    expect(error).toBeInstanceOf(Error)
    expect(error._tag).toBe("OAuthError")
    expect(error.message).toBe("invalid_grant: authorization code expired")
    expect(OAuthError.make("invalid_grant").message).toBe("invalid_grant")
  })

  it("can be yielded as an Effect failure", () => {
    const exit = Effect.runSyncExit(
      Effect.gen(function* () {
        return yield* OAuthError.make("invalid_token", "expired")
      }),
    )
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("invalid_token: expired")
  })

  it("body() holds error, and error_description and error_uri only when present", () => {
    expect(OAuthError.make("invalid_request").body()).toStrictEqual({ error: "invalid_request" })
    expect(OAuthError.make("invalid_scope", "unknown scope: admin").body()).toStrictEqual({
      error: "invalid_scope",
      error_description: "unknown scope: admin",
    })
    expect(
      OAuthError.make("invalid_client", "bad secret", "https://as.example.com/errors/client").body(),
    ).toStrictEqual({
      error: "invalid_client",
      error_description: "bad secret",
      error_uri: "https://as.example.com/errors/client",
    })
  })

  it("body() sanitises a description passed to the constructor directly", () => {
    const error = new OAuthError.OAuthError({ error: "invalid_request", error_description: 'a "b"' })
    expect(error.body()).toStrictEqual({ error: "invalid_request", error_description: "a 'b'" })
  })

  it.each(table)("toResponse() for %s", async (code, _spec, status) => {
    const response = OAuthError.make(code, "why").toResponse()
    expect(response.status).toBe(status)
    expect(response.headers.get("content-type")).toBe("application/json")
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(response.headers.get("pragma")).toBe("no-cache")
    expect(await response.json()).toStrictEqual({ error: code, error_description: "why" })
  })

  it("toResponse() adds caller headers but keeps the cache headers", async () => {
    const response = OAuthError.make("invalid_client").toResponse({
      headers: { "WWW-Authenticate": 'Basic realm="as"', "Cache-Control": "max-age=60" },
    })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe('Basic realm="as"')
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(await response.text()).toBe('{"error":"invalid_client"}')
  })
})

describe("OAuthError headers", () => {
  it("answers with the error's own headers (DPoP-Nonce with use_dpop_nonce, RFC 9449 §8)", async () => {
    const error = new OAuthError.OAuthError({ error: "use_dpop_nonce", headers: { "DPoP-Nonce": "n-1" } })
    const response = error.toResponse({ headers: { "access-control-allow-origin": "*" } })
    expect(response.status).toBe(400)
    expect(response.headers.get("dpop-nonce")).toBe("n-1")
    expect(response.headers.get("access-control-allow-origin")).toBe("*")
    expect(await response.json()).toEqual({ error: "use_dpop_nonce" })
  })
})
