import { Effect, Result } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CanonicalUri from "../src/CanonicalUri.js"

const prefix = (input: string) => `Invalid canonical server URI ${JSON.stringify(input)}: `

/** [input, canonical form]: the seed's valid shapes first, then the normalisation rules. */
const valid: ReadonlyArray<readonly [string, string]> = [
  // Seed: scheme://host, scheme://host:<port>, scheme://host/<path>
  ["https://mcp.example.com", "https://mcp.example.com"],
  ["https://mcp.example.com:8443", "https://mcp.example.com:8443"],
  ["https://mcp.example.com/mcp", "https://mcp.example.com/mcp"],
  ["https://mcp.example.com/server/mcp", "https://mcp.example.com/server/mcp"],
  // Uppercase scheme and host are accepted and lowercased; the path keeps its case.
  ["HTTPS://MCP.EXAMPLE.COM/MCP", "https://mcp.example.com/MCP"],
  ["Https://Example.Com:8443/Api", "https://example.com:8443/Api"],
  // Default ports are dropped, others kept.
  ["https://example.com:443", "https://example.com"],
  ["https://example.com:443/mcp", "https://example.com/mcp"],
  ["http://example.com:80/mcp", "http://example.com/mcp"],
  ["http://example.com:443", "http://example.com:443"],
  ["https://example.com:80", "https://example.com:80"],
  ["wss://example.com:443/ws", "wss://example.com/ws"],
  ["https://example.com:08443", "https://example.com:8443"],
  ["https://example.com:", "https://example.com"],
  // Root path: empty and "/" are the same resource, written without the slash.
  ["https://example.com/", "https://example.com"],
  ["https://example.com:8443/", "https://example.com:8443"],
  // A trailing slash on a deeper path may be significant: kept.
  ["https://example.com/mcp/", "https://example.com/mcp/"],
  // IPv6 and IPv4 hosts.
  ["http://[::1]:3000/mcp", "http://[::1]:3000/mcp"],
  ["http://[::1]:80/", "http://[::1]"],
  ["https://[2001:db8::1]:8443", "https://[2001:db8::1]:8443"],
  ["https://[2001:DB8:0:0:0:0:0:1]:8443/mcp", "https://[2001:db8::1]:8443/mcp"],
  ["http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp"],
  // Percent-encoding: unreserved characters decoded, other triplets in uppercase hex.
  ["https://example.com/%7euser/%41%62c", "https://example.com/~user/Abc"],
  ["https://example.com/a%2fb", "https://example.com/a%2Fb"],
  ["https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9"],
  ["https://%65xample.com/", "https://example.com"],
  // Dot segments removed.
  ["https://example.com/a/./b/../mcp", "https://example.com/a/mcp"],
  ["https://example.com/a/%2E%2E/mcp", "https://example.com/mcp"],
  // The query is kept (normalised), also on the root path and when empty.
  ["https://example.com/mcp?tenant=a&x=%7e", "https://example.com/mcp?tenant=a&x=~"],
  ["https://example.com/?tenant=a", "https://example.com?tenant=a"],
  ["https://example.com?", "https://example.com?"],
  // Other schemes with an authority: lowercased host, percent normalisation, no default port.
  ["custom+x://Host.Example:99/Path%c3%a9", "custom+x://host.example:99/Path%C3%A9"],
  ["custom+x://%48OST%c3%a9:99", "custom+x://host%C3%A9:99"],
  ["http://localhost:3000/mcp", "http://localhost:3000/mcp"],
]

