import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CanonicalUri from "../src/CanonicalUri.js"
import * as WellKnown from "../src/WellKnown.js"

describe("WellKnown.protectedResourceMetadataUrls", () => {
  /** [resource, URLs in the order a client tries them]. */
  const vectors: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    // Seed "Endpoints 2": path-specific first, then root.
    [
      "https://example.com/mcp",
      [
        "https://example.com/.well-known/oauth-protected-resource/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
      ],
    ],
    // RFC 9728 §3.1 example.
    [
      "https://resource.example.com/resource1",
      [
        "https://resource.example.com/.well-known/oauth-protected-resource/resource1",
        "https://resource.example.com/.well-known/oauth-protected-resource",
      ],
    ],
    // The path-specific URL does not apply at the root path.
    ["https://example.com", ["https://example.com/.well-known/oauth-protected-resource"]],
    ["https://example.com/", ["https://example.com/.well-known/oauth-protected-resource"]],
    // Ports kept, default ports dropped, case normalised.
    [
      "HTTPS://Example.COM:443/Server/MCP",
      [
        "https://example.com/.well-known/oauth-protected-resource/Server/MCP",
        "https://example.com/.well-known/oauth-protected-resource",
      ],
    ],
    [
      "http://localhost:3000/mcp",
      [
        "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
        "http://localhost:3000/.well-known/oauth-protected-resource",
      ],
    ],
    [
      "http://[::1]:8443/a/b/",
      [
        "http://[::1]:8443/.well-known/oauth-protected-resource/a/b/",
        "http://[::1]:8443/.well-known/oauth-protected-resource",
      ],
    ],
    // RFC 9728 §3.1: the well-known string goes between the host and the path and/or query.
    [
      "https://example.com/mcp?tenant=a",
      [
        "https://example.com/.well-known/oauth-protected-resource/mcp?tenant=a",
        "https://example.com/.well-known/oauth-protected-resource",
      ],
    ],
    [
      "https://example.com/?tenant=a",
      [
        "https://example.com/.well-known/oauth-protected-resource?tenant=a",
        "https://example.com/.well-known/oauth-protected-resource",
      ],
    ],
  ]

  it.each(vectors)("%s", (resource, urls) => {
    expect(WellKnown.protectedResourceMetadataUrls(resource)).toEqual(urls)
    expect(WellKnown.protectedResourceMetadataUrl(resource)).toBe(urls[0])
  })

  it("refuses a resource that is not a canonical server URI", () => {
    expect(() => WellKnown.protectedResourceMetadataUrls("https://example.com/mcp#x")).toThrow(
      'Invalid canonical server URI "https://example.com/mcp#x": a fragment at position 23 (RFC 8707 §2 forbids fragments)',
    )
    expect(() => WellKnown.protectedResourceMetadataUrl("example.com")).toThrow(CanonicalUri.InvalidCanonicalUri)
  })
})

describe("WellKnown.authorizationServerMetadataUrls", () => {
  const oauth = "oauth-authorization-server" as const
  const oidc = "openid-configuration" as const
  /** [issuer, locations]: the seed's table for issuers with and without a path. */
  const vectors: ReadonlyArray<readonly [string, ReadonlyArray<WellKnown.MetadataLocation>]> = [
    [
      "https://auth.example.com",
      [
        { url: "https://auth.example.com/.well-known/oauth-authorization-server", kind: oauth },
        { url: "https://auth.example.com/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    [
      "https://auth.example.com/",
      [
        { url: "https://auth.example.com/.well-known/oauth-authorization-server", kind: oauth },
        { url: "https://auth.example.com/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    [
      "https://auth.example.com/tenant1",
      [
        { url: "https://auth.example.com/.well-known/oauth-authorization-server/tenant1", kind: oauth },
        { url: "https://auth.example.com/.well-known/openid-configuration/tenant1", kind: oidc },
        { url: "https://auth.example.com/tenant1/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    [
      "https://idp.example.com/realms/acme",
      [
        { url: "https://idp.example.com/.well-known/oauth-authorization-server/realms/acme", kind: oauth },
        { url: "https://idp.example.com/.well-known/openid-configuration/realms/acme", kind: oidc },
        { url: "https://idp.example.com/realms/acme/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    [
      "https://idp.example.com/oauth2/default",
      [
        { url: "https://idp.example.com/.well-known/oauth-authorization-server/oauth2/default", kind: oauth },
        { url: "https://idp.example.com/.well-known/openid-configuration/oauth2/default", kind: oidc },
        { url: "https://idp.example.com/oauth2/default/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    // RFC 8414 §3.1 example.
    [
      "https://example.com/issuer1",
      [
        { url: "https://example.com/.well-known/oauth-authorization-server/issuer1", kind: oauth },
        { url: "https://example.com/.well-known/openid-configuration/issuer1", kind: oidc },
        { url: "https://example.com/issuer1/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    // Ports kept; a terminating slash of the path removed (RFC 8414 §3.1, OIDC Discovery §4); query and fragment dropped.
    [
      "https://auth.example.com:8443/tenant1/",
      [
        { url: "https://auth.example.com:8443/.well-known/oauth-authorization-server/tenant1", kind: oauth },
        { url: "https://auth.example.com:8443/.well-known/openid-configuration/tenant1", kind: oidc },
        { url: "https://auth.example.com:8443/tenant1/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    [
      "https://auth.example.com/tenant1?x=1#frag",
      [
        { url: "https://auth.example.com/.well-known/oauth-authorization-server/tenant1", kind: oauth },
        { url: "https://auth.example.com/.well-known/openid-configuration/tenant1", kind: oidc },
        { url: "https://auth.example.com/tenant1/.well-known/openid-configuration", kind: oidc },
      ],
    ],
    [
      "http://localhost:9000?x",
      [
        { url: "http://localhost:9000/.well-known/oauth-authorization-server", kind: oauth },
        { url: "http://localhost:9000/.well-known/openid-configuration", kind: oidc },
      ],
    ],
  ]

  it.each(vectors)("%s", (issuer, locations) => {
    expect(WellKnown.authorizationServerMetadataUrls(issuer)).toEqual(locations)
  })

  it("refuses an issuer that is not an absolute URI with a host", () => {
    expect(() => WellKnown.authorizationServerMetadataUrls("auth.example.com")).toThrow(
      'Invalid canonical server URI "auth.example.com": no scheme (expected scheme://host[:port][/path])',
    )
  })

  it("always lists the inserted forms before the appended one, each a valid URL under the issuer's origin", () => {
    const segment = fc.stringMatching(/^[a-z0-9-]{1,8}$/)
    fc.assert(
      fc.property(fc.domain(), fc.array(segment, { maxLength: 3 }), (host, segments) => {
        const path = segments.map((s) => `/${s}`).join("")
        const issuer = `https://${host}${path}`
        const locations = WellKnown.authorizationServerMetadataUrls(issuer)
        expect(locations.map((l) => l.kind)).toEqual(
          path === ""
            ? ["oauth-authorization-server", "openid-configuration"]
            : ["oauth-authorization-server", "openid-configuration", "openid-configuration"],
        )
        for (const { url } of locations) expect(new URL(url).origin).toBe(new URL(issuer).origin)
        if (path !== "")
          expect(locations[2]!.url).toBe(`${CanonicalUri.parse(issuer)}/.well-known/openid-configuration`)
      }),
    )
  })
})
