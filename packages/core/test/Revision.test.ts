import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Revision from "../src/Revision.js"

const sign = (n: number): number => (n > 0 ? 1 : n < 0 ? -1 : 0)

describe("Revision values", () => {
  it("lists the four revisions oldest first, with latest and default", () => {
    expect(Revision.all).toEqual(["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"])
    expect(Revision.latest).toBe("2026-07-28")
    expect(Revision.default).toBe("2025-11-25")
    expect(Revision.all.at(-1)).toBe(Revision.latest)
  })

  it("recognises revisions and nothing else", () => {
    for (const r of Revision.all) expect(Revision.isRevision(r)).toBe(true)
    for (const s of ["", "2024-11-05", "2025-11-25 ", "draft", "2025-11-26", "DRAFT"]) {
      expect(Revision.isRevision(s)).toBe(false)
    }
  })

  it("compares revisions by date", () => {
    expect(Revision.compare("2025-03-26", "2025-06-18")).toBeLessThan(0)
    expect(Revision.compare("2026-07-28", "2025-11-25")).toBeGreaterThan(0)
    expect(Revision.compare("2025-11-25", "2025-11-25")).toBe(0)
    const revision = fc.constantFrom(...Revision.all)
    fc.assert(
      fc.property(revision, revision, (a, b) => {
        expect(sign(Revision.compare(a, b))).toBe(sign(a.localeCompare(b)))
        expect(sign(Revision.compare(a, b))).toBe(-sign(Revision.compare(b, a)) || 0)
      }),
    )
    expect(
      ["2026-07-28", "2025-03-26", "2025-11-25", "2025-06-18"].filter(Revision.isRevision).sort(Revision.compare),
    ).toEqual(Revision.all)
  })
})

describe("Revision.features", () => {
  const f = Revision.features

  it("2025-06-18 -> 2025-11-25 follows the seed's Versioning table", () => {
    const earlier = f("2025-06-18")
    const later = f("2025-11-25")
    // Client ID metadata documents: absent -> supported
    expect([earlier.clientIdMetadataDocuments, later.clientIdMetadataDocuments]).toEqual([false, true])
    // Dynamic client registration: SHOULD -> MAY
    expect([earlier.dynamicRegistration, later.dynamicRegistration]).toEqual(["should", "may"])
    // Authorization server discovery: RFC 8414 only -> RFC 8414 or OpenID Connect Discovery
    expect([earlier.openIdDiscovery, later.openIdDiscovery]).toEqual([false, true])
    // Protected resource metadata location: header mandatory -> header or well-known fallback
    expect([earlier.wellKnownPrmFallback, later.wellKnownPrmFallback]).toEqual([false, true])
    // Scope guidance: absent -> present
    expect([earlier.scopeChallenges, later.scopeChallenges]).toEqual([false, true])
    // PKCE: MUST implement -> additionally MUST verify support through metadata
    expect([earlier.pkceMetadataCheck, later.pkceMetadataCheck]).toEqual([false, true])
    // Extensions: absent -> present
    expect([earlier.extensions, later.extensions]).toEqual([false, true])
    // Unchanged between the two
    expect([earlier.protectedResourceMetadata, later.protectedResourceMetadata]).toEqual([true, true])
    expect([earlier.resourceParameter, later.resourceParameter]).toEqual([true, true])
  })

  it("2025-03-26 predates protected resource metadata and resource indicators and uses default endpoints", () => {
    const legacy = f("2025-03-26")
    expect(legacy.protectedResourceMetadata).toBe(false)
    expect(legacy.resourceParameter).toBe(false)
    expect(legacy.legacyDefaultEndpoints).toBe(true)
    expect(legacy.dynamicRegistration).toBe("should")
    expect(Revision.all.filter((r) => f(r).legacyDefaultEndpoints)).toEqual(["2025-03-26"])
  })

  it("2026-07-28 adds the RFC 9207 iss rules, offline_access, scope union, issuer-bound credentials, deprecates DCR", () => {
    const next = f("2026-07-28")
    expect(next.issParameter).toBe("required-when-advertised")
    expect(next.offlineAccess).toBe(true)
    expect(next.stepUpScopeUnion).toBe(true)
    expect(next.dynamicRegistrationDeprecated).toBe(true)
    expect(next.dynamicRegistration).toBe("may")
    expect(next.registrationApplicationType).toBe(true)
    expect(next.issuerBoundCredentials).toBe(true)
    for (const r of ["2025-03-26", "2025-06-18", "2025-11-25"] as const) {
      expect(f(r).issParameter).toBe("optional")
      expect(f(r).offlineAccess).toBe(false)
      expect(f(r).stepUpScopeUnion).toBe(false)
      expect(f(r).dynamicRegistrationDeprecated).toBe(false)
      expect(f(r).registrationApplicationType).toBe(false)
      expect(f(r).issuerBoundCredentials).toBe(false)
    }
  })

  it("never takes a boolean capability away in a later revision, except the 2025-03-26 default endpoints", () => {
    const keys = Object.keys(f("2025-11-25")) as Array<keyof Revision.Features>
    for (let i = 1; i < Revision.all.length; i++) {
      const before = f(Revision.all[i - 1] as Revision.Revision)
      const after = f(Revision.all[i] as Revision.Revision)
      for (const key of keys) {
        if (key === "legacyDefaultEndpoints" || typeof before[key] !== "boolean") continue
        if (before[key] === true) expect(after[key], `${key} in ${Revision.all[i]}`).toBe(true)
      }
    }
  })

  it("every revision defines every switch", () => {
    const keys = Object.keys(f(Revision.latest)).sort()
    for (const r of Revision.all) expect(Object.keys(f(r)).sort()).toEqual(keys)
  })
})

describe("Revision.legacyEndpoints (2025-03-26)", () => {
  it("discards the path of the MCP server URL", () => {
    expect(Revision.legacyEndpoints("https://api.example.com/v1/mcp")).toStrictEqual({
      baseUrl: "https://api.example.com",
      metadata: "https://api.example.com/.well-known/oauth-authorization-server",
      authorization_endpoint: "https://api.example.com/authorize",
      token_endpoint: "https://api.example.com/token",
      registration_endpoint: "https://api.example.com/register",
    })
  })

  it("keeps a non-default port and drops query and fragment", () => {
    expect(Revision.legacyEndpoints("http://127.0.0.1:8080/mcp?x=1#f").token_endpoint).toBe(
      "http://127.0.0.1:8080/token",
    )
    expect(Revision.legacyEndpoints("HTTPS://API.Example.COM:443").baseUrl).toBe("https://api.example.com")
  })

  it("throws for URLs without an origin", () => {
    expect(() => Revision.legacyEndpoints("/mcp")).toThrow(TypeError)
    expect(() => Revision.legacyEndpoints("urn:example:mcp")).toThrow("MCP server URL has no origin: urn:example:mcp")
  })
})
