/**
 * The three roles and a workload issuer on loopback: a JWKS server playing the workload platform (keys made with
 * jose), Keyway's authorization server with the workload identity extension, and two protected MCP endpoints built
 * on `@keyway/resource-server`.
 */
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createAuthorizationServer, NodeServer } from "@keyway/authorization-server"
import { createProtectedResource, jwt } from "@keyway/resource-server"
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose"
import { type TrustedIssuer, type WorkloadIdentityOptions, workloadIdentityGrant } from "../src/authorization-server.js"

/** Listens on 127.0.0.1 with a handler that may be set once the URL is known (the issuer names itself). */
const listening = async () => {
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const running = await NodeServer.listen((request) => handler(request))
  return {
    url: running.url,
    close: running.close,
    serve: (next: (request: Request) => Promise<Response>) => {
      handler = next
    },
  }
}

/** A workload platform: a key pair, a JWKS endpoint on loopback, and a way to sign workload JWTs. */
export interface WorkloadIssuer {
  /** The `iss` of its JWTs. */
  readonly issuer: string
  readonly jwksUri: string
  readonly publicJwk: JWK
  /** Requests made to the JWKS endpoint. */
  readonly fetches: () => number
  /** Signs a JWT; `claims` replace the defaults (a value `undefined` removes the claim). */
  readonly sign: (
    claims: Readonly<Record<string, unknown>>,
    header?: Readonly<Record<string, unknown>>,
  ) => Promise<string>
  readonly close: () => Promise<void>
}

const KID = "workload-key-1"

/** Starts a workload issuer whose JWTs default to `sub` `spiffe://example.org/agent`, a fresh `jti`, 5 minutes. */
export const startWorkloadIssuer = async (audience: () => string): Promise<WorkloadIssuer> => {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true })
  const publicJwk = { ...(await exportJWK(publicKey)), kid: KID, alg: "ES256", use: "sig" }
  let count = 0
  const server = await listening()
  server.serve(async () => {
    count++
    return Response.json({ keys: [publicJwk] })
  })
  const issuer = `${server.url}/workloads`
  return {
    issuer,
    jwksUri: `${server.url}/jwks.json`,
    publicJwk,
    fetches: () => count,
    sign: async (claims, header = {}) => {
      const now = Math.floor(Date.now() / 1000)
      const payload: Record<string, unknown> = {
        iss: issuer,
        sub: "spiffe://example.org/agent",
        aud: audience(),
        iat: now,
        exp: now + 300,
        jti: randomUUID(),
        ...claims,
      }
      for (const [name, value] of Object.entries(claims)) if (value === undefined) delete payload[name]
      return new SignJWT(payload as JWTPayload)
        .setProtectedHeader({ alg: "ES256", kid: KID, typ: "JWT", ...header })
        .sign(privateKey)
    },
    close: server.close,
  }
}

/** The scopes of the notes servers. */
export const SCOPES = { "notes:read": "Read notes", "notes:write": "Write notes" } as const

/** A running authorization server with the extension, two MCP endpoints, and what the server saw. */
export interface Stack {
  readonly issuer: string
  readonly tokenEndpoint: string
  /** The two MCP endpoints; tokens for the first only unless a rule says otherwise. */
  readonly mcp: readonly [string, string]
  readonly workload: WorkloadIssuer
  /** `METHOD path grant_type` of every request the authorization server received. */
  readonly asRequests: Array<string>
  /** The extension's log. */
  readonly log: Array<Record<string, unknown>>
  readonly close: () => Promise<void>
}

/** Options of {@link startStack}. */
export interface StackOptions {
  readonly storage?: "memory" | "sqlite"
  /** Changes to the trusted issuer (rules default to `sub` = the default subject, notes:read, the first server). */
  readonly issuer?: (workload: WorkloadIssuer, mcp: readonly [string, string]) => Partial<TrustedIssuer>
  readonly extension?: Partial<WorkloadIdentityOptions>
  readonly accessTokenTtl?: number
}

/** Starts the workload issuer, the authorization server and two protected MCP endpoints. */
export const startStack = async (options: StackOptions = {}): Promise<Stack> => {
  const asServer = await listening()
  const issuer = asServer.url
  const workload = await startWorkloadIssuer(() => issuer)
  const rsServers = await Promise.all([listening(), listening()])
  const mcp = [`${rsServers[0]?.url}/mcp`, `${rsServers[1]?.url}/mcp`] as const
  const log: Array<Record<string, unknown>> = []
  const dir = options.storage === "sqlite" ? mkdtempSync(join(tmpdir(), "keyway-wif-")) : undefined
  const changes = options.issuer?.(workload, mcp) ?? {}
  const trusted: TrustedIssuer = {
    issuer: workload.issuer,
    // Inline keys replace the JWKS endpoint.
    ...(changes.jwks === undefined ? { jwksUri: workload.jwksUri } : {}),
    rules: [{ claims: { sub: "spiffe://example.org/agent" }, resources: [mcp[0]], scopes: ["notes:read"] }],
    ...changes,
  }
  const authorizationServer = createAuthorizationServer({
    issuer,
    resources: mcp.map((uri, i) => ({ uri, name: `Notes ${i + 1}`, scopes: SCOPES })),
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
    ...(options.accessTokenTtl === undefined ? {} : { lifetimes: { accessToken: options.accessTokenTtl } }),
    ...(dir === undefined ? {} : { storage: { type: "sqlite" as const, path: join(dir, "as.db") } }),
    extensions: [
      workloadIdentityGrant({
        issuers: [trusted],
        development: { allowHttpLoopbackJwks: true },
        warn: () => {},
        log: (event) => log.push({ ...event }),
        ...options.extension,
      }),
    ],
  })
  const asRequests: Array<string> = []
  asServer.serve(async (request) => {
    const url = new URL(request.url)
    const grant =
      request.method === "POST" ? (new URLSearchParams(await request.clone().text()).get("grant_type") ?? "") : ""
    asRequests.push(`${request.method} ${url.pathname}${grant === "" ? "" : ` ${grant}`}`)
    return authorizationServer.handler(request)
  })
  await authorizationServer.ready()
  const metadata = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as {
    jwks_uri: string
    token_endpoint: string
  }
  asRequests.length = 0
  const closers: Array<() => Promise<void>> = []
  rsServers.forEach((server, i) => {
    const guard = createProtectedResource({
      resource: mcp[i] as string,
      authorizationServers: [issuer],
      verifier: jwt({ jwksUri: metadata.jwks_uri }),
      scopesSupported: Object.keys(SCOPES),
      requiredScopes: ["notes:read"],
    })
    const handler = guard.protect(async (request, { token }) => {
      const body = (await request.json()) as { id: number }
      return Response.json({
        jsonrpc: "2.0",
        id: body.id,
        result: { subject: token.subject, clientId: token.clientId, scopes: token.scopes },
      })
    })
    server.serve(async (request) => handler(request))
    closers.push(() => guard.close())
  })
  return {
    issuer,
    tokenEndpoint: metadata.token_endpoint,
    mcp,
    workload,
    asRequests,
    log,
    close: async () => {
      await Promise.all([asServer, ...rsServers].map((server) => server.close()))
      await Promise.all(closers.map((close) => close()))
      await authorizationServer.close()
      await workload.close()
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** POSTs a JWT bearer token request. */
export const tokenRequest = async (stack: Stack, params: Readonly<Record<string, string>>) => {
  const response = await fetch(stack.tokenEndpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", ...params }),
  })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

/** Calls an MCP endpoint with a token. */
export const callMcp = (url: string, token: string) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  })
