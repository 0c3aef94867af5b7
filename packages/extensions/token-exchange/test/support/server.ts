import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  type AuthorizationServer,
  createAuthorizationServer,
  type Extension,
  NodeServer,
  UserAuthenticator,
} from "@keyway/authorization-server"
import { ClientAuth, Grant, Pkce } from "@keyway/core"
import { type TokenExchangeOptions, tokenExchange } from "../../src/authorization-server.js"

/** The MCP server users sign in for (the source of exchanges). */
export const MCP = "https://mcp.example.com/mcp"
/** The downstream API the MCP server calls for its users (a target). */
export const API = "https://api.example.com"
/** A third API the downstream API calls in turn (the target of a chain of two). */
export const CALENDAR = "https://calendar.example.com/v1"
export const SECRET = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-0123"
export const PASSWORD = "correct horse battery staple"
/** The public client users sign in with, its redirect URI. */
export const CHAT_REDIRECT = "http://127.0.0.1/callback"

let aliceHash: string | undefined
const alicePasswordHash = async () => {
  aliceHash ??= await UserAuthenticator.hashPassword(PASSWORD)
  return aliceHash
}

/** The policy most tests run with: `notes-mcp` exchanges MCP tokens for the API, `files-api` API tokens for CALENDAR. */
export const POLICY: TokenExchangeOptions = {
  clients: {
    "notes-mcp": {
      exchanges: [{ from: MCP, to: API, scopes: { "files:read": "notes:read", "files:write": "notes:write" } }],
    },
    "files-api": { exchanges: [{ from: API, to: CALENDAR, scopes: { "calendar:read": "files:read" } }] },
  },
}

export interface TestServer {
  readonly issuer: string
  readonly as: AuthorizationServer.AuthorizationServerInstance
  readonly events: Array<Record<string, unknown>>
  readonly close: () => Promise<void>
}

export type Storage = "memory" | "sqlite"

export interface ServerOverrides {
  readonly storage?: Storage
  readonly policy?: TokenExchangeOptions
  /** Extensions added before the token exchange's. */
  readonly extensions?: ReadonlyArray<Extension.AuthorizationServerExtension>
}

/** An authorization server on 127.0.0.1 with the token exchange, its clients and alice. */
export const startServer = async (overrides: ServerOverrides = {}): Promise<TestServer> => {
  const dir = overrides.storage === "sqlite" ? mkdtempSync(join(tmpdir(), "keyway-token-exchange-")) : undefined
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const running = await NodeServer.listen((request) => handler(request))
  const events: Array<Record<string, unknown>> = []
  const confidential = (clientId: string, grantTypes: ReadonlyArray<string>) => ({
    clientId,
    clientSecret: SECRET,
    redirectUris: [],
    grantTypes: [...grantTypes],
  })
  const as = createAuthorizationServer({
    issuer: running.url,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => undefined,
    ...(dir === undefined ? {} : { storage: { type: "sqlite", path: join(dir, "as.db") } }),
    resources: [
      { uri: MCP, name: "Notes", scopes: { "notes:read": "Read your notes", "notes:write": "Write your notes" } },
      { uri: API, name: "Files", scopes: { "files:read": "Read your files", "files:write": "Write your files" } },
      { uri: CALENDAR, name: "Calendar", scopes: { "calendar:read": "Read your calendar" } },
    ],
    users: [{ username: "alice", passwordHash: await alicePasswordHash(), subject: "alice" }],
    clients: [
      { clientId: "chat", clientName: "Chat", redirectUris: [CHAT_REDIRECT] },
      confidential("notes-mcp", [Grant.TOKEN_EXCHANGE]),
      confidential("files-api", [Grant.TOKEN_EXCHANGE]),
      confidential("stranger", [Grant.TOKEN_EXCHANGE]),
      {
        clientId: "public-mcp",
        redirectUris: [CHAT_REDIRECT],
        grantTypes: ["authorization_code", Grant.TOKEN_EXCHANGE],
      },
      confidential("rs", []),
    ],
    introspectionClients: ["rs"],
    onSecurityEvent: (event) => void events.push({ ...event }),
    extensions: [...(overrides.extensions ?? []), tokenExchange(overrides.policy ?? POLICY)],
  })
  handler = as.handler
  return {
    issuer: as.issuer,
    as,
    events,
    close: async () => {
      await running.close()
      await as.close()
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    },
  }
}

