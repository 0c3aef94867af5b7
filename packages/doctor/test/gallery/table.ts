/**
 * The gallery: misconfigurations reported in MCP SDK, Inspector, client and server issue trackers, each as the
 * gallery server with one fault, and the findings the doctor must report for it — exactly those, every other check
 * passing. `expected` lists the findings that are not `pass` as "<check> <status>", one per finding. A fault seen
 * only after a login (an audience check that accepts any token) is in login.test.ts: these entries run no login.
 */
import type { DiagnoseOptions } from "../../src/index.js"
import type { Faults } from "./server.js"

export interface GalleryEntry {
  /** What is wrong, in a few words. */
  readonly name: string
  /** The issue or pull request that reports this misconfiguration. */
  readonly source: string
  /** How to start it: the gallery server with these faults. */
  readonly faults: Faults
  /** Options for the diagnosis beyond the server's fetch. */
  readonly options?: Omit<DiagnoseOptions, "fetch">
  /** The findings that are not `pass`, as "<check> <status>". */
  readonly expected: ReadonlyArray<string>
}

const withoutPort = (uri: string): string | undefined => {
  const url = new URL(uri)
  return url.protocol === "http:" && url.port !== "" ? "a loopback redirect URI must not carry a port" : undefined
}

export const gallery: ReadonlyArray<GalleryEntry> = [
  {
    name: "resource with a trailing slash",
    source: "https://github.com/modelcontextprotocol/python-sdk/issues/1265",
    faults: { resourceMetadata: (document, origin) => ({ ...document, resource: `${origin}/mcp/` }) },
    expected: ["prm.resource warn"],
  },
  {
    name: "resource names the origin, not the /mcp endpoint",
    source: "https://github.com/modelcontextprotocol/python-sdk/issues/1264",
    faults: { resourceMetadata: (document, origin) => ({ ...document, resource: `${origin}/` }) },
    expected: ["prm.resource warn"],
  },
  {
    name: "resource on localhost while the server is reached on 127.0.0.1",
    source: "https://github.com/modelcontextprotocol/python-sdk/pull/3275",
    faults: {
      resourceMetadata: (document, origin) => ({
        ...document,
        resource: `${origin.replace("127.0.0.1", "localhost")}/mcp`,
      }),
    },
    expected: ["prm.resource fail"],
  },
  {
    name: "metadata only at the root well-known location for a server under /mcp",
    source: "https://github.com/cyanheads/mcp-ts-core/issues/95",
    faults: { resourceMetadataAt: "root" },
    expected: ["prm.path-location warn"],
  },
  {
    name: "metadata behind a redirect to another origin",
    source: "https://github.com/Gitlawb/zero/pull/991",
    faults: { resourceMetadataElsewhere: true },
    expected: ["prm.no-redirect fail"],
  },
  {
    name: "metadata served as text/html by a catch-all route",
    source: "https://github.com/outline/outline/issues/11572",
    faults: { resourceMetadataContentType: "text/html; charset=utf-8" },
    expected: ["prm.json warn"],
  },
  {
    name: "metadata without resource",
    source: "https://github.com/macro-inc/macro/issues/5519",
    faults: {
      resourceMetadata: ({ resource: _, ...document }) => document,
    },
    expected: ["prm.json fail"],
  },
  {
    name: "a 401 without resource_metadata",
    source: "https://github.com/modelcontextprotocol/csharp-sdk/issues/1050",
    faults: { challenge: () => 'Bearer realm="mcp", scope="notes:read"' },
    expected: ["challenge.resource-metadata fail", "challenge.resource-metadata warn"],
  },
  {
    name: "an error code on the token-less 401",
    source: "https://github.com/Zomato/mcp-server-manifest/issues/39",
    faults: {
      challenge: (url) =>
        `Bearer error="invalid_token", error_description="Authentication required", resource_metadata="${url}", scope="notes:read"`,
    },
    expected: ["challenge.no-error-without-token warn"],
  },
  {
    name: "a 401 without WWW-Authenticate",
    source: "https://github.com/sipyourdrink-ltd/bernstein/issues/3075",
    faults: { challenge: () => null },
    expected: ["challenge.syntax fail"],
  },
  {
    name: "200 instead of 401 to an unauthenticated initialize",
    source: "https://github.com/langgenius/dify/issues/36230",
    faults: { unauthenticatedStatus: 200 },
    expected: ["challenge.status fail"],
  },
  {
    name: "no CORS on the MCP endpoint",
    source: "https://github.com/hauptsacheNet/typo3-mcp-server/issues/115",
    faults: { mcpCors: "none" },
    expected: ["cors.mcp warn"],
  },
  {
    name: "the 401 does not expose WWW-Authenticate to browsers",
    source: "https://github.com/twentyhq/twenty/pull/19836",
    faults: { mcpCors: "no-expose" },
    expected: ["cors.mcp warn"],
  },
  {
    name: "no CORS on the protected resource metadata",
    source: "https://github.com/juspay/juspay-mcp/pull/127",
    faults: { resourceMetadataCors: false },
    expected: ["cors.prm warn"],
  },
  {
    name: "no CORS at the authorization server",
    source: "https://github.com/aks129/HealthClawGuardrails/issues/523",
    faults: { authorizationServerCors: false },
    expected: ["as.cors warn"],
  },
  {
    name: "issuer with a trailing slash",
    source: "https://github.com/modelcontextprotocol/python-sdk/issues/1919",
    faults: { authorizationServerMetadata: (document, origin) => ({ ...document, issuer: `${origin}/` }) },
    expected: ["as.issuer fail"],
  },
  {
    name: "PKCE without S256",
    source: "https://github.com/empires-security/mcp-oauth2-aws-cognito/issues/9",
    faults: {
      authorizationServerMetadata: (document) => ({ ...document, code_challenge_methods_supported: ["plain"] }),
    },
    expected: ["as.pkce-s256 fail"],
  },
  {
    name: "code_challenge_methods_supported absent",
    source: "https://github.com/modelcontextprotocol/typescript-sdk/issues/2831",
    faults: {
      authorizationServerMetadata: ({ code_challenge_methods_supported: _, ...document }) => document,
    },
    // Clients of 2025-11-25 and later refuse to proceed; older ones do not all check.
    expected: ["as.pkce-s256 fail", "as.pkce-s256 warn"],
  },
  {
    name: "only OpenID Connect discovery, no RFC 8414 metadata",
    source: "https://github.com/modelcontextprotocol/typescript-sdk/issues/616",
    faults: { authorizationServerMetadataAt: ["openid-configuration"] },
    // 2025-06-18 clients try RFC 8414 only; 2025-03-26 clients fall back to the default endpoints.
    expected: ["as.metadata fail", "as.metadata warn"],
  },
  {
    name: "http on a public host",
    source: "https://github.com/mesh/mesh-mcp/issues/20",
    faults: { publicOrigin: "http://mcp.example.com" },
    expected: ["transport.https fail", "as.endpoints fail", "as.http-issuer fail"],
  },
  {
    name: "no `none` token endpoint authentication method beside dynamic registration",
    source: "https://github.com/modelcontextprotocol/typescript-sdk/issues/1027",
    faults: {
      authorizationServerMetadata: (document) => ({
        ...document,
        token_endpoint_auth_methods_supported: ["client_secret_post"],
      }),
    },
    expected: ["as.token-auth-methods warn"],
  },
  {
    name: "no RFC 9207 iss parameter",
    source: "https://github.com/PrefectHQ/fastmcp/issues/4432",
    faults: {
      authorizationServerMetadata: ({ authorization_response_iss_parameter_supported: _, ...document }) => document,
    },
    expected: ["as.iss-parameter warn"],
  },
  {
    name: "a JWK Set with a symmetric key only",
    source: "https://github.com/better-auth/better-auth/issues/11121",
    faults: { jwks: { keys: [{ kty: "oct", kid: "hs", use: "sig", alg: "HS256" }] } },
    expected: ["as.jwks fail"],
  },
  {
    name: "the resource's scopes unknown to the authorization server",
    source: "https://github.com/theam/facility/pull/236",
    faults: {
      authorizationServerMetadata: (document) => ({ ...document, scopes_supported: ["openid", "profile"] }),
    },
    expected: ["as.scopes warn"],
  },
  {
    name: "registration refuses loopback redirect URIs with a port",
    source: "https://github.com/cloudflare/workers-oauth-provider/issues/35",
    faults: { refuseRedirectUri: withoutPort },
    expected: ["registration.loopback fail"],
  },
  {
    name: "registration refuses 127.0.0.1 and accepts only localhost",
    source: "https://github.com/RevenueCat/ai-toolkit/issues/58",
    faults: {
      refuseRedirectUri: (uri) => (new URL(uri).hostname === "127.0.0.1" ? "only localhost is allowed" : undefined),
    },
    expected: ["registration.loopback fail"],
  },
  {
    name: "registration refuses hosted client callbacks",
    source: "https://github.com/anthropics/claude-ai-mcp/issues/158",
    faults: {
      refuseRedirectUri: (uri) => (new URL(uri).protocol === "https:" ? "only local clients may register" : undefined),
    },
    expected: ["registration.hosted-callbacks warn", "registration.hosted-callbacks warn"],
  },
  {
    name: "an authorization server that rejects resource",
    source: "https://github.com/ChronoAIProject/NyxID/issues/1226",
    faults: { rejectResource: true },
    expected: ["authorization.resource fail", "token.resource fail"],
  },
  {
    name: "a Date header ten minutes off",
    source: "https://github.com/keycloak/keycloak/pull/5014",
    faults: { dateOffsetMs: 600_000 },
    expected: ["clock.skew fail"],
  },
]
