import { ClientAuth, Pkce } from "@keyway/core"
import type { AuthorizationServerInstance, AuthorizationServerOptions } from "../../src/AuthorizationServer.js"
import { createAuthorizationServer } from "../../src/AuthorizationServer.js"
import { listen, type RunningServer } from "../../src/NodeServer.js"
import { hashPassword } from "../../src/UserAuthenticator.js"

export const MCP = "https://mcp.example.com/mcp"
export const OTHER = "https://other.example.com"
export const SECRET = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-0123"
export const PASSWORD = "correct horse battery staple"

let aliceHash: string | undefined
/** One scrypt hash for the whole run (hashing is slow on purpose). */
export const alicePasswordHash = async () => {
  aliceHash ??= await hashPassword(PASSWORD)
  return aliceHash
}

export interface TestServer {
  readonly url: string
  readonly issuer: string
  readonly as: AuthorizationServerInstance
  readonly running: RunningServer
  readonly close: () => Promise<void>
}

export type Overrides = Partial<Omit<AuthorizationServerOptions, "issuer">> & { readonly issuerPath?: string }

/** Starts an authorization server on 127.0.0.1 (port 0) with a loopback http issuer. */
export const startServer = async (overrides: Overrides = {}): Promise<TestServer> => {
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const running = await listen((request) => handler(request))
  const { issuerPath, ...rest } = overrides
  const issuer = `${running.url}${issuerPath ?? ""}`
  const as = createAuthorizationServer({
    issuer,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => undefined,
    resources: [
      { uri: MCP, name: "Example MCP", scopes: { "tools:read": "List the tools", "tools:call": "Call tools for you" } },
      { uri: OTHER, name: "Other", scopes: { files: "Read your files" } },
    ],
    users: [{ username: "alice", passwordHash: await alicePasswordHash(), displayName: "Alice Example" }],
    clients: [
      {
        clientId: "public-app",
        clientName: "Public App",
        redirectUris: ["https://app.example.com/callback", "http://127.0.0.1/callback", "http://[::1]/callback"],
      },
      {
        clientId: "web-app",
        clientName: "Web App",
        redirectUris: ["https://web.example.com/cb"],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_basic",
      },
      {
        clientId: "post-app",
        clientName: "Post App",
        redirectUris: ["https://post.example.com/cb"],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_post",
      },
      {
        clientId: "narrow-app",
        clientName: "Narrow App",
        redirectUris: ["https://narrow.example.com/cb"],
        scope: "tools:read",
      },
    ],
    ...rest,
  })
  handler = as.handler
  return {
    url: running.url,
    issuer: as.issuer,
    as,
    running,
    close: async () => {
      await running.close()
      await as.close()
    },
  }
}

/** Cookie jar of one: the session cookie from the last Set-Cookie. */
export const cookieOf = (response: Response): string | undefined => {
  const header = response.headers.getSetCookie()[0]
  return header?.split(";")[0]
}

export const csrfOf = (html: string): string => /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? ""

export interface AuthorizeParams {
  readonly client_id?: string | undefined
  readonly redirect_uri?: string | undefined
  readonly resource?: string | undefined
  readonly scope?: string | undefined
  readonly state?: string | undefined
  readonly [name: string]: string | undefined
}

/** A well-formed authorization request for `public-app` unless overridden (undefined removes a parameter). */
export const authorizeUrl = async (server: TestServer, params: AuthorizeParams = {}) => {
  const pkce = await Pkce.generate()
  const base: Record<string, string | undefined> = {
    response_type: "code",
    client_id: "public-app",
    redirect_uri: "https://app.example.com/callback",
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource: MCP,
    scope: "tools:read tools:call",
    state: "st-123",
    ...params,
  }
  const url = new URL(`${server.issuer}/authorize`)
  for (const [k, v] of Object.entries(base)) if (v !== undefined) url.searchParams.set(k, v)
  return { url: url.href, verifier: pkce.verifier, challenge: pkce.challenge }
}

const form = (values: Record<string, string>) => new URLSearchParams(values).toString()

/**
 * A URL the server built from its issuer, sent to this instance instead: instances behind one issuer each answer on
 * their own port (for a server alone, the URL as it is).
 */
const onInstance = (server: TestServer, href: string): string => {
  const url = new URL(href)
  url.host = new URL(server.issuer).host
  return url.href
}

/** Logs alice in and approves; returns the final redirect Location. */
export const loginAndConsent = async (
  server: TestServer,
  url: string,
  decision: "approve" | "deny" = "approve",
): Promise<{ readonly location: URL; readonly cookie: string }> => {
  const first = await fetch(url, { redirect: "manual" })
  if (first.status !== 200) throw new Error(`authorize answered ${first.status}: ${await first.text()}`)
  let cookie = cookieOf(first) ?? ""
  const request = new URL(url).search.slice(1)
  const login = await fetch(`${server.issuer}/authorize/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: form({ csrf_token: csrfOf(await first.text()), request, username: "alice", password: PASSWORD }),
  })
  if (login.status !== 303) throw new Error(`login answered ${login.status}`)
  cookie = cookieOf(login) ?? cookie
  const consent = await fetch(onInstance(server, login.headers.get("location")!), {
    redirect: "manual",
    headers: { cookie },
  })
  if (consent.status === 302) return { location: new URL(consent.headers.get("location")!), cookie }
  if (consent.status !== 200) throw new Error(`consent page answered ${consent.status}`)
  const answer = await fetch(`${server.issuer}/authorize/consent`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: form({ csrf_token: csrfOf(await consent.text()), request, decision }),
  })
  if (answer.status !== 303) throw new Error(`consent answered ${answer.status}`)
  return { location: new URL(answer.headers.get("location")!), cookie }
}

/** Runs the whole front channel and returns the code with its verifier. */
export const obtainCode = async (server: TestServer, params: AuthorizeParams = {}) => {
  const request = await authorizeUrl(server, params)
  const { location } = await loginAndConsent(server, request.url)
  const code = location.searchParams.get("code")
  if (code === null) throw new Error(`no code in ${location.href}`)
  return { code, verifier: request.verifier, location }
}

/** POSTs a form to the token endpoint. */
export const tokenRequest = (server: TestServer, body: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${server.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: form(body),
  })

/** client_secret_basic as every client sends it: core's one encoding (RFC 6749 §2.3.1). */
export const basic = ClientAuth.encodeClientSecretBasic

/** alice's tokens for `public-app` (https://app.example.com/callback): the front channel, then the code redeemed. */
export const publicAppTokens = async (
  server: TestServer,
  params: AuthorizeParams = {},
): Promise<{ readonly access_token: string; readonly refresh_token: string }> => {
  const { code, verifier } = await obtainCode(server, params)
  const response = await tokenRequest(server, {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: "https://app.example.com/callback",
    client_id: "public-app",
    resource: MCP,
  })
  if (response.status !== 200) throw new Error(`token endpoint answered ${response.status}: ${await response.text()}`)
  return (await response.json()) as { access_token: string; refresh_token: string }
}
