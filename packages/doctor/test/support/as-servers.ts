/**
 * Authorization servers for the authorization server stage's tests: a walk seeded the way the resource stage leaves
 * it, and a small node:http server that serves hand-written metadata, a JWK Set and CORS answers, misconfigured on
 * purpose through its options.
 */
import type { Revision } from "@keyway/core"
import { json, type Listening, listen } from "@keyway/testing/peers"
import { createProbe, type DiagnoseOptions, type Finding, type Walk } from "../../src/index.js"

/** A public EC signing key (P-256), as an authorization server publishes it. */
export const EC_KEY = {
  kty: "EC",
  crv: "P-256",
  x: "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
  y: "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
  use: "sig",
  alg: "ES256",
  kid: "k1",
}

/**
 * A walk as the resource stage leaves it: the MCP server URL, its protected resource metadata naming `issuers`,
 * each issuer not yet looked up.
 */
export const seededWalk = (
  target: string,
  issuers: ReadonlyArray<string>,
  options: DiagnoseOptions & { readonly scopes?: ReadonlyArray<string> } = {},
): Walk => {
  const { scopes, ...rest } = options
  return {
    target,
    revisions: rest.revisions ?? ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
    options: rest,
    probe: createProbe(rest.fetch === undefined ? {} : { fetch: rest.fetch }),
    resourceMetadata: {
      url: `${new URL(target).origin}/.well-known/oauth-protected-resource${new URL(target).pathname}`,
      document: {
        resource: target,
        authorization_servers: issuers,
        ...(scopes === undefined ? {} : { scopes_supported: scopes }),
      },
    },
    authorizationServers: new Map(issuers.map((issuer) => [issuer, { issuer }])),
  }
}

/** Findings in a form short enough to assert in full: check, status, revisions. */
export const summary = (findings: ReadonlyArray<Finding>): ReadonlyArray<string> =>
  findings.map((f) => `${f.check} ${f.status} ${f.revisions.join(",")}`)

/** The finding of a check, the only one (or the one for `revision`). */
export const findingOf = (findings: ReadonlyArray<Finding>, check: string, revision?: Revision.Revision): Finding => {
  const found = findings.filter((f) => f.check === check && (revision === undefined || f.revisions.includes(revision)))
  if (found.length !== 1) throw new Error(`${found.length} findings for ${check} ${revision ?? ""}`)
  return found[0] as Finding
}

/** Options of {@link startMetadataServer}: what to serve, as an origin sees it. */
export interface MetadataServerOptions {
  /** The issuer the server's URLs are built on; its own origin by default. */
  readonly issuer?: (origin: string) => string
  /** Changes to the good metadata (a member set to undefined is removed). */
  readonly metadata?: (origin: string, issuer: string) => Record<string, unknown>
  /** The well-known paths the metadata is served at; the RFC 8414 root one by default. */
  readonly paths?: ReadonlyArray<string>
  /** The JWK Set at /jwks; the EC public key by default. */
  readonly jwks?: unknown
  /** Send CORS headers on the metadata and answer preflights; true by default. */
  readonly cors?: boolean
}

const CORS = { "access-control-allow-origin": "*" }

/**
 * A node:http authorization server that only serves metadata (with every member a client looks at, right by
 * default), a JWK Set and CORS preflights of /token and /register, misconfigured through `options`.
 */
export const startMetadataServer = async (
  options: MetadataServerOptions = {},
): Promise<Listening & { readonly issuer: string }> => {
  const paths = options.paths ?? ["/.well-known/oauth-authorization-server"]
  const cors = options.cors ?? true
  let issuer = ""
  const server = await listen((request, url) => {
    if (request.method === "OPTIONS" && cors && (url.pathname === "/token" || url.pathname === "/register")) {
      return {
        status: 204,
        headers: {
          ...CORS,
          "access-control-allow-methods": "POST, OPTIONS",
          "access-control-allow-headers": "content-type",
        },
      }
    }
    if (paths.includes(url.pathname)) {
      const good: Record<string, unknown> = {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        registration_endpoint: `${issuer}/register`,
        jwks_uri: `${issuer}/jwks`,
        scopes_supported: ["notes:read", "notes:write"],
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        token_endpoint_auth_methods_supported: ["none", "client_secret_basic"],
        code_challenge_methods_supported: ["S256"],
        authorization_response_iss_parameter_supported: true,
        client_id_metadata_document_supported: true,
      }
      const changes = options.metadata?.(origin, issuer) ?? {}
      const document = Object.fromEntries(
        Object.entries({ ...good, ...changes }).filter(([name]) => !(name in changes) || changes[name] !== undefined),
      )
      return json(200, document, cors ? CORS : {})
    }
    if (url.pathname === "/jwks") return json(200, options.jwks ?? { keys: [EC_KEY] }, CORS)
    return json(404, { error: "not_found" })
  })
  const origin = server.origin
  issuer = options.issuer?.(origin) ?? origin
  return { ...server, issuer }
}
