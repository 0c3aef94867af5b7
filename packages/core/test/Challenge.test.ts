import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Result } from "effect"
import * as fc from "fast-check"
import { afterEach, describe, expect, it } from "vitest"
import * as Challenge from "../src/Challenge.js"

const ok = (header: Parameters<typeof Challenge.parse>[0]): ReadonlyArray<Challenge.Challenge> => {
  const result = Challenge.parse(header)
  if (Result.isFailure(result)) throw new Error(`expected success, got: ${result.failure.message}`)
  return result.success
}

const bad = (header: Parameters<typeof Challenge.parse>[0]): Challenge.MalformedChallenge => {
  const result = Challenge.parse(header)
  if (Result.isSuccess(result)) throw new Error(`expected failure, got: ${JSON.stringify(result.success)}`)
  return result.failure
}

/** [source, header value, expected challenges]. */
const vectors: ReadonlyArray<readonly [string, string, ReadonlyArray<Challenge.Challenge>]> = [
  [
    "RFC 9110 §11.6.1",
    'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"',
    [
      { scheme: "Newauth", params: { realm: "apps", type: "1", title: 'Login to "apps"' } },
      { scheme: "Basic", params: { realm: "simple" } },
    ],
  ],
  ["RFC 6750 §3", 'Bearer realm="example"', [{ scheme: "Bearer", params: { realm: "example" } }]],
  [
    "RFC 6750 §3",
    'Bearer realm="example", error="invalid_token", error_description="The access token expired"',
    [
      {
        scheme: "Bearer",
        params: { realm: "example", error: "invalid_token", error_description: "The access token expired" },
      },
    ],
  ],
  [
    "RFC 9728 §5.1",
    'Bearer resource_metadata="https://resource.example.com/.well-known/oauth-protected-resource"',
    [
      {
        scheme: "Bearer",
        params: { resource_metadata: "https://resource.example.com/.well-known/oauth-protected-resource" },
      },
    ],
  ],
  [
    "MCP insufficient_scope",
    'Bearer error="insufficient_scope", scope="files:read files:write user:profile:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", error_description="Additional file write permission required"',
    [
      {
        scheme: "Bearer",
        params: {
          error: "insufficient_scope",
          scope: "files:read files:write user:profile:write",
          resource_metadata: "https://mcp.example.com/.well-known/oauth-protected-resource",
          error_description: "Additional file write permission required",
        },
      },
    ],
  ],
  [
    "RFC 7616 §3.9.1 (commas inside quotes)",
    'Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS", Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=MD5, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"',
    [
      {
        scheme: "Digest",
        params: {
          realm: "http-auth@example.org",
          qop: "auth, auth-int",
          algorithm: "SHA-256",
          nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
          opaque: "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS",
        },
      },
      {
        scheme: "Digest",
        params: {
          realm: "http-auth@example.org",
          qop: "auth, auth-int",
          algorithm: "MD5",
          nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
          opaque: "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS",
        },
      },
    ],
  ],
  [
    "RFC 7617 §2.1",
    'Basic realm="foo", charset="UTF-8"',
    [{ scheme: "Basic", params: { realm: "foo", charset: "UTF-8" } }],
  ],
  [
    "token68 (RFC 4559 style)",
    "Negotiate a87421000492aa874209af8bc028",
    [{ scheme: "Negotiate", token68: "a87421000492aa874209af8bc028", params: {} }],
  ],
  [
    "token68 with padding",
    "Basic YWxhZGRpbjpvcGVuc2VzYW1l==",
    [{ scheme: "Basic", token68: "YWxhZGRpbjpvcGVuc2VzYW1l==", params: {} }],
  ],
  ["token68 of one token and padding", "Foo abc=", [{ scheme: "Foo", token68: "abc=", params: {} }]],
  [
    "token68 then another challenge",
    "Negotiate abc/+=, Bearer realm=x",
    [
      { scheme: "Negotiate", token68: "abc/+=", params: {} },
      { scheme: "Bearer", params: { realm: "x" } },
    ],
  ],
  [
    "bare schemes",
    "Negotiate, NTLM",
    [
      { scheme: "Negotiate", params: {} },
      { scheme: "NTLM", params: {} },
    ],
  ],
  [
    "case-insensitive parameter names, scheme kept as written",
    'BEARER Realm="x", ERROR=invalid_token',
    [{ scheme: "BEARER", params: { realm: "x", error: "invalid_token" } }],
  ],
  [
    "empty list elements and optional whitespace",
    ' , Bearer , realm = "x" ,, scope="a b"\t, , Basic realm=y ,',
    [
      { scheme: "Bearer", params: { realm: "x", scope: "a b" } },
      { scheme: "Basic", params: { realm: "y" } },
    ],
  ],
  [
    "quoted-pair escapes and an empty quoted value",
    'X a="\\\\", b="\\"", c="\\q", d=""',
    [{ scheme: "X", params: { a: "\\", b: '"', c: "q", d: "" } }],
  ],
  ["obs-text in quoted-string", 'X a="caf\u00e9"', [{ scheme: "X", params: { a: "caf\u00e9" } }]],
  ["tab after the scheme", "Bearer\trealm=x", [{ scheme: "Bearer", params: { realm: "x" } }]],
]

