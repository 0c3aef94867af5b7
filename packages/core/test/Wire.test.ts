import { Effect, Exit, Result } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { z } from "zod"
import * as Wire from "../src/Wire.js"

/** Validates and returns the value, failing the test with the InvalidDocument message otherwise. */
const ok = <S extends z.ZodType>(schema: S, input: unknown): z.infer<S> => {
  const result = Wire.validate(schema, input, "test document")
  if (Result.isFailure(result)) throw new Error(`expected success, got: ${result.failure.message}`)
  return result.success
}

/** The InvalidDocument a rejected input produces. */
const rejection = (schema: z.ZodType, input: unknown, document: string): Wire.InvalidDocument => {
  const result = Wire.validate(schema, input, document)
  if (Result.isSuccess(result)) throw new Error(`expected ${JSON.stringify(input)} to be rejected`)
  return result.failure
}

/** Asserts the exact path and message of a rejection. */
const rejects = (schema: z.ZodType, input: unknown, document: string, path: string, message: string): void => {
  const error = rejection(schema, input, document)
  expect(error).toBeInstanceOf(Wire.InvalidDocument)
  expect(error._tag).toBe("InvalidDocument")
  expect({ document: error.document, path: error.path, message: error.message }).toStrictEqual({
    document,
    path,
    message,
  })
}

// RFC 9728 §3.2
const rfc9728Example = {
  resource: "https://resource.example.com",
  authorization_servers: ["https://as1.example.com", "https://as2.example.net"],
  bearer_methods_supported: ["header", "body"],
  scopes_supported: ["profile", "email", "phone"],
  resource_documentation: "https://resource.example.com/resource_documentation.html",
}

// RFC 8414 §3.2
const rfc8414Example = {
  issuer: "https://server.example.com",
  authorization_endpoint: "https://server.example.com/authorize",
  token_endpoint: "https://server.example.com/token",
  token_endpoint_auth_methods_supported: ["client_secret_basic", "private_key_jwt"],
  token_endpoint_auth_signing_alg_values_supported: ["RS256", "ES256"],
  userinfo_endpoint: "https://server.example.com/userinfo",
  jwks_uri: "https://server.example.com/jwks.json",
  registration_endpoint: "https://server.example.com/register",
  scopes_supported: ["openid", "profile", "email", "address", "phone", "offline_access"],
  response_types_supported: ["code", "code token"],
  service_documentation: "http://server.example.com/service_documentation.html",
  ui_locales_supported: ["en-US", "en-GB", "en-CA", "fr-FR", "fr-CA"],
}

// RFC 7591 §3.1, first and second examples
const rfc7591Request = {
  redirect_uris: ["https://client.example.org/callback", "https://client.example.org/callback2"],
  client_name: "My Example Client",
  "client_name#ja-Jpan-JP": "\u30AF\u30E9\u30A4\u30A2\u30F3\u30C8\u540D",
  token_endpoint_auth_method: "client_secret_basic",
  logo_uri: "https://client.example.org/logo.png",
  jwks_uri: "https://client.example.org/my_public_keys.jwks",
  example_extension_parameter: "example_value",
}
const rfc7591RequestWithStatement = {
  redirect_uris: ["https://client.example.org/callback", "https://client.example.org/callback2"],
  software_statement: "eyJhbGciOiJSUzI1NiJ9.eyJzb2Z0d2FyZV9pZCI6IjROUkIxLTBYWkFCWkk5RTYtNVNNM1IifQ.c2lnbmF0dXJl",
  scope: "read write",
  example_extension_parameter: "example_value",
}

// RFC 7591 §3.2.1
const rfc7591Response = {
  client_id: "s6BhdRkqt3",
  client_secret: "cf136dc3c1fc93f31185e5885805d",
  client_id_issued_at: 2893256800,
  client_secret_expires_at: 2893276800,
  redirect_uris: ["https://client.example.org/callback", "https://client.example.org/callback2"],
  grant_types: ["authorization_code", "refresh_token"],
  client_name: "My Example Client",
  "client_name#ja-Jpan-JP": "\u30AF\u30E9\u30A4\u30A2\u30F3\u30C8\u540D",
  token_endpoint_auth_method: "client_secret_basic",
  logo_uri: "https://client.example.org/logo.png",
  jwks_uri: "https://client.example.org/my_public_keys.jwks",
  example_extension_parameter: "example_value",
}

// RFC 6749 §5.1 and §5.2
const rfc6749TokenResponse = {
  access_token: "2YotnFZFEjr1zCsicMWpAA",
  token_type: "example",
  expires_in: 3600,
  refresh_token: "tGzv3JOkF0XG5Qx2TlKWIA",
  example_parameter: "example_value",
}
const rfc6749ErrorResponse = { error: "invalid_request" }

