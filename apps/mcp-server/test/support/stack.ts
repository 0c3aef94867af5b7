import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  type AppConfig,
  type RunningAuthorizationServer,
  startAuthorizationServer,
} from "@keyway/app-authorization-server"
import { Pkce } from "@keyway/core"
import { freePort } from "@keyway/testing"
import { type McpServerConfig, NOTE_SCOPES, type RunningMcpServer, startMcpServer } from "../../src/index.js"

export const USER = { username: "alice", password: "correct horse battery staple" } as const
export const OTHER_USER = { username: "bob", password: "bob's long password" } as const
export const REDIRECT_URI = "http://127.0.0.1/callback"

export interface Stack {
  readonly as: RunningAuthorizationServer
  readonly mcp: RunningMcpServer
  /** A second resource the authorization server knows, served by nobody: tokens for it are for another audience. */
  readonly other: string
  readonly asLog: ReadonlyArray<string>
  readonly mcpLog: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

/**
 * apps/authorization-server (temp data dir) and apps/mcp-server on loopback, ports picked first; `extra` adds to the
 * authorization server's configuration, `mcp` to the MCP server's.
 */
export const startStack = async (
  extra:
    | Partial<AppConfig>
    | ((resources: { readonly resource: string; readonly other: string }) => Partial<AppConfig>) = {},
  mcp:
    | Partial<McpServerConfig>
    | ((resource: string) => Partial<McpServerConfig> | Promise<Partial<McpServerConfig>>) = {},
): Promise<Stack> => {
  const [asPort, mcpPort, otherPort] = [await freePort(), await freePort(), await freePort()]
  const dataDir = await mkdtemp(join(tmpdir(), "keyway-mcp-server-test-"))
  const resource = `http://127.0.0.1:${mcpPort}/mcp`
  const other = `http://127.0.0.1:${otherPort}/mcp`
  const asLog: Array<string> = []
  const mcpLog: Array<string> = []
  const as = await startAuthorizationServer(
    {
      port: asPort,
      dataDir,
      users: [USER, OTHER_USER],
      resources: [
        { uri: resource, name: "Keyway notes", scopes: NOTE_SCOPES },
        { uri: other, name: "Another server", scopes: NOTE_SCOPES },
      ],
      ...(typeof extra === "function" ? extra({ resource, other }) : extra),
    },
    { log: (line) => asLog.push(line) },
  )
  const server = await startMcpServer({
    ...(typeof mcp === "function" ? await mcp(resource) : mcp),
    authorizationServer: as.issuer,
    port: mcpPort,
    log: (line) => mcpLog.push(line),
  })
  return {
    as,
    mcp: server,
    other,
    asLog,
    mcpLog,
    close: async () => {
      await server.close()
      await as.close()
      await rm(dataDir, { recursive: true, force: true })
    },
  }
}

const cookieOf = (response: Response, fallback: string): string =>
  response.headers.getSetCookie()[0]?.split(";")[0] ?? fallback

const csrfOf = (html: string): string => {
  const token = /name="csrf_token" value="([^"]+)"/.exec(html)?.[1]
  if (token === undefined) throw new Error("no CSRF token in the page")
  return token
}

const form = (values: Record<string, string>) => ({
  method: "POST",
  redirect: "manual" as const,
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams(values).toString(),
})

/**
 * Drives the authorization server's login and consent pages over HTTP, as a browser would, from an authorization URL
 * to the redirect back to the client; returns that redirect's URL (with `code`, `state`, `iss`).
 */
export const loginAndConsent = async (
  authorizationUrl: string,
  user: { readonly username: string; readonly password: string } = USER,
): Promise<URL> => {
  const issuer = new URL(authorizationUrl).origin
  const first = await fetch(authorizationUrl, { redirect: "manual" })
  // An error the server redirects at once: the browser lands on the callback with it.
  if (first.status === 302) return new URL(first.headers.get("location") ?? "")
  if (first.status !== 200) throw new Error(`authorize answered ${first.status} ${first.headers.get("location")}`)
  let cookie = cookieOf(first, "")
  const request = new URL(authorizationUrl).search.slice(1)
  const login = await fetch(`${issuer}/authorize/login`, {
    ...form({ csrf_token: csrfOf(await first.text()), request, username: user.username, password: user.password }),
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
  })
  if (login.status !== 303) throw new Error(`login answered ${login.status}`)
  cookie = cookieOf(login, cookie)
  const consent = await fetch(new URL(login.headers.get("location") ?? "", issuer), {
    redirect: "manual",
    headers: { cookie },
  })
  if (consent.status === 302) return new URL(consent.headers.get("location") ?? "")
  if (consent.status !== 200) throw new Error(`consent page answered ${consent.status}`)
  const answer = await fetch(`${issuer}/authorize/consent`, {
    ...form({ csrf_token: csrfOf(await consent.text()), request, decision: "approve" }),
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
  })
  if (answer.status !== 303) throw new Error(`consent answered ${answer.status}`)
  return new URL(answer.headers.get("location") ?? "")
}

/** Registers a public client (RFC 7591) and runs the code flow with PKCE for `scope` on `resource`. */
export const obtainToken = async (
  issuer: string,
  resource: string,
  scope: string,
  user: { readonly username: string; readonly password: string } = USER,
): Promise<string> => {
  const registration = await fetch(`${issuer}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "Test client",
      redirect_uris: [REDIRECT_URI],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    }),
  })
  if (registration.status !== 201) throw new Error(`registration answered ${registration.status}`)
  const { client_id } = (await registration.json()) as { client_id: string }
  const pkce = await Pkce.generate()
  const url = new URL(`${issuer}/authorize`)
  for (const [k, v] of Object.entries({
    response_type: "code",
    client_id,
    redirect_uri: REDIRECT_URI,
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource,
    scope,
    state: "test-state",
  }))
    url.searchParams.set(k, v)
  const back = await loginAndConsent(url.href, user)
  const code = back.searchParams.get("code")
  if (code === null) throw new Error(`no code in the redirect (error ${back.searchParams.get("error")})`)
  const token = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: REDIRECT_URI,
      client_id,
      code_verifier: pkce.verifier,
      resource,
    }).toString(),
  })
  if (token.status !== 200) throw new Error(`token endpoint answered ${token.status}: ${await token.text()}`)
  return ((await token.json()) as { access_token: string }).access_token
}

/** A JSON-RPC request to the MCP endpoint, with a bearer token when given. */
export const rpc = (url: string, token: string | undefined, method: string, params: Record<string, unknown> = {}) =>
  fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  })