describe("Challenge.parse", () => {
  it.each(vectors)("%s: %s", (_, header, expected) => {
    expect(ok(header)).toEqual(expected)
  })

  it("reads several header lines as one list", () => {
    expect(ok(['Bearer realm="a", scope="x"', "Basic realm=b", "Negotiate"])).toEqual([
      { scheme: "Bearer", params: { realm: "a", scope: "x" } },
      { scheme: "Basic", params: { realm: "b" } },
      { scheme: "Negotiate", params: {} },
    ])
  })

  it.each([null, undefined, "", "   ", ", ,", []])("gives no challenges for %j", (header) => {
    expect(ok(header)).toEqual([])
  })

  it("keeps parameter names that shadow Object.prototype as plain data", () => {
    const [challenge] = ok('X __proto__="a", constructor=b, toString="c"')
    expect(Object.keys(challenge!.params)).toEqual(["__proto__", "constructor", "tostring"])
    expect(Object.getOwnPropertyDescriptor(challenge!.params, "__proto__")?.value).toBe("a")
    expect(Object.getPrototypeOf(challenge!.params)).toBe(Object.prototype)
  })

  /** [header, position, detail]. */
  const rejections: ReadonlyArray<readonly [string | ReadonlyArray<string>, number, string]> = [
    ['Bearer realm="a", Realm="b"', 18, 'duplicate parameter "realm" in the "Bearer" challenge'],
    ['Bearer error="a", error="b"', 18, 'duplicate parameter "error" in the "Bearer" challenge'],
    ['Bearer realm="unterminated', 13, "unterminated quoted-string"],
    ['Bearer realm="a\\', 13, "unterminated quoted-string"],
    ['Bearer realm="a\nb"', 15, "character U+000A is not allowed in a quoted-string"],
    ['Bearer realm="a\u0100"', 15, "character U+0100 is not allowed in a quoted-string"],
    ['Bearer realm="a\\\u0001"', 16, "character U+0001 cannot be escaped in a quoted-string"],
    ["Bearer a=1, realm=", 18, 'expected a token or quoted-string as the value of parameter "realm"'],
    ["Bearer a=1, realm= ,", 19, 'expected a token or quoted-string as the value of parameter "realm"'],
    ["Bearer realm=a b", 15, 'expected "," or the end after the value of parameter "realm"'],
    ['Bearer realm="a" b="c"', 17, 'expected "," or the end after the value of parameter "realm"'],
    ["Bearer a b", 9, 'expected "=" after parameter name "a"'],
    ["Basic, realm=x", 7, 'parameter "realm" does not follow an auth-scheme that takes parameters'],
    ["Negotiate abc, realm=x", 15, 'parameter "realm" does not follow an auth-scheme that takes parameters'],
    ["realm=x", 0, 'parameter "realm" does not follow an auth-scheme that takes parameters'],
    ['Bearer"x"', 6, 'expected a space or "," after auth-scheme "Bearer", found "\\""'],
    ['Bearer "x"', 7, 'expected token68 or an auth-param after auth-scheme "Bearer", found "\\""'],
    ["Bearer =x", 0, 'parameter "Bearer" does not follow an auth-scheme that takes parameters'],
    ["=Bearer", 0, 'expected an auth-scheme or a parameter, found "="'],
    ["Bearer realm=x, \u0000", 16, "expected an auth-scheme or a parameter, found U+0000"],
  ]

  it.each(rejections)("refuses %j at %i", (header, position, detail) => {
    const error = bad(header)
    expect(error).toBeInstanceOf(Challenge.MalformedChallenge)
    expect(error._tag).toBe("MalformedChallenge")
    expect(error.input).toBe(header)
    expect(error.position).toBe(position)
    expect(error.message).toBe(`Malformed WWW-Authenticate at position ${position}: ${detail}`)
  })

  it('reports positions in the lines joined with ", "', () => {
    const error = bad(["Bearer realm=a", "Basic realm=b, realm=c"])
    expect(error.input).toBe("Bearer realm=a, Basic realm=b, realm=c")
    expect(error.position).toBe(31)
    expect(error.message).toBe(
      'Malformed WWW-Authenticate at position 31: duplicate parameter "realm" in the "Basic" challenge',
    )
  })
})

