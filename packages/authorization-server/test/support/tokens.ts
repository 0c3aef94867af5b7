import { expect } from "vitest"
import { basic, MCP, obtainCode, SECRET, startServer, type TestServer, tokenRequest } from "./server.js"

export const RS_SECRET = "rs-secret-rs-secret-rs-secret-rs-secret-0123"

/** A server whose `web-app` and `rs` (a resource server allowed to introspect everything) have secrets. */
export const startTokenServer = () =>
  startServer({
    clients: [
      { clientId: "public-app", clientName: "Public App", redirectUris: ["https://app.example.com/callback"] },
      { clientId: "other-app", clientName: "Other App", redirectUris: ["https://other-app.example.com/cb"] },
      {
        clientId: "web-app",
        clientName: "Web App",
        redirectUris: ["https://web.example.com/cb"],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_basic",
      },
      { clientId: "rs", clientSecret: RS_SECRET, redirectUris: [], grantTypes: [] },
    ],
    introspectionClients: ["rs"],
  })

export interface Tokens {
  readonly access_token: string
  readonly refresh_token: string
}

/** Runs the front channel and redeems the code for `public-app` (or `web-app`). */
export const issueTokens = async (server: TestServer, client: "public-app" | "web-app" = "public-app") => {
  const redirect = client === "public-app" ? "https://app.example.com/callback" : "https://web.example.com/cb"
  const { code, verifier } = await obtainCode(server, { client_id: client, redirect_uri: redirect })
  const auth = client === "web-app" ? { authorization: basic("web-app", SECRET) } : {}
  const response = await tokenRequest(
    server,
    {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: redirect,
      resource: MCP,
      ...(client === "public-app" ? { client_id: client } : {}),
    },
    auth,
  )
  expect(response.status).toBe(200)
  return { ...((await response.json()) as Tokens), code, verifier }
}

const form = (values: Record<string, string>) => new URLSearchParams(values).toString()

/** POSTs a form to `/revoke` or `/introspect`. */
export const post = (
  server: TestServer,
  path: "revoke" | "introspect",
  body: Record<string, string>,
  headers: Record<string, string> = {},
) =>
  fetch(`${server.issuer}/${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: form(body),
  })

/** Introspects as the resource server `rs`. */
export const introspect = async (server: TestServer, token: string, hint?: string) => {
  const response = await post(
    server,
    "introspect",
    { token, ...(hint === undefined ? {} : { token_type_hint: hint }) },
    { authorization: basic("rs", RS_SECRET) },
  )
  expect(response.status).toBe(200)
  expect(response.headers.get("cache-control")).toBe("no-store")
  return (await response.json()) as Record<string, unknown>
}