/** [input, reason, message after the common prefix]. */
const invalid: ReadonlyArray<readonly [string, CanonicalUri.Reason, string]> = [
  // Seed: a value without scheme; a value with a fragment.
  ["mcp.example.com", "missing-scheme", "no scheme (expected scheme://host[:port][/path])"],
  ["mcp.example.com/mcp", "missing-scheme", "no scheme (expected scheme://host[:port][/path])"],
  ["localhost:3000", "missing-scheme", "no scheme (expected scheme://host[:port][/path])"],
  ["localhost:3000/mcp", "missing-scheme", "no scheme (expected scheme://host[:port][/path])"],
  ["https://mcp.example.com#section", "fragment", "a fragment at position 23 (RFC 8707 §2 forbids fragments)"],
  ["https://mcp.example.com/mcp#", "fragment", "a fragment at position 27 (RFC 8707 §2 forbids fragments)"],
  ["", "empty", "the value is empty"],
  // Relative references.
  ["/mcp", "not-absolute", "a relative reference; an absolute URI (scheme://host[:port][/path]) is required"],
  [
    "//mcp.example.com/mcp",
    "not-absolute",
    "a relative reference; an absolute URI (scheme://host[:port][/path]) is required",
  ],
  ["../mcp", "not-absolute", "a relative reference; an absolute URI (scheme://host[:port][/path]) is required"],
  ["?q=1", "not-absolute", "a relative reference; an absolute URI (scheme://host[:port][/path]) is required"],
  // A scheme but no authority, or an empty host.
  ["urn:example:mcp", "missing-host", 'no host: expected "//" after "urn:" (scheme://host[:port][/path])'],
  ["https:mcp.example.com", "missing-host", 'no host: expected "//" after "https:" (scheme://host[:port][/path])'],
  ["https:/mcp.example.com", "missing-host", 'no host: expected "//" after "https:" (scheme://host[:port][/path])'],
  ["https:///mcp", "missing-host", "the host is empty (expected scheme://host[:port][/path])"],
  ["https://:8443/mcp", "missing-host", "the host is empty (expected scheme://host[:port][/path])"],
  ["file:///etc/passwd", "missing-host", "the host is empty (expected scheme://host[:port][/path])"],
  // Userinfo (redacted in the message).
  [
    "https://user:secret@mcp.example.com/mcp",
    "userinfo",
    'userinfo before "@" in the authority; credentials do not belong in a resource identifier',
  ],
  // Ports.
  ["https://mcp.example.com:65536", "invalid-port", "port 65536 is out of range (0-65535)"],
  ["https://mcp.example.com:84a3", "invalid-port", 'port "84a3" is not a decimal number'],
  ["https://mcp.example.com:-1", "invalid-port", 'port "-1" is not a decimal number'],
  ["https://[::1]:x", "invalid-port", 'port "x" is not a decimal number'],
  // Whitespace, anywhere.
  [" https://mcp.example.com", "invalid-syntax", 'whitespace " " at position 0'],
  ["https://mcp.example.com/mcp\n", "invalid-syntax", 'whitespace "\\n" at position 27'],
  ["https://mcp.example.com/a b", "invalid-syntax", 'whitespace " " at position 25'],
  ["https://mcp.example.com/\tmcp", "invalid-syntax", 'whitespace "\\t" at position 24'],
  // Characters RFC 3986 forbids but the WHATWG parser repairs.
  [
    "https://mcp.example.com\\mcp",
    "invalid-syntax",
    'character "\\\\" at position 23 is not allowed in the host (RFC 3986)',
  ],
  [
    "https://mcp.example.com/<mcp>",
    "invalid-syntax",
    'character "<" at position 24 is not allowed in the path (RFC 3986)',
  ],
  ["https://mcp.example.com/é", "invalid-syntax", 'character "é" at position 24 is not allowed in the path (RFC 3986)'],
  ["https://bücher.example/", "invalid-syntax", 'character "ü" at position 9 is not allowed in the host (RFC 3986)'],
  [
    "https://mcp.example.com/?a=[1]",
    "invalid-syntax",
    'character "[" at position 27 is not allowed in the query (RFC 3986)',
  ],
  ["https://mcp.example.com/100%", "invalid-syntax", '"%" at position 27 is not followed by two hex digits'],
  ["https://mcp.example.com/%zz", "invalid-syntax", '"%" at position 24 is not followed by two hex digits'],
  ["https://[::1/mcp", "invalid-syntax", 'IP literal at position 8 has no closing "]"'],
  ["https://[::1]x/mcp", "invalid-syntax", 'unexpected "x" after the IP literal'],
  ["https://[::g]/mcp", "invalid-syntax", 'host "[::g]" is not a valid https host'],
  ["https://[v1.fe]/mcp", "invalid-syntax", 'host "[v1.fe]" is not a valid https host'],
  ["https://a%00b/", "invalid-syntax", 'host "a%00b" is not a valid https host'],
]

const expectInvalid = (input: string, reason: CanonicalUri.Reason, message: string, shown = input) => {
  const result = CanonicalUri.validate(input)
  expect(Result.isFailure(result)).toBe(true)
  if (Result.isFailure(result)) {
    expect(result.failure).toBeInstanceOf(CanonicalUri.InvalidCanonicalUri)
    expect(result.failure._tag).toBe("InvalidCanonicalUri")
    expect(result.failure.input).toBe(input)
    expect(result.failure.reason).toBe(reason)
    expect(result.failure.message).toBe(prefix(shown) + message)
  }
}