describe("Challenge.format", () => {
  it("writes the RFC 9110 example back exactly", () => {
    const header = 'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"'
    expect(Challenge.format(ok(header))).toBe(header)
  })

  it.each([
    [{ scheme: "Basic", params: {} }, "Basic"],
    [{ scheme: "Negotiate", token68: "abc==", params: {} }, "Negotiate abc=="],
    [
      { scheme: "X", params: { a: "token", b: "two words", c: "", d: 'q"\\' } },
      'X a=token, b="two words", c="", d="q\\"\\\\"',
    ],
    [{ scheme: "X", params: { realm: "token" } }, 'X realm="token"'],
    [{ scheme: "bearer", params: { error: "invalid_token" } }, 'bearer error="invalid_token"'],
  ] as const)("formats %j as %s", (challenge, header) => {
    expect(Challenge.format(challenge)).toBe(header)
  })

  it("joins several challenges with a comma", () => {
    expect(Challenge.format([])).toBe("")
    expect(
      Challenge.format([
        { scheme: "Bearer", params: { realm: "a" } },
        { scheme: "Basic", params: {} },
      ]),
    ).toBe('Bearer realm="a", Basic')
  })

  it.each([
    [{ scheme: "Bad Scheme", params: {} }, "Bad Scheme", 0, 'auth-scheme "Bad Scheme" is not a token'],
    [{ scheme: "X", params: { "a b": "1" } }, "a b", 0, 'parameter name "a b" is not a token'],
    [{ scheme: "X", params: { a: "1", A: "2" } }, "A", 0, 'duplicate parameter "a"'],
    [{ scheme: "X", token68: "a b", params: {} }, "a b", 0, '"a b" is not a token68'],
    [
      { scheme: "X", token68: "abc", params: { a: "1" } },
      "abc",
      0,
      "a challenge carries token68 or auth-params, not both",
    ],
    [
      { scheme: "Bearer", params: { error_description: "bad\r\nSet-Cookie: x=1" } },
      "bad\r\nSet-Cookie: x=1",
      3,
      'character U+000D at position 3 of parameter "error_description" cannot appear in a header',
    ],
    [
      { scheme: "X", params: { a: "\u20ac" } },
      "\u20ac",
      0,
      'character U+20AC at position 0 of parameter "a" cannot appear in a header',
    ],
    [
      { scheme: "X", params: { a: "x\u007f" } },
      "x\u007f",
      1,
      'character U+007F at position 1 of parameter "a" cannot appear in a header',
    ],
  ] as const)("refuses %j", (challenge, input, position, detail) => {
    try {
      Challenge.format(challenge)
      expect.unreachable()
    } catch (error) {
      expect(error).toBeInstanceOf(Challenge.MalformedChallenge)
      const e = error as Challenge.MalformedChallenge
      expect(e.input).toBe(input)
      expect(e.position).toBe(position)
      expect(e.message).toBe(`Cannot format WWW-Authenticate challenge: ${detail}`)
    }
  })
})