const form = (values: Record<string, string>) => new URLSearchParams(values).toString()
const cookieOf = (response: Response): string => response.headers.getSetCookie()[0]?.split(";")[0] ?? ""
const csrfOf = (html: string): string => /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? ""

/** POSTs a form to the token endpoint. */
export const tokenRequest = (server: TestServer, body: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${server.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: form(body),
  })

/** client_secret_basic for a client of the test server. */
export const basic = (clientId: string) => ClientAuth.encodeClientSecretBasic(clientId, SECRET)

export interface UserTokens {
  readonly access_token: string
  readonly refresh_token: string
  readonly scope: string
}

/** alice signs in to `chat` for `resource` with `scope`, consents, and the code is redeemed: her tokens. */
export const signIn = async (
  server: TestServer,
  scope = "notes:read notes:write",
  resource = MCP,
): Promise<UserTokens> => {
  const pkce = await Pkce.generate()
  const url = new URL(`${server.issuer}/authorize`)
  url.search = form({
    response_type: "code",
    client_id: "chat",
    redirect_uri: CHAT_REDIRECT,
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource,
    scope,
    state: "st",
  })
  const first = await fetch(url, { redirect: "manual" })
  if (first.status !== 200) throw new Error(`authorize answered ${first.status}: ${await first.text()}`)
  let cookie = cookieOf(first)
  const request = url.search.slice(1)
  const login = await fetch(`${server.issuer}/authorize/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: form({ csrf_token: csrfOf(await first.text()), request, username: "alice", password: PASSWORD }),
  })
  if (login.status !== 303) throw new Error(`login answered ${login.status}`)
  cookie = cookieOf(login) || cookie
  const consent = await fetch(login.headers.get("location") ?? "", { redirect: "manual", headers: { cookie } })
  let location: URL
  if (consent.status === 302) location = new URL(consent.headers.get("location") ?? "")
  else {
    const answer = await fetch(`${server.issuer}/authorize/consent`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: form({ csrf_token: csrfOf(await consent.text()), request, decision: "approve" }),
    })
    if (answer.status !== 303) throw new Error(`consent answered ${answer.status}`)
    location = new URL(answer.headers.get("location") ?? "")
  }
  const code = location.searchParams.get("code")
  if (code === null) throw new Error(`no code in ${location.href}`)
  const response = await tokenRequest(server, {
    grant_type: "authorization_code",
    code,
    code_verifier: pkce.verifier,
    redirect_uri: CHAT_REDIRECT,
    client_id: "chat",
    resource,
  })
  if (response.status !== 200) throw new Error(`token endpoint answered ${response.status}: ${await response.text()}`)
  return (await response.json()) as UserTokens
}

/** A token exchange by `clientId` (client_secret_basic) of `subjectToken`, with further parameters. */
export const exchange = (
  server: TestServer,
  subjectToken: string,
  values: Record<string, string> = {},
  clientId = "notes-mcp",
) =>
  tokenRequest(
    server,
    {
      grant_type: Grant.TOKEN_EXCHANGE,
      subject_token: subjectToken,
      subject_token_type: Grant.ACCESS_TOKEN_TYPE,
      resource: API,
      ...values,
    },
    { authorization: basic(clientId) },
  )

/** Introspects as the resource server `rs`. */
export const introspect = async (server: TestServer, token: string): Promise<Record<string, unknown>> => {
  const response = await fetch(`${server.issuer}/introspect`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", authorization: basic("rs") },
    body: form({ token }),
  })
  if (response.status !== 200) throw new Error(`introspection answered ${response.status}`)
  return (await response.json()) as Record<string, unknown>
}