describe("CanonicalUri.parse", () => {
  it.each(valid)("canonicalises %j to %j", (input, canonical) => {
    expect(CanonicalUri.parse(input)).toBe(canonical)
    expect(CanonicalUri.isValid(input)).toBe(true)
    const result = CanonicalUri.validate(input)
    expect(Result.isSuccess(result) && result.success).toBe(canonical)
  })

  it.each(invalid.filter(([, reason]) => reason !== "userinfo"))("refuses %j (%s)", (input, reason, message) => {
    expectInvalid(input, reason, message)
    expect(CanonicalUri.isValid(input)).toBe(false)
    expect(() => CanonicalUri.parse(input)).toThrow(prefix(input) + message)
  })

  it("refuses userinfo without repeating the credentials in the message", () => {
    const input = "https://user:secret@mcp.example.com/mcp"
    const message = 'userinfo before "@" in the authority; credentials do not belong in a resource identifier'
    expectInvalid(input, "userinfo", message, "https://***@mcp.example.com/mcp")
    expectInvalid("http://@host", "userinfo", message, "http://***@host")
    expect(() => CanonicalUri.parse(input)).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining("secret") }),
    )
  })

  it("covers every reason in the vectors", () => {
    expect(new Set(invalid.map(([, reason]) => reason))).toEqual(new Set(CanonicalUri.reasons))
  })

  it("throws the typed error from parse", () => {
    try {
      CanonicalUri.parse("https://x.example#frag")
      expect.unreachable()
    } catch (error) {
      expect(error).toBeInstanceOf(CanonicalUri.InvalidCanonicalUri)
      expect(error).toBeInstanceOf(Error)
      expect((error as CanonicalUri.InvalidCanonicalUri).reason).toBe("fragment")
    }
  })
})

describe("CanonicalUri.decode", () => {
  it("succeeds with the canonical form", async () => {
    expect(await Effect.runPromise(CanonicalUri.decode("HTTPS://Example.com:443/"))).toBe("https://example.com")
  })

  it("fails with InvalidCanonicalUri", async () => {
    const error = await Effect.runPromise(Effect.flip(CanonicalUri.decode("example.com")))
    expect(error).toBeInstanceOf(CanonicalUri.InvalidCanonicalUri)
    expect(error.reason).toBe("missing-scheme")
    expect(error.message).toBe(`${prefix("example.com")}no scheme (expected scheme://host[:port][/path])`)
  })
})

describe("CanonicalUri.equals", () => {
  it.each([
    ["https://mcp.example.com", "HTTPS://MCP.EXAMPLE.COM/", true],
    ["https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp", true],
    ["https://mcp.example.com/%7Emcp", "https://mcp.example.com/~mcp", true],
    ["https://mcp.example.com/mcp", "https://mcp.example.com/mcp/", false],
    ["https://mcp.example.com/mcp", "https://mcp.example.com/MCP", false],
    ["https://mcp.example.com/mcp", "http://mcp.example.com/mcp", false],
    ["https://mcp.example.com:8443", "https://mcp.example.com", false],
    ["https://mcp.example.com/mcp?a=1", "https://mcp.example.com/mcp", false],
    ["https://mcp.example.com#x", "https://mcp.example.com#x", false],
    ["mcp.example.com", "mcp.example.com", false],
  ] as const)("%j vs %j -> %s", (a, b, same) => {
    expect(CanonicalUri.equals(a, b)).toBe(same)
    expect(CanonicalUri.equals(b, a)).toBe(same)
  })
})

describe("CanonicalUri.origin", () => {
  it.each([
    ["https://mcp.example.com/server/mcp?x=1", "https://mcp.example.com"],
    ["HTTPS://MCP.example.com:443/mcp", "https://mcp.example.com"],
    ["http://[::1]:3000/mcp", "http://[::1]:3000"],
    ["https://mcp.example.com?x=1", "https://mcp.example.com"],
    ["https://mcp.example.com", "https://mcp.example.com"],
  ])("%j -> %j", (uri, origin) => {
    expect(CanonicalUri.origin(uri)).toBe(origin)
  })

  it("throws InvalidCanonicalUri for an invalid URI", () => {
    expect(() => CanonicalUri.origin("/mcp")).toThrow(CanonicalUri.InvalidCanonicalUri)
  })
})