describe("Bearer helpers", () => {
  it("formats Bearer parameters quoted, in the fixed order", () => {
    expect(
      Challenge.formatBearer({
        error_description: "Additional file write permission required",
        error: "insufficient_scope",
        scope: "files:read files:write",
        resource_metadata: "https://mcp.example.com/.well-known/oauth-protected-resource",
        realm: "mcp",
        error_uri: "https://docs.example.com/errors",
      }),
    ).toBe(
      'Bearer realm="mcp", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write", error="insufficient_scope", error_description="Additional file write permission required", error_uri="https://docs.example.com/errors"',
    )
    expect(Challenge.formatBearer({})).toBe("Bearer")
    expect(Challenge.formatBearer({ error: "invalid_token" })).toBe('Bearer error="invalid_token"')
  })

  it("reads the first Bearer challenge, case-insensitively, keeping only the Bearer parameters", () => {
    const challenges = ok('Basic realm="b", bearer realm="first", foo=bar, scope="a b", Bearer realm="second"')
    expect(Challenge.bearer(challenges)).toEqual({ realm: "first", scope: "a b" })
    expect(Challenge.bearer(ok('Basic realm="b"'))).toBeUndefined()
    expect(Challenge.bearer(ok("Bearer abc="))).toEqual({})
  })

  it("round-trips formatBearer through parse and bearer", () => {
    const params = { resource_metadata: "https://x.example/.well-known/oauth-protected-resource/mcp", scope: "a b" }
    expect(Challenge.bearer(ok(Challenge.formatBearer(params)))).toEqual(params)
  })

  it("reads all WWW-Authenticate lines of a Headers object", () => {
    const headers = new Headers()
    headers.append("WWW-Authenticate", 'Basic realm="b"')
    headers.append("www-authenticate", 'Bearer resource_metadata="https://x.example/prm", scope="read"')
    const result = Challenge.fromHeaders(headers)
    expect(Result.isSuccess(result) && result.success).toEqual({
      resource_metadata: "https://x.example/prm",
      scope: "read",
    })
    expect(Challenge.fromHeaders(new Headers())).toEqual(Result.succeed(undefined))
  })

  it("reports a malformed header from fromHeaders", () => {
    const result = Challenge.fromHeaders(new Headers({ "WWW-Authenticate": 'Bearer realm="a", realm="b"' }))
    expect(Result.isFailure(result) && result.failure.message).toBe(
      'Malformed WWW-Authenticate at position 18: duplicate parameter "realm" in the "Bearer" challenge',
    )
  })

  describe("over real HTTP", () => {
    let server: Server | undefined
    afterEach(async () => {
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
      server = undefined
    })

    it("reads a 401 with two WWW-Authenticate lines", async () => {
      server = createServer((_, res) => {
        res.statusCode = 401
        res.setHeader("WWW-Authenticate", [
          'Basic realm="legacy"',
          'Bearer error="invalid_token", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource"',
        ])
        res.end()
      })
      await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
      const { port } = server.address() as AddressInfo
      const response = await fetch(`http://127.0.0.1:${port}/mcp`)
      expect(response.status).toBe(401)
      const result = Challenge.fromHeaders(response.headers)
      expect(Result.isSuccess(result) && result.success).toEqual({
        error: "invalid_token",
        resource_metadata: "https://mcp.example.com/.well-known/oauth-protected-resource",
      })
    })
  })
})

const TCHARS = [..."!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"]
const token = fc.string({ unit: fc.constantFrom(...TCHARS), minLength: 1, maxLength: 12 })
const token68 = fc
  .tuple(
    fc.string({ unit: fc.constantFrom(..."abcXYZ019-._~+/"), minLength: 1, maxLength: 20 }),
    fc.string({ unit: fc.constant("="), maxLength: 3 }),
  )
  .map(([body, pad]) => body + pad)
/** Every character a quoted-string can carry, with the tricky ones over-represented. */
const headerChar = fc.oneof(
  fc.constantFrom('"', "\\", ",", "=", " ", "\t", ";"),
  fc.integer({ min: 0x20, max: 0x7e }).map((n) => String.fromCharCode(n)),
  fc.integer({ min: 0x80, max: 0xff }).map((n) => String.fromCharCode(n)),
)
const value = fc.oneof(token, fc.string({ unit: headerChar, maxLength: 30 }))
const params = fc
  .uniqueArray(fc.tuple(token, value), { selector: ([name]) => name.toLowerCase(), maxLength: 6 })
  .map((entries) => Object.fromEntries(entries))
