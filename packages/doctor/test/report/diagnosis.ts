import type { CheckEntry, Diagnosis, Exchange } from "../../src/index.ts"

/** A catalog of the checks the hand-built diagnoses use, shaped as the stages' entries. */
export const CATALOG: Readonly<Record<string, CheckEntry>> = {
  "mcp.reachable": {
    title: "The MCP server answers",
    why: "No client gets anywhere when the server does not answer.",
    fix: "Start the server and check its URL.",
    spec: "https://modelcontextprotocol.io/specification/2025-11-25/basic/transports",
  },
  "prm.resource": {
    title: "The protected resource metadata names this server as its resource",
    why: "Clients refuse metadata whose resource is not the server they asked (MCP 2025-06-18 and later; RFC 9728 §3.3).",
    fix: "Set resource to the exact URL clients use, https://mcp.example.com/mcp.",
    spec: "https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3",
  },
  "challenge.scope": {
    title: "The 401 challenge names the scope to ask for",
    why: "Without scope, clients of 2025-11-25 ask for every scope of the metadata or none.",
    fix: 'Add scope="..." to the Bearer challenge.',
    spec: "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-selection-strategy",
  },
  "as.pkce-s256": {
    title: "The authorization server supports PKCE with S256",
    why: "MCP clients must refuse an authorization server without S256.",
    fix: "Add S256 to code_challenge_methods_supported.",
    spec: "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-code-protection",
  },
}

export const TARGET = "https://mcp.example.com/mcp"
export const ISSUER = "https://auth.example.com"

export const unauthenticated = (revision: string): Exchange => ({
  method: "POST",
  url: TARGET,
  requestHeaders: {
    accept: "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": revision,
  },
  status: 401,
  headers: {
    "www-authenticate": 'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"',
  },
})

export const metadataExchange: Exchange = {
  method: "GET",
  url: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
  status: 200,
  headers: { "content-type": "application/json" },
  body: '{"resource":"https://mcp.example.com/mcp/","authorization_servers":["https://auth.example.com"]}',
}

export const asExchange: Exchange = {
  method: "GET",
  url: "https://auth.example.com/.well-known/oauth-authorization-server",
  status: 200,
  headers: { "content-type": "application/json" },
}

/** A diagnosis with a pass, a failure for three revisions, a warning for two, and an authorization server. */
export const DIAGNOSIS: Diagnosis = {
  target: TARGET,
  revisions: ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
  findings: [
    {
      check: "mcp.reachable",
      status: "pass",
      server: TARGET,
      revisions: ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
      detail: "POST answered 401.",
      exchanges: [unauthenticated("2025-03-26"), unauthenticated("2025-11-25")],
    },
    {
      check: "challenge.scope",
      status: "warn",
      server: TARGET,
      revisions: ["2025-11-25", "2026-07-28"],
      detail: "The Bearer challenge has no scope.",
      exchanges: [unauthenticated("2025-11-25")],
    },
    {
      check: "prm.resource",
      status: "fail",
      server: TARGET,
      revisions: ["2025-06-18", "2025-11-25", "2026-07-28"],
      detail: 'resource is "https://mcp.example.com/mcp/" but the server URL is "https://mcp.example.com/mcp"',
      exchanges: [metadataExchange],
    },
    {
      check: "as.pkce-s256",
      status: "pass",
      server: ISSUER,
      revisions: ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
      detail: "code_challenge_methods_supported is [S256].",
      exchanges: [asExchange],
    },
  ],
}