const scheme = fc.mixedCase(fc.constantFrom("http", "https", "ws", "wss", "custom+x", "mcp.v1"))
const host = fc.oneof(
  fc.mixedCase(fc.domain()),
  fc.ipV4(),
  fc.ipV6().map((ip) => `[${ip}]`),
  fc.constantFrom("localhost", "[::1]", "[2001:DB8::1]", "%65xample.com", "%45XAMPLE.com", "h%c3%a9st", "a!b$c"),
)
const port = fc.option(fc.oneof(fc.integer({ min: 0, max: 65535 }).map(String), fc.constantFrom("80", "443", "")), {
  nil: undefined,
})
const segment = fc.oneof(fc.webSegment(), fc.constantFrom(".", "..", "%7e", "%2f", "%c3%a9", "A%41", ""))
const path = fc.array(segment, { maxLength: 5 }).map((segments) => segments.map((s) => `/${s}`).join(""))
const query = fc.option(fc.oneof(fc.webQueryParameters(), fc.constantFrom("", "a=%7e&b=%2F", "x?y/z")), {
  nil: undefined,
})
const uri = fc
  .tuple(scheme, host, port, path, query)
  .map(([s, h, p, pa, q]) => `${s}://${h}${p === undefined ? "" : `:${p}`}${pa}${q === undefined ? "" : `?${q}`}`)

describe("CanonicalUri properties", () => {
  it("accepts every generated absolute URI, and parse is idempotent", () => {
    fc.assert(
      fc.property(uri, (input) => {
        const once = CanonicalUri.parse(input)
        expect(CanonicalUri.parse(once)).toBe(once)
        expect(CanonicalUri.equals(input, once)).toBe(true)
      }),
      { numRuns: 500 },
    )
  })

  it("agrees with the WHATWG parser on the origin of http(s) URIs", () => {
    const web = fc
      .tuple(fc.constantFrom("http", "https"), host, port, path, query)
      .map(([s, h, p, pa, q]) => `${s}://${h}${p === undefined ? "" : `:${p}`}${pa}${q === undefined ? "" : `?${q}`}`)
    fc.assert(
      fc.property(web, (input) => {
        const canonical = CanonicalUri.parse(input)
        expect(new URL(canonical).origin).toBe(new URL(input).origin)
        expect(CanonicalUri.origin(input)).toBe(new URL(input).origin)
      }),
      { numRuns: 300 },
    )
  })

  it("never throws from validate, and whatever it accepts is a fixed point", () => {
    const noisy = fc.oneof(
      fc.string({ unit: "binary" }),
      fc.string({ unit: fc.constantFrom(..."hHtTpPsS:/[]@?#%.1:fF xX\\") }),
      uri.chain((u) => fc.nat(u.length).map((i) => u.slice(0, i) + u.slice(i + 1))),
    )
    fc.assert(
      fc.property(noisy, (input) => {
        const result = CanonicalUri.validate(input)
        if (Result.isSuccess(result)) {
          expect(CanonicalUri.parse(result.success)).toBe(result.success)
        } else {
          expect(result.failure).toBeInstanceOf(CanonicalUri.InvalidCanonicalUri)
          expect(CanonicalUri.reasons).toContain(result.failure.reason)
          expect(result.failure.message.startsWith("Invalid canonical server URI ")).toBe(true)
        }
      }),
      { numRuns: 1000 },
    )
  })

  it("equals is symmetric and reflexive on valid URIs", () => {
    const candidate = fc.oneof(
      uri,
      fc.string(),
      uri.map((u) => u.toUpperCase()),
    )
    fc.assert(
      fc.property(candidate, candidate, (a, b) => {
        expect(CanonicalUri.equals(a, b)).toBe(CanonicalUri.equals(b, a))
        expect(CanonicalUri.equals(a, a)).toBe(CanonicalUri.isValid(a))
      }),
      { numRuns: 500 },
    )
  })

  it("treats case changes of scheme and host as the same resource", () => {
    fc.assert(
      fc.property(scheme, fc.domain(), path, (s, h, pa) => {
        expect(CanonicalUri.equals(`${s}://${h}${pa}`, `${s.toUpperCase()}://${h.toUpperCase()}${pa}`)).toBe(true)
      }),
    )
  })
})