// RFC 7662 §2.2
const rfc7662Active = {
  active: true,
  client_id: "l238j323ds-23ij4",
  username: "jdoe",
  scope: "read write dolphin",
  sub: "Z5O3upPC88QrAjx00dis",
  aud: "https://protected.example.net/resource",
  iss: "https://server.example.com/",
  exp: 1419356238,
  iat: 1419350238,
  extension_field: "twenty-seven",
}

// The claims RFC 9068 §2.2 requires and §2.2.1 / §2.2.3.1 allow
const rfc9068Claims = {
  iss: "https://authorization-server.example.com/",
  sub: "5ba552d67",
  aud: "https://rs.example.com/",
  exp: 1639528912,
  iat: 1618354090,
  jti: "dbe39bf3a3ba4238a513f51d6e1691c4",
  client_id: "s6BhdRkqt3",
  scope: "openid profile reademail",
  auth_time: 1618354000,
  acr: "urn:mace:incommon:iap:silver",
  amr: ["pwd", "otp"],
  groups: ["admins"],
}

// MCP 2025-11-25, "Client ID Metadata Documents", Example Metadata Document
const mcpClientIdDocumentUrl = "https://app.example.com/oauth/client-metadata.json"
const mcpClientIdDocument = {
  client_id: "https://app.example.com/oauth/client-metadata.json",
  client_name: "Example MCP Client",
  client_uri: "https://app.example.com",
  logo_uri: "https://app.example.com/logo.png",
  redirect_uris: ["http://127.0.0.1:3000/callback", "http://localhost:3000/callback"],
  grant_types: ["authorization_code"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
}

describe("ProtectedResourceMetadata (RFC 9728 §2)", () => {
  const doc = Wire.Documents.protectedResourceMetadata
  const schema = Wire.ProtectedResourceMetadata

  it("accepts the RFC 9728 §3.2 example unchanged", () => {
    expect(ok(schema, rfc9728Example)).toStrictEqual(rfc9728Example)
  })

  it("accepts every RFC 9728 §2 member and keeps unknown ones", () => {
    const full = {
      resource: "https://mcp.example.com/mcp",
      authorization_servers: ["https://auth.example.com/tenant1"],
      jwks_uri: "https://mcp.example.com/jwks.json",
      scopes_supported: ["files:read"],
      bearer_methods_supported: ["header"],
      resource_signing_alg_values_supported: ["ES256"],
      resource_name: "Example MCP server",
      resource_documentation: "https://mcp.example.com/docs",
      resource_policy_uri: "https://mcp.example.com/policy",
      resource_tos_uri: "https://mcp.example.com/tos",
      tls_client_certificate_bound_access_tokens: false,
      authorization_details_types_supported: ["payment_initiation"],
      dpop_signing_alg_values_supported: ["ES256"],
      dpop_bound_access_tokens_required: false,
      signed_metadata: "eyJhbGciOiJFUzI1NiJ9.e30.c2ln",
      "resource_name#fr": "Serveur MCP",
      x_vendor: { nested: true },
    }
    expect(ok(schema, full)).toStrictEqual(full)
  })

  it("leaves authorization_servers optional (the roles require at least one)", () => {
    expect(ok(schema, { resource: "https://mcp.example.com" })).toStrictEqual({ resource: "https://mcp.example.com" })
  })

  it.each([
    [{}, "resource", `${doc}: "resource" is required`],
    [{ resource: 42 }, "resource", `${doc}: "resource" must be a string`],
    [{ resource: "mcp.example.com" }, "resource", `${doc}: "resource" must be a URL`],
    [{ resource: " https://mcp.example.com" }, "resource", `${doc}: "resource" must be a URL`],
    [{ resource: "/mcp" }, "resource", `${doc}: "resource" must be a URL`],
    [
      { ...rfc9728Example, authorization_servers: ["as.example.com"] },
      "authorization_servers.0",
      `${doc}: "authorization_servers.0" must be a URL`,
    ],
    [
      { ...rfc9728Example, authorization_servers: ["https://as.example.com", null] },
      "authorization_servers.1",
      `${doc}: "authorization_servers.1" must be a string`,
    ],
    [
      { ...rfc9728Example, authorization_servers: "https://as.example.com" },
      "authorization_servers",
      `${doc}: "authorization_servers" must be an array of URLs`,
    ],
    [
      { ...rfc9728Example, scopes_supported: "profile email" },
      "scopes_supported",
      `${doc}: "scopes_supported" must be an array of strings`,
    ],
    [
      { ...rfc9728Example, scopes_supported: ["profile", 7] },
      "scopes_supported.1",
      `${doc}: "scopes_supported.1" must be a string`,
    ],
    [
      { ...rfc9728Example, resource_documentation: "docs.html" },
      "resource_documentation",
      `${doc}: "resource_documentation" must be a URL`,
    ],
    [
      { ...rfc9728Example, dpop_bound_access_tokens_required: "true" },
      "dpop_bound_access_tokens_required",
      `${doc}: "dpop_bound_access_tokens_required" must be a boolean`,
    ],
    [{ ...rfc9728Example, jwks_uri: null }, "jwks_uri", `${doc}: "jwks_uri" must be a string`],
    [null, "", `${doc} must be a JSON object`],
    [undefined, "", `${doc} is required`],
    [[rfc9728Example], "", `${doc} must be a JSON object`],
    ["https://resource.example.com", "", `${doc} must be a JSON object`],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("AuthorizationServerMetadata (RFC 8414 §2, OpenID Connect Discovery 1.0 §3)", () => {
  const doc = Wire.Documents.authorizationServerMetadata
  const schema = Wire.AuthorizationServerMetadata

  it("accepts the RFC 8414 §3.2 example unchanged (including its http service_documentation)", () => {
    expect(ok(schema, rfc8414Example)).toStrictEqual(rfc8414Example)
  })

  it("accepts the MCP, RFC 9207, revocation, introspection, PKCE and OpenID members", () => {
    const metadata = {
      ...rfc8414Example,
      code_challenge_methods_supported: ["S256"],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
      revocation_endpoint: "https://server.example.com/revoke",
      introspection_endpoint: "https://server.example.com/introspect",
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: ["RS256"],
      claims_supported: ["sub", "iss"],
      end_session_endpoint: "https://server.example.com/logout",
      mtls_endpoint_aliases: { token_endpoint: "https://mtls.server.example.com/token" },
    }
    const parsed = ok(schema, metadata)
    expect(parsed).toStrictEqual(metadata)
    expect(parsed.client_id_metadata_document_supported).toBe(true)
    expect(parsed.authorization_response_iss_parameter_supported).toBe(true)
  })

  it("requires only issuer", () => {
    expect(ok(schema, { issuer: "https://auth.example.com/tenant1" }).issuer).toBe("https://auth.example.com/tenant1")
  })

  it.each([
    [{ token_endpoint: "https://a/token" }, "issuer", `${doc}: "issuer" is required`],
    [{ issuer: "server.example.com" }, "issuer", `${doc}: "issuer" must be a URL`],
    [{ ...rfc8414Example, token_endpoint: "/token" }, "token_endpoint", `${doc}: "token_endpoint" must be a URL`],
    [
      { ...rfc8414Example, code_challenge_methods_supported: "S256" },
      "code_challenge_methods_supported",
      `${doc}: "code_challenge_methods_supported" must be an array of strings`,
    ],
    [
      { ...rfc8414Example, client_id_metadata_document_supported: "true" },
      "client_id_metadata_document_supported",
      `${doc}: "client_id_metadata_document_supported" must be a boolean`,
    ],
    [
      { ...rfc8414Example, authorization_response_iss_parameter_supported: 1 },
      "authorization_response_iss_parameter_supported",
      `${doc}: "authorization_response_iss_parameter_supported" must be a boolean`,
    ],
    [
      { ...rfc8414Example, mtls_endpoint_aliases: { token_endpoint: "token" } },
      "mtls_endpoint_aliases.token_endpoint",
      `${doc}: "mtls_endpoint_aliases.token_endpoint" must be a URL`,
    ],
    [
      { ...rfc8414Example, scopes_supported: ["openid", ["x"]] },
      "scopes_supported.1",
      `${doc}: "scopes_supported.1" must be a string`,
    ],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("ClientRegistrationRequest (RFC 7591 §2, §3.1)", () => {
  const doc = Wire.Documents.clientRegistrationRequest
  const schema = Wire.ClientRegistrationRequest

  it("accepts both RFC 7591 §3.1 examples unchanged, language-tagged members included", () => {
    expect(ok(schema, rfc7591Request)).toStrictEqual(rfc7591Request)
    expect(ok(schema, rfc7591RequestWithStatement)).toStrictEqual(rfc7591RequestWithStatement)
  })

  it("accepts native-app redirect URIs with private-use schemes and loopback http", () => {
    const request = {
      redirect_uris: ["com.example.app:/oauth2redirect", "http://127.0.0.1:8080/cb"],
      application_type: "native",
      jwks: { keys: [] },
    }
    expect(ok(schema, request)).toStrictEqual(request)
  })

  it.each([
    [{ redirect_uris: ["/callback"] }, "redirect_uris.0", `${doc}: "redirect_uris.0" must be a URL`],
    [{ redirect_uris: "https://c/cb" }, "redirect_uris", `${doc}: "redirect_uris" must be an array of URLs`],
    [{ contacts: "ops@example.com" }, "contacts", `${doc}: "contacts" must be an array of strings`],
    [{ client_uri: "example.org" }, "client_uri", `${doc}: "client_uri" must be a URL`],
    [{ jwks: [] }, "jwks", `${doc}: "jwks" must be a JSON Web Key Set object`],
    [{ jwks: {} }, "jwks.keys", `${doc}: "jwks.keys" is required`],
    [{ jwks: { keys: ["k"] } }, "jwks.keys.0", `${doc}: "jwks.keys.0" must be a JSON object`],
    [
      { jwks: { keys: [] }, jwks_uri: "https://client.example.org/jwks" },
      "jwks",
      `${doc}: "jwks" must not be present together with "jwks_uri"`,
    ],
    [{ software_statement: 5 }, "software_statement", `${doc}: "software_statement" must be a string`],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("ClientRegistrationResponse (RFC 7591 §3.2.1)", () => {
  const doc = Wire.Documents.clientRegistrationResponse
  const schema = Wire.ClientRegistrationResponse

  it("accepts the RFC 7591 §3.2.1 example unchanged", () => {
    expect(ok(schema, rfc7591Response)).toStrictEqual(rfc7591Response)
  })

  it("accepts a public client without secret, and a secret that never expires (0)", () => {
    expect(ok(schema, { client_id: "abc", token_endpoint_auth_method: "none" })).toStrictEqual({
      client_id: "abc",
      token_endpoint_auth_method: "none",
    })
    expect(
      ok(schema, { client_id: "abc", client_secret: "s", client_secret_expires_at: 0 }).client_secret_expires_at,
    ).toBe(0)
  })

  it("reads a client_secret issued without client_secret_expires_at as a secret that never expires (0)", () => {
    // RFC 7591 §3.2.1 makes the member REQUIRED, but deployed servers omit it.
    expect(ok(schema, { client_id: "abc", client_secret: "s", client_name: "App" })).toStrictEqual({
      client_id: "abc",
      client_secret: "s",
      client_name: "App",
      client_secret_expires_at: 0,
    })
  })

  it("keeps a client_secret_expires_at the server sent, and adds none when no secret is issued", () => {
    expect(ok(schema, { client_id: "abc", client_secret: "s", client_secret_expires_at: 2893276800 })).toStrictEqual({
      client_id: "abc",
      client_secret: "s",
      client_secret_expires_at: 2893276800,
    })
    expect(ok(schema, { client_id: "abc" })).toStrictEqual({ client_id: "abc" })
  })

  it.each([
    [{ client_secret: "s", client_secret_expires_at: 0 }, "client_id", `${doc}: "client_id" is required`],
    [{ client_id: "" }, "client_id", `${doc}: "client_id" must not be empty`],
    [{ client_id: 12 }, "client_id", `${doc}: "client_id" must be a string`],
    [
      { client_id: "abc", client_secret: "s", client_secret_expires_at: "0" },
      "client_secret_expires_at",
      `${doc}: "client_secret_expires_at" must be a number`,
    ],
    [{ client_id: "abc", client_secret: 42 }, "client_secret", `${doc}: "client_secret" must be a string`],
    [
      { client_id: "abc", client_secret: "s", jwks: { keys: [] }, jwks_uri: "https://client.example.org/jwks" },
      "jwks",
      `${doc}: "jwks" must not be present together with "jwks_uri"`,
    ],
    [
      { client_id: "abc", client_id_issued_at: "2893256800" },
      "client_id_issued_at",
      `${doc}: "client_id_issued_at" must be a number`,
    ],
    [
      { client_id: "abc", registration_client_uri: "register/abc" },
      "registration_client_uri",
      `${doc}: "registration_client_uri" must be a URL`,
    ],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("ClientIdMetadataDocument", () => {
  const doc = Wire.Documents.clientIdMetadataDocument
  const check = (input: unknown, url: string) => Wire.validateClientIdMetadataDocument(input, url)
  const failure = (input: unknown, url: string) => {
    const result = check(input, url)
    if (Result.isSuccess(result)) throw new Error("expected a rejection")
    return { document: result.failure.document, path: result.failure.path, message: result.failure.message }
  }

  it("accepts the MCP 2025-11-25 example document fetched from its own URL", () => {
    const result = check(mcpClientIdDocument, mcpClientIdDocumentUrl)
    expect(Result.isSuccess(result) && result.success).toStrictEqual(mcpClientIdDocument)
  })

  it("accepts private_key_jwt with jwks_uri or with jwks", () => {
    const base = { ...mcpClientIdDocument, token_endpoint_auth_method: "private_key_jwt" }
    expect(
      Result.isSuccess(check({ ...base, jwks_uri: "https://app.example.com/jwks.json" }, mcpClientIdDocumentUrl)),
    ).toBe(true)
    expect(Result.isSuccess(check({ ...base, jwks: { keys: [{ kty: "EC" }] } }, mcpClientIdDocumentUrl))).toBe(true)
  })

  it("accepts a document without token_endpoint_auth_method and with a query in the URL", () => {
    const { token_endpoint_auth_method: _, ...rest } = mcpClientIdDocument
    expect(Result.isSuccess(check(rest, mcpClientIdDocumentUrl))).toBe(true)
    const url = "https://app.example.com/client?v=2"
    expect(Result.isSuccess(check({ ...rest, client_id: url }, url))).toBe(true)
  })

  const url = mcpClientIdDocumentUrl
  const at = (clientId: string) => ({ ...mcpClientIdDocument, client_id: clientId })
  it.each([
    ["a missing client_id", { ...mcpClientIdDocument, client_id: undefined }, url, "client_id", "is required"],
    ["a missing client_name", { ...mcpClientIdDocument, client_name: undefined }, url, "client_name", "is required"],
    [
      "a missing redirect_uris",
      { ...mcpClientIdDocument, redirect_uris: undefined },
      url,
      "redirect_uris",
      "is required",
    ],
    [
      "a relative redirect URI",
      { ...mcpClientIdDocument, redirect_uris: ["/callback"] },
      url,
      "redirect_uris.0",
      "must be a URL",
    ],
    [
      "a client_id differing from the URL",
      at("https://app.example.com/oauth/other.json"),
      url,
      "client_id",
      `must equal the document URL exactly: expected "${url}", got "https://app.example.com/oauth/other.json"`,
    ],
    [
      "a client_id equal to the URL only after normalisation",
      at("https://APP.example.com/oauth/client-metadata.json"),
      url,
      "client_id",
      `must equal the document URL exactly: expected "${url}", got "https://APP.example.com/oauth/client-metadata.json"`,
    ],
    [
      "an http URL",
      at("http://app.example.com/client.json"),
      "http://app.example.com/client.json",
      "client_id",
      "must use the https scheme",
    ],
    [
      "a URL missing its authority slashes",
      at("https:/app.example.com/client.json"),
      "https:/app.example.com/client.json",
      "client_id",
      "must use the https scheme",
    ],
    [
      "a URL with a backslash",
      at("https://app.example.com\\client.json"),
      "https://app.example.com\\client.json",
      "client_id",
      "must contain only characters allowed in RFC 3986 URIs",
    ],
    [
      "a URL without path",
      at("https://app.example.com"),
      "https://app.example.com",
      "client_id",
      "must contain a path component",
    ],
    [
      "a URL with path /",
      at("https://app.example.com/"),
      "https://app.example.com/",
      "client_id",
      "must contain a path component",
    ],
    [
      "a URL with a fragment",
      at("https://app.example.com/client.json#x"),
      "https://app.example.com/client.json#x",
      "client_id",
      "must not contain a fragment",
    ],
    [
      "a URL with an empty fragment",
      at("https://app.example.com/client.json#"),
      "https://app.example.com/client.json#",
      "client_id",
      "must not contain a fragment",
    ],
    [
      "a URL with userinfo",
      at("https://user:pw@app.example.com/client.json"),
      "https://user:pw@app.example.com/client.json",
      "client_id",
      "must not contain a username or password",
    ],
    [
      "a URL with a dot segment",
      at("https://app.example.com/a/../client.json"),
      "https://app.example.com/a/../client.json",
      "client_id",
      "must not contain dot path segments",
    ],
    [
      "a URL with an encoded dot segment",
      at("https://app.example.com/a/%2E/client.json"),
      "https://app.example.com/a/%2E/client.json",
      "client_id",
      "must not contain dot path segments",
    ],
    [
      "a client_secret",
      { ...mcpClientIdDocument, client_secret: "s3cret" },
      url,
      "client_secret",
      "must not be present: a client identified by a metadata document has no shared secret",
    ],
    [
      "a client_secret_expires_at",
      { ...mcpClientIdDocument, client_secret_expires_at: 0 },
      url,
      "client_secret_expires_at",
      "must not be present: a client identified by a metadata document has no shared secret",
    ],
    [
      "client_secret_basic",
      { ...mcpClientIdDocument, token_endpoint_auth_method: "client_secret_basic" },
      url,
      "token_endpoint_auth_method",
      'must be "none" or "private_key_jwt", got "client_secret_basic"',
    ],
    [
      "client_secret_post",
      { ...mcpClientIdDocument, token_endpoint_auth_method: "client_secret_post" },
      url,
      "token_endpoint_auth_method",
      'must be "none" or "private_key_jwt", got "client_secret_post"',
    ],
    [
      "private_key_jwt without keys",
      { ...mcpClientIdDocument, token_endpoint_auth_method: "private_key_jwt" },
      url,
      "jwks_uri",
      'is required when "token_endpoint_auth_method" is "private_key_jwt" (or give "jwks")',
    ],
    [
      "both jwks and jwks_uri",
      {
        ...mcpClientIdDocument,
        token_endpoint_auth_method: "private_key_jwt",
        jwks: { keys: [] },
        jwks_uri: "https://app.example.com/jwks.json",
      },
      url,
      "jwks",
      'must not be present together with "jwks_uri"',
    ],
  ])("rejects %s", (_name, input, documentUrl, path, problem) => {
    expect(failure(input, documentUrl)).toStrictEqual({ document: doc, path, message: `${doc}: "${path}" ${problem}` })
  })

  it("rejects a document that is not an object", () => {
    expect(failure("{}", url)).toStrictEqual({ document: doc, path: "", message: `${doc} must be a JSON object` })
  })

  it("accepts an uppercase https scheme when client_id matches the URL exactly", () => {
    const upper = "HTTPS://app.example.com/client.json"
    expect(Result.isSuccess(check(at(upper), upper))).toBe(true)
  })

  it("the schema alone checks shapes but not the URL rules", () => {
    expect(ok(Wire.ClientIdMetadataDocument, at("http://app.example.com")).client_id).toBe("http://app.example.com")
  })
})

describe("TokenResponse (RFC 6749 §5.1)", () => {
  const doc = Wire.Documents.tokenResponse
  const schema = Wire.TokenResponse

  it("accepts the RFC 6749 §5.1 example unchanged", () => {
    expect(ok(schema, rfc6749TokenResponse)).toStrictEqual(rfc6749TokenResponse)
  })

  it("accepts an id_token and a minimal response", () => {
    expect(ok(schema, { access_token: "a", token_type: "Bearer", id_token: "e30.e30.sig" }).id_token).toBe(
      "e30.e30.sig",
    )
    expect(ok(schema, { access_token: "a", token_type: "bearer", expires_in: 0 }).expires_in).toBe(0)
  })

  it.each([
    [{ token_type: "Bearer" }, "access_token", `${doc}: "access_token" is required`],
    [{ access_token: "", token_type: "Bearer" }, "access_token", `${doc}: "access_token" must not be empty`],
    [{ access_token: "a" }, "token_type", `${doc}: "token_type" is required`],
    [
      { access_token: "a", token_type: "Bearer", expires_in: "3600" },
      "expires_in",
      `${doc}: "expires_in" must be a number`,
    ],
    [
      { access_token: "a", token_type: "Bearer", expires_in: -1 },
      "expires_in",
      `${doc}: "expires_in" must be a non-negative integer`,
    ],
    [
      { access_token: "a", token_type: "Bearer", expires_in: 1.5 },
      "expires_in",
      `${doc}: "expires_in" must be a non-negative integer`,
    ],
    [{ access_token: "a", token_type: "Bearer", scope: ["a"] }, "scope", `${doc}: "scope" must be a string`],
    [
      { access_token: "a", token_type: "Bearer", refresh_token: null },
      "refresh_token",
      `${doc}: "refresh_token" must be a string`,
    ],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("DeviceAuthorizationResponse (RFC 8628 §3.2)", () => {
  const doc = Wire.Documents.deviceAuthorizationResponse
  const schema = Wire.DeviceAuthorizationResponse
  // RFC 8628 §3.2's example.
  const example = {
    device_code: "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS",
    user_code: "WDJB-MJHT",
    verification_uri: "https://example.com/device",
    verification_uri_complete: "https://example.com/device?user_code=WDJB-MJHT",
    expires_in: 1800,
    interval: 5,
  }

  it("accepts the RFC 8628 §3.2 example unchanged, and one without interval or the complete URI", () => {
    expect(ok(schema, example)).toStrictEqual(example)
    const { interval: _, verification_uri_complete: __, ...minimal } = example
    expect(ok(schema, minimal)).toStrictEqual(minimal)
  })

  it.each([
    [{ ...example, device_code: "" }, "device_code", `${doc}: "device_code" must not be empty`],
    [{ ...example, user_code: undefined }, "user_code", `${doc}: "user_code" is required`],
    [{ ...example, verification_uri: "/device" }, "verification_uri", `${doc}: "verification_uri" must be a URL`],
    [{ ...example, expires_in: 0 }, "expires_in", `${doc}: "expires_in" must be positive`],
    [{ ...example, interval: -5 }, "interval", `${doc}: "interval" must be a non-negative integer`],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("OAuthErrorResponse (RFC 6749 §5.2)", () => {
  const doc = Wire.Documents.errorResponse
  const schema = Wire.OAuthErrorResponse

  it("accepts the RFC 6749 §5.2 example and extension codes", () => {
    expect(ok(schema, rfc6749ErrorResponse)).toStrictEqual(rfc6749ErrorResponse)
    const full = { error: "login_required", error_description: "Sign in", error_uri: "https://as.example.com/e" }
    expect(ok(schema, full)).toStrictEqual(full)
  })

  it.each([
    [{ error_description: "x" }, "error", `${doc}: "error" is required`],
    [{ error: "" }, "error", `${doc}: "error" must not be empty`],
    [{ error: "invalid_request", error_uri: "errors/1" }, "error_uri", `${doc}: "error_uri" must be a URL`],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("IntrospectionResponse (RFC 7662 §2.2)", () => {
  const doc = Wire.Documents.introspectionResponse
  const schema = Wire.IntrospectionResponse

  it("accepts the RFC 7662 §2.2 examples unchanged", () => {
    expect(ok(schema, rfc7662Active)).toStrictEqual(rfc7662Active)
    expect(ok(schema, { active: false })).toStrictEqual({ active: false })
  })

  it("accepts aud as an array", () => {
    expect(ok(schema, { active: true, aud: ["https://a", "https://b"] }).aud).toEqual(["https://a", "https://b"])
  })

  it.each([
    [{ client_id: "x" }, "active", `${doc}: "active" is required`],
    [{ active: "true" }, "active", `${doc}: "active" must be a boolean`],
    [{ active: true, aud: 5 }, "aud", `${doc}: "aud" must be a string or an array of strings`],
    [{ active: true, exp: "1419356238" }, "exp", `${doc}: "exp" must be a number`],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("JwtAccessTokenClaims (RFC 9068 §2.2)", () => {
  const doc = Wire.Documents.jwtAccessTokenClaims
  const schema = Wire.JwtAccessTokenClaims

  it("accepts the required and optional claims unchanged, aud as string or array", () => {
    expect(ok(schema, rfc9068Claims)).toStrictEqual(rfc9068Claims)
    const multi = { ...rfc9068Claims, aud: ["https://rs.example.com/", "https://rs2.example.com/"] }
    expect(ok(schema, multi).aud).toEqual(multi.aud)
  })

  it.each(["iss", "exp", "aud", "sub", "client_id", "iat", "jti"])("requires %s", (claim) => {
    const { [claim]: _, ...rest } = rfc9068Claims as Record<string, unknown>
    rejects(schema, rest, doc, claim, `${doc}: "${claim}" is required`)
  })

  it.each([
    [{ ...rfc9068Claims, aud: 3 }, "aud", `${doc}: "aud" must be a string or an array of strings`],
    [{ ...rfc9068Claims, exp: "soon" }, "exp", `${doc}: "exp" must be a number`],
    [{ ...rfc9068Claims, amr: "pwd" }, "amr", `${doc}: "amr" must be an array of strings`],
    [{ ...rfc9068Claims, sub: "" }, "sub", `${doc}: "sub" must not be empty`],
    [{ ...rfc9068Claims, roles: [1] }, "roles.0", `${doc}: "roles.0" must be a string`],
  ])("rejects %j", (input, path, message) => {
    rejects(schema, input, doc, path, message)
  })
})

describe("parse / decode / validate", () => {
  const schema = Wire.ProtectedResourceMetadata
  const bad = { resource: "https://r.example", authorization_servers: ["nope"] }
  const message = 'protected resource metadata: "authorization_servers.0" must be a URL'

  it("parse returns the value or throws InvalidDocument", () => {
    expect(Wire.parse(schema, rfc9728Example, "protected resource metadata")).toStrictEqual(rfc9728Example)
    expect(() => Wire.parse(schema, bad, "protected resource metadata")).toThrow(Wire.InvalidDocument)
    expect(() => Wire.parse(schema, bad, "protected resource metadata")).toThrow(message)
  })

  it("decode succeeds or fails with InvalidDocument", () => {
    expect(Effect.runSync(Wire.decode(schema, rfc9728Example, "protected resource metadata"))).toStrictEqual(
      rfc9728Example,
    )
    const exit = Effect.runSyncExit(
      Wire.decode(schema, bad, "protected resource metadata").pipe(
        Effect.catchTag("InvalidDocument", (error) => Effect.succeed(`${error.path}|${error.message}`)),
      ),
    )
    expect(exit).toStrictEqual(Exit.succeed(`authorization_servers.0|${message}`))
  })

  it("validate returns a Result", () => {
    const result = Wire.validate(schema, bad, "protected resource metadata")
    expect(Result.isFailure(result) && result.failure.message).toBe(message)
    expect(Result.isSuccess(Wire.validate(schema, rfc9728Example, "x"))).toBe(true)
  })

  it("invalid builds messages for members and for the whole document", () => {
    expect(Wire.invalid("token response", "scope", "must be a string").message).toBe(
      'token response: "scope" must be a string',
    )
    expect(Wire.invalid("token response", "", "must be a JSON object").message).toBe(
      "token response must be a JSON object",
    )
  })

  const schemas: ReadonlyArray<readonly [string, z.ZodType]> = [
    [Wire.Documents.protectedResourceMetadata, Wire.ProtectedResourceMetadata],
    [Wire.Documents.authorizationServerMetadata, Wire.AuthorizationServerMetadata],
    [Wire.Documents.clientIdMetadataDocument, Wire.ClientIdMetadataDocument],
    [Wire.Documents.clientRegistrationRequest, Wire.ClientRegistrationRequest],
    [Wire.Documents.clientRegistrationResponse, Wire.ClientRegistrationResponse],
    [Wire.Documents.tokenResponse, Wire.TokenResponse],
    [Wire.Documents.deviceAuthorizationResponse, Wire.DeviceAuthorizationResponse],
    [Wire.Documents.errorResponse, Wire.OAuthErrorResponse],
    [Wire.Documents.introspectionResponse, Wire.IntrospectionResponse],
    [Wire.Documents.jwtAccessTokenClaims, Wire.JwtAccessTokenClaims],
  ]

  it("never throws on arbitrary JSON; every rejection names its document and, if any, its field", () => {
    const member = fc.constantFrom("resource", "issuer", "client_id", "access_token", "error", "active", "aud", "jwks")
    const input = fc.oneof(fc.jsonValue(), fc.dictionary(member, fc.jsonValue()))
    fc.assert(
      fc.property(fc.constantFrom(...schemas), input, ([document, schema], value) => {
        const result = Wire.validate(schema, value, document)
        if (Result.isFailure(result)) {
          const { path, message: text } = result.failure
          expect(text.startsWith(path === "" ? `${document} ` : `${document}: "${path}" `)).toBe(true)
        }
        const cimd = Wire.validateClientIdMetadataDocument(value, "https://app.example.com/client.json")
        expect(Result.isResult(cimd)).toBe(true)
      }),
    )
  })
})

describe("validateClientIdMetadataDocument properties", () => {
  const base = { client_name: "Example", redirect_uris: ["http://127.0.0.1:3000/callback"] }
  const urls = fc.oneof(
    fc.webUrl({ validSchemes: ["https"], withQueryParameters: true }),
    fc.webUrl({ validSchemes: ["http", "https"], withFragments: true }),
  )

  it("accepts only https URLs with a path and no fragment, and only when client_id is the URL itself", () => {
    fc.assert(
      fc.property(urls, (url) => {
        const result = Wire.validateClientIdMetadataDocument({ ...base, client_id: url }, url)
        if (Result.isSuccess(result)) {
          expect(url.startsWith("https://")).toBe(true)
          expect(url.includes("#")).toBe(false)
          expect(new URL(url).pathname).not.toBe("/")
          expect(result.success.client_id).toBe(url)
        } else {
          expect(result.failure.path).toBe("client_id")
        }
      }),
    )
  })

  it("rejects any client_id that differs from the URL", () => {
    fc.assert(
      fc.property(urls, fc.webUrl(), (url, other) => {
        fc.pre(url !== other)
        const result = Wire.validateClientIdMetadataDocument({ ...base, client_id: other }, url)
        expect(Result.isFailure(result) && result.failure.message).toBe(
          `client ID metadata document: "client_id" must equal the document URL exactly: expected "${url}", got "${other}"`,
        )
      }),
    )
  })
})