const challenge: fc.Arbitrary<Challenge.Challenge> = fc.oneof(
  fc.record({ scheme: token, params }),
  fc.record({ scheme: token, token68, params: fc.constant({}) }),
)
const lowerKeys = (c: Challenge.Challenge): Challenge.Challenge => ({
  ...c,
  params: Object.fromEntries(Object.entries(c.params).map(([k, v]) => [k.toLowerCase(), v])),
})

describe("Challenge properties", () => {
  it("parse(format(challenges)) gives the challenges back (names lower-cased)", () => {
    fc.assert(
      fc.property(fc.array(challenge, { maxLength: 4 }), (challenges) => {
        expect(ok(Challenge.format(challenges))).toEqual(challenges.map(lowerKeys))
      }),
      { numRuns: 500 },
    )
  })

  it("format either refuses a value or round-trips it, for arbitrary strings", () => {
    fc.assert(
      fc.property(token, token, fc.string({ unit: "binary", maxLength: 20 }), (scheme, name, v) => {
        const c = { scheme, params: { [name]: v } }
        let header: string
        try {
          header = Challenge.format(c)
        } catch (error) {
          expect(error).toBeInstanceOf(Challenge.MalformedChallenge)
          const unrepresentable = (n: number) => n > 0xff || n === 0x7f || (n < 0x20 && n !== 0x09)
          expect([...v].some((ch) => unrepresentable(ch.charCodeAt(0)))).toBe(true)
          return
        }
        expect(ok(header)).toEqual([lowerKeys(c)])
      }),
      { numRuns: 500 },
    )
  })

  it("parse never throws on arbitrary input and reports a position inside it", () => {
    const noisy = fc.oneof(
      fc.string({ unit: "binary" }),
      fc.string({ unit: fc.constantFrom(...'Bearer realm="\\,x \t=abc/+'), maxLength: 40 }),
      fc.array(challenge, { maxLength: 3 }).chain((cs) => {
        const h = Challenge.format(cs)
        return fc.nat(h.length).map((i) => h.slice(0, i) + h.slice(i + 1))
      }),
    )
    fc.assert(
      fc.property(fc.oneof(noisy, fc.array(noisy, { maxLength: 3 })), (header) => {
        const result = Challenge.parse(header)
        if (Result.isFailure(result)) {
          expect(result.failure).toBeInstanceOf(Challenge.MalformedChallenge)
          expect(result.failure.position).toBeGreaterThanOrEqual(0)
          expect(result.failure.position).toBeLessThanOrEqual(result.failure.input.length)
        } else {
          // Whatever parses has a normal form that parses to the same challenges.
          expect(ok(Challenge.format(result.success))).toEqual(result.success)
        }
      }),
      { numRuns: 1000 },
    )
  })
})

describe("DPoP challenges (RFC 9449 §7.1)", () => {
  it("reads the DPoP parameters, algs included", () => {
    const parsed = Challenge.parse('DPoP algs="ES256 PS256", error="use_dpop_nonce", error_description="nonce needed"')
    expect(Result.isSuccess(parsed) && Challenge.dpop(parsed.success)).toEqual({
      algs: "ES256 PS256",
      error: "use_dpop_nonce",
      error_description: "nonce needed",
    })
  })

  it("formats every parameter quoted, in order", () => {
    expect(
      Challenge.formatDPoP({ error: "invalid_dpop_proof", algs: "ES256", resource_metadata: "https://r/.wk" }),
    ).toBe('DPoP resource_metadata="https://r/.wk", algs="ES256", error="invalid_dpop_proof"')
  })

  it("fromHeaders prefers the first listed scheme present, Bearer alone by default", () => {
    const headers = new Headers({ "www-authenticate": 'DPoP resource_metadata="https://r/a", algs="ES256"' })
    expect(Challenge.fromHeaders(headers)).toEqual(Result.succeed(undefined))
    expect(Challenge.fromHeaders(headers, ["Bearer", "DPoP"])).toEqual(
      Result.succeed({ resource_metadata: "https://r/a", algs: "ES256" }),
    )
    const both = new Headers({ "www-authenticate": 'Bearer scope="a", DPoP algs="ES256", scope="b"' })
    expect(Challenge.fromHeaders(both, ["Bearer", "DPoP"])).toEqual(Result.succeed({ scope: "a" }))
  })
})
