import type { Wire } from "@keyway/core"
import { rpc } from "@keyway/testing/peers"
import { describe, expect, it } from "vitest"
import type { AuthError } from "../src/AuthError.js"
import { promptFor, selectScope } from "../src/Authorization.js"
import { headless } from "../src/UserAgent.js"
import { rejection, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })
const initialize = post(rpc("initialize"))
const CALLBACK = "http://127.0.0.1/callback"

describe("callback: state", () => {
  it("discards a response whose state differs, without redeeming the code", async () => {
    const { as, rs, client } = await world({ as: { tamperRedirect: (p) => p.set("state", "forged") } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "state-mismatch", url: CALLBACK })
    expect((error as AuthError).message).toBe(
      `the authorization response at ${CALLBACK} carries a state that does not match the request; it was discarded (it may be forged or from another request)`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("discards a response without state", async () => {
    const { as, rs, client } = await world({ as: { tamperRedirect: (p) => p.delete("state") } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "state-missing", url: CALLBACK })
    expect((error as AuthError).message).toBe(
      `the authorization response at ${CALLBACK} carries no state; it was discarded (it may be forged or from another request)`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("discards a response with an empty state as one without state", async () => {
    const { as, rs, client } = await world({ as: { tamperRedirect: (p) => p.set("state", "") } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "state-missing", url: CALLBACK })
    expect(as.tokenRequests).toHaveLength(0)
  })
})

describe("callback: repeated parameters (RFC 6749 §3.1)", () => {
  it("refuses a response that carries iss twice, even with the right value", async () => {
    const { as, rs, client } = await world({ as: { tamperRedirect: (p) => p.append("iss", p.get("iss") ?? "") } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "invalid-input", url: CALLBACK })
    expect((error as AuthError).message).toBe(
      `the authorization response at ${CALLBACK} carries iss 2 times; a parameter may appear only once (RFC 6749 §3.1)`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })
})

describe("callback: iss (RFC 9207, MCP 2026-07-28 table)", () => {
  it("rejects a wrong iss when the server advertises iss support", async () => {
    const { as, rs, client } = await world({ as: { iss: { value: "https://attacker.example" } } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "iss-mismatch", url: CALLBACK })
    expect((error as AuthError).message).toBe(
      `the authorization response at ${CALLBACK} has iss "https://attacker.example" but the request went to "${as.issuer}"; rejected as a possible mix-up attack (RFC 9207)`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("rejects an iss that differs only by a trailing slash (no normalisation)", async () => {
    const { as, rs, client } = await world({ as: { tamperRedirect: (p) => p.set("iss", `${p.get("iss")}/`) } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "iss-mismatch" })
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("rejects a missing iss when the server advertises iss support", async () => {
    const { as, rs, client } = await world({ as: { iss: "no" } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "iss-missing", url: CALLBACK })
    expect((error as AuthError).message).toBe(
      `the authorization response at ${CALLBACK} has no iss although ${as.issuer} advertises authorization_response_iss_parameter_supported; rejected as a possible mix-up attack (RFC 9207)`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("rejects an unexpected iss from a server that does not advertise iss support", async () => {
    const { as, rs, client } = await world({
      as: {
        metadata: (m) => ({ ...m, authorization_response_iss_parameter_supported: false }),
        iss: { value: "https://other.example" },
      },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "iss-unexpected", url: CALLBACK })
    expect((error as AuthError).message).toBe(
      `the authorization response at ${CALLBACK} has iss "https://other.example" but the request went to "${as.issuer}"; rejected as a possible mix-up attack (RFC 9207)`,
    )
    expect(as.tokenRequests).toHaveLength(0)
  })

  it("accepts a correct iss from a server that does not advertise support, and no iss when not advertised", async () => {
    const sends = await world({
      as: { metadata: (m) => ({ ...m, authorization_response_iss_parameter_supported: false }), iss: "yes" },
    })
    expect((await sends.client.fetch(sends.rs.url, initialize)).status).toBe(200)
    const omits = await world({
      as: { metadata: (m) => ({ ...m, authorization_response_iss_parameter_supported: false }), iss: "no" },
    })
    expect((await omits.client.fetch(omits.rs.url, initialize)).status).toBe(200)
  })

  it("does not surface an error response whose iss is wrong", async () => {
    const { rs, client } = await world({
      as: {
        iss: { value: "https://attacker.example" },
        tamperRedirect: (p) => {
          p.delete("code")
          p.set("error", "access_denied")
        },
      },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "iss-mismatch" })
  })
})

describe("authorization errors", () => {
  it("surfaces an error response as a typed error with the OAuth code", async () => {
    const { as, rs, client } = await world({
      as: {
        tamperRedirect: (p) => {
          p.delete("code")
          p.set("error", "access_denied")
          p.set("error_description", "the user said no")
        },
      },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({
      step: "authorization",
      reason: "authorization-error",
      url: CALLBACK,
      error: "access_denied",
    })
    expect((error as AuthError).message).toBe(
      `the authorization server ${as.issuer} answered the authorization request with access_denied: the user said no`,
    )
  })

  it("fails when the response has neither code nor error", async () => {
    const { rs, client } = await world({ as: { tamperRedirect: (p) => p.delete("code") } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "callback", reason: "code-missing", url: CALLBACK })
    expect((error as AuthError).message).toBe(
      `the authorization response at ${CALLBACK} carries neither code nor error`,
    )
  })

  it("stops a redirect loop at the authorization endpoint after the cap", async () => {
    const { as, rs, client } = await world({
      as: { authorizeReply: (url) => ({ status: 302, headers: { location: url.href } }) },
      client: { userAgent: headless({ maxRedirects: 5 }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "authorization", reason: "redirect-loop", url: `${as.issuer}/authorize` })
    expect((error as AuthError).message).toBe(
      `the authorization request did not come back to ${CALLBACK} within 5 redirects; the authorization server is redirecting in a loop`,
    )
    expect(as.authorizations).toHaveLength(6)
  })

  it("reports a login page as interaction-required for the headless agent", async () => {
    const { as, rs, client } = await world({
      as: { authorizeReply: () => ({ status: 200, headers: { "content-type": "text/html" }, body: "<form>" }) },
    })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "authorization", reason: "interaction-required", status: 200 })
    expect((error as AuthError).message).toBe(
      `${as.issuer}/authorize answered HTTP 200 instead of redirecting; the authorization server needs a person, use the browser user agent`,
    )
  })
})

describe("scope selection", () => {
  const serverMetadata = { issuer: "https://as.example", scopes_supported: ["a", "offline_access"] }
  const resourceMetadata = { resource: "https://rs.example", scopes_supported: ["r1", "r2"] }

  it("prefers explicit scopes, then the challenge, then scopes_supported, else none", () => {
    const base = { serverMetadata, resourceMetadata, offlineAccess: false }
    expect(selectScope({ ...base, explicit: "x y", challenge: "c" })).toEqual(["x", "y"])
    expect(selectScope({ ...base, challenge: "c d" })).toEqual(["c", "d"])
    expect(selectScope(base)).toEqual(["r1", "r2"])
    expect(selectScope({ serverMetadata, offlineAccess: false })).toEqual([])
  })

  it("adds offline_access only when wanted, listed by the server, and some scope is requested", () => {
    expect(selectScope({ serverMetadata, resourceMetadata, offlineAccess: true })).toEqual([
      "r1",
      "r2",
      "offline_access",
    ])
    expect(
      selectScope({ serverMetadata: { issuer: "https://as.example" }, resourceMetadata, offlineAccess: true }),
    ).toEqual(["r1", "r2"])
    expect(selectScope({ serverMetadata, offlineAccess: true })).toEqual([])
  })
})

describe("prompt=consent with offline_access for OpenID providers (OpenID Connect Core §11)", () => {
  const server = (metadataUrl: string | undefined, extra: Record<string, unknown> = {}) => ({
    issuer: "https://as.example",
    metadata: { issuer: "https://as.example", ...extra } as Wire.AuthorizationServerMetadata,
    metadataUrl,
  })
  const OPENID = "https://as.example/.well-known/openid-configuration"
  const OAUTH = "https://as.example/.well-known/oauth-authorization-server"

  it.each([
    ["OpenID metadata, offline_access", ["r", "offline_access"], server(OPENID), "consent"],
    [
      "OpenID metadata appended to a path issuer",
      ["offline_access"],
      server("https://as.example/tenant/.well-known/openid-configuration"),
      "consent",
    ],
    ["OpenID metadata without offline_access", ["r"], server(OPENID), undefined],
    ["RFC 8414 metadata", ["r", "offline_access"], server(OAUTH), undefined],
    [
      "RFC 8414 metadata listing prompt consent",
      ["offline_access"],
      server(OAUTH, { prompt_values_supported: ["none", "consent"] }),
      "consent",
    ],
    [
      "OpenID metadata whose prompt values lack consent",
      ["offline_access"],
      server(OPENID, { prompt_values_supported: ["none", "login"] }),
      undefined,
    ],
    ["2025-03-26 default endpoints", ["offline_access"], server(undefined), undefined],
    [
      "an OpenID provider's document at the RFC 8414 location",
      ["offline_access"],
      server(OAUTH, { subject_types_supported: ["public"], id_token_signing_alg_values_supported: ["RS256"] }),
      "consent",
    ],
    [
      "RFC 8414 metadata with only one of the OpenID members",
      ["offline_access"],
      server(OAUTH, { subject_types_supported: ["public"] }),
      undefined,
    ],
  ] as const)("%s", (_name, scope, discovered, expected) => {
    expect(promptFor(scope, discovered)).toBe(expected)
  })

  it("sends prompt=consent to a server found through OpenID Connect Discovery, none to an RFC 8414 one", async () => {
    const openid = await world({ as: { metadataAt: ["openid"] } })
    await openid.client.fetch(openid.rs.url, initialize)
    expect(openid.as.authorizations[0]?.get("scope")).toBe("tools:read offline_access")
    expect(openid.as.authorizations[0]?.get("prompt")).toBe("consent")
    const oauth = await world({ as: { metadataAt: ["oauth"] } })
    await oauth.client.fetch(oauth.rs.url, initialize)
    expect(oauth.as.authorizations[0]?.get("scope")).toBe("tools:read offline_access")
    expect(oauth.as.authorizations[0]?.has("prompt")).toBe(false)
  })
})
