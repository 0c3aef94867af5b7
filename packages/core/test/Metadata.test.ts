import { Result } from "effect"
import { describe, expect, it } from "vitest"
import * as Metadata from "../src/Metadata.js"

const ISSUER = "https://as.example.com"
const URL_ASM = "https://as.example.com/.well-known/oauth-authorization-server"
const asm = (extra: Record<string, unknown> = {}) => ({
  issuer: ISSUER,
  authorization_endpoint: `${ISSUER}/authorize`,
  token_endpoint: `${ISSUER}/token`,
  code_challenge_methods_supported: ["S256"],
  ...extra,
})

const problem = <A>(result: Result.Result<A, Metadata.MetadataProblem>) => {
  if (Result.isSuccess(result)) throw new Error("expected a refusal")
  const { reason, url, message } = result.failure
  return { tag: result.failure._tag, reason, url, message }
}

describe("Metadata.processAuthorizationServerMetadata (RFC 8414 §3.3)", () => {
  it("accepts a document for the expected issuer and keeps every member", () => {
    const result = Metadata.processAuthorizationServerMetadata(ISSUER, URL_ASM, asm({ jwks_uri: `${ISSUER}/jwks` }))
    expect(Result.getOrThrow(result)).toEqual(asm({ jwks_uri: `${ISSUER}/jwks` }))
  })

  it.each<[string, unknown, Metadata.AuthorizationServerMetadataOptions, Metadata.ProblemReason, string]>([
    [
      "not an object",
      "nope",
      {},
      "invalid-document",
      `the authorization server metadata at ${URL_ASM} is invalid: authorization server metadata must be a JSON object`,
    ],
    [
      "issuer differs by a trailing slash",
      asm({ issuer: `${ISSUER}/` }),
      {},
      "issuer-mismatch",
      `the authorization server metadata at ${URL_ASM} has issuer "${ISSUER}/" but "${ISSUER}" was expected (compared exactly, without normalisation); refusing to use it`,
    ],
    [
      "legacy issuer at another origin",
      asm({ issuer: "https://other.example.com" }),
      { legacy: true },
      "issuer-mismatch",
      `the authorization server metadata at ${URL_ASM} has issuer "https://other.example.com", which is not an https (or loopback http) URL at the MCP server's origin ${ISSUER} (2025-03-26 fallback, no protected resource metadata); refusing to use it`,
    ],
    [
      "no PKCE methods",
      asm({ code_challenge_methods_supported: undefined }),
      {},
      "pkce-unsupported",
      `the authorization server metadata at ${URL_ASM} has no code_challenge_methods_supported, so PKCE support cannot be verified; the authorization server must list S256`,
    ],
    [
      "PKCE without S256",
      asm({ code_challenge_methods_supported: ["plain"] }),
      {},
      "pkce-unsupported",
      `the authorization server metadata at ${URL_ASM} lists code_challenge_methods_supported [plain] without S256; the authorization server must support PKCE S256`,
    ],
    [
      "no token endpoint",
      asm({ token_endpoint: undefined }),
      {},
      "missing-endpoint",
      `the authorization server metadata at ${URL_ASM} has no token_endpoint; the authorization code flow needs it`,
    ],
    [
      "no jwks_uri when the caller needs keys",
      asm(),
      { pkce: false, endpoints: ["jwks_uri"] },
      "missing-endpoint",
      `the authorization server metadata at ${URL_ASM} has no jwks_uri; its signing keys cannot be found`,
    ],
  ])("refuses %s", (_, json, options, reason, message) => {
    const refused = problem(Metadata.processAuthorizationServerMetadata(ISSUER, URL_ASM, json, options))
    expect(refused).toEqual({ tag: "MetadataProblem", reason, url: URL_ASM, message })
  })

  it("in the 2025-03-26 fallback, accepts an issuer with a path at the MCP server's origin", () => {
    const json = asm({ issuer: `${ISSUER}/tenant` })
    expect(Result.isSuccess(Metadata.processAuthorizationServerMetadata(ISSUER, URL_ASM, json, { legacy: true }))).toBe(
      true,
    )
    expect(problem(Metadata.processAuthorizationServerMetadata(ISSUER, URL_ASM, json)).reason).toBe("issuer-mismatch")
  })

  it("checks no PKCE and no endpoint when told so", () => {
    const json = { issuer: ISSUER, jwks_uri: `${ISSUER}/jwks` }
    const result = Metadata.processAuthorizationServerMetadata(ISSUER, URL_ASM, json, {
      pkce: false,
      endpoints: ["jwks_uri"],
    })
    expect(Result.getOrThrow(result).jwks_uri).toBe(`${ISSUER}/jwks`)
  })
})

describe("Metadata.legacyIssuerAccepted (MCP 2025-03-26)", () => {
  it.each<[string, string, boolean]>([
    ["https://mcp.example.com/tenant", "https://mcp.example.com", true],
    ["https://mcp.example.com", "https://mcp.example.com", true],
    ["https://other.example.com", "https://mcp.example.com", false],
    ["http://mcp.example.com/x", "http://mcp.example.com", false],
    ["http://127.0.0.1:8080/x", "http://127.0.0.1:8080", true],
    ["https://mcp.example.com/x?y=1", "https://mcp.example.com", false],
    ["https://mcp.example.com/x#f", "https://mcp.example.com", false],
    ["https://u:p@mcp.example.com/x", "https://mcp.example.com", false],
    ["not a url", "https://mcp.example.com", false],
  ])("%s at %s -> %s", (issuer, origin, accepted) => {
    expect(Metadata.legacyIssuerAccepted(issuer, origin)).toBe(accepted)
  })
})

describe("Metadata.processProtectedResourceMetadata (RFC 9728 §3.3)", () => {
  const SERVER = "https://mcp.example.com/mcp"
  const URL_PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

  it("accepts metadata for the server, or for a path prefix of it", () => {
    for (const resource of [SERVER, "https://MCP.example.com/mcp", "https://mcp.example.com"]) {
      const json = { resource, authorization_servers: [ISSUER] }
      expect(Result.getOrThrow(Metadata.processProtectedResourceMetadata(SERVER, URL_PRM, json))).toEqual(json)
    }
  })

  it.each<[string, unknown, Metadata.ProblemReason, string]>([
    [
      "a resource with a path that is no segment prefix",
      { resource: "https://mcp.example.com/mc", authorization_servers: [ISSUER] },
      "resource-mismatch",
      `the protected resource metadata at ${URL_PRM} is for resource "https://mcp.example.com/mc", not for ${SERVER}; refusing to authorize for another server`,
    ],
    [
      "another origin",
      { resource: "https://mcp.example.com:8443/mcp", authorization_servers: [ISSUER] },
      "resource-mismatch",
      `the protected resource metadata at ${URL_PRM} is for resource "https://mcp.example.com:8443/mcp", not for ${SERVER}; refusing to authorize for another server`,
    ],
    [
      "no authorization servers",
      { resource: SERVER, authorization_servers: [] },
      "no-authorization-servers",
      `the protected resource metadata at ${URL_PRM} lists no authorization_servers; the MCP server must name at least one`,
    ],
    [
      "no resource",
      { authorization_servers: [ISSUER] },
      "invalid-document",
      `the protected resource metadata at ${URL_PRM} is invalid: protected resource metadata: "resource" is required`,
    ],
  ])("refuses %s", (_, json, reason, message) => {
    const refused = problem(Metadata.processProtectedResourceMetadata(SERVER, URL_PRM, json))
    expect(refused).toEqual({ tag: "MetadataProblem", reason, url: URL_PRM, message })
  })
})
