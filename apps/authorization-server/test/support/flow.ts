import { ClientAuth, Pkce } from "@keyway/core"

export const PASSWORD = "correct horse battery staple"
export const REDIRECT_URI = "http://127.0.0.1/callback"
export const RESOURCE = "http://127.0.0.1:9100/mcp"
export const SCOPES = { "notes:read": "Read your notes", "notes:write": "Create and change your notes" }

const cookieOf = (response: Response, fallback: string): string =>
  response.headers.getSetCookie()[0]?.split(";")[0] ?? fallback

const csrfOf = (html: string): string => {
  const token = /name="csrf_token" value="([^"]+)"/.exec(html)?.[1]
  if (token === undefined) throw new Error("no CSRF token in the page")
  return token
}

const post = (url: string, cookie: string, values: Record<string, string>) =>
  fetch(url, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams(values).toString(),
  })

/** Registers a public client with dynamic registration; returns its ID. */
export const registerClient = async (issuer: string, name = "Test client"): Promise<string> => {
  const response = await fetch(`${issuer}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: name,
      redirect_uris: [REDIRECT_URI],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    }),
  })
  if (response.status !== 201) throw new Error(`registration answered ${response.status}: ${await response.text()}`)
  return ((await response.json()) as { client_id: string }).client_id
}

export interface Tokens {
  readonly code: string
  readonly access_token: string
  readonly refresh_token: string
  readonly scope: string
}

export interface FlowOptions {
  readonly clientId: string
  readonly scope?: string
  readonly username?: string
  /** A wrong password tried once before the right one. */
  readonly wrongPassword?: string
  readonly password?: string
  readonly decision?: "approve" | "deny"
  /** A confidential client's secret, sent with HTTP Basic at the token endpoint. */
  readonly clientSecret?: string
}

/** The whole code flow over HTTP: login page, (optionally a failed login), login, consent, token request. */
export const codeFlow = async (issuer: string, options: FlowOptions): Promise<Tokens> => {
  const pkce = await Pkce.generate()
  const url = new URL(`${issuer}/authorize`)
  const params = {
    response_type: "code",
    client_id: options.clientId,
    redirect_uri: REDIRECT_URI,
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
    scope: options.scope ?? "notes:read",
    state: "state-1",
  }
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
  const request = url.search.slice(1)
  const page = await fetch(url, { redirect: "manual" })
  if (page.status !== 200) throw new Error(`authorize answered ${page.status}`)
  let cookie = cookieOf(page, "")
  let csrf = csrfOf(await page.text())
  const username = options.username ?? "alice"
  if (options.wrongPassword !== undefined) {
    const failed = await post(`${issuer}/authorize/login`, cookie, {
      csrf_token: csrf,
      request,
      username,
      password: options.wrongPassword,
    })
    if (failed.status !== 401) throw new Error(`failed login answered ${failed.status}`)
    csrf = csrfOf(await failed.text())
  }
  const login = await post(`${issuer}/authorize/login`, cookie, {
    csrf_token: csrf,
    request,
    username,
    password: options.password ?? PASSWORD,
  })
  if (login.status !== 303) throw new Error(`login answered ${login.status}`)
  cookie = cookieOf(login, cookie)
  const consentPage = await fetch(new URL(login.headers.get("location") ?? "", issuer), {
    redirect: "manual",
    headers: { cookie },
  })
  if (consentPage.status !== 200) throw new Error(`consent page answered ${consentPage.status}`)
  const consent = await post(`${issuer}/authorize/consent`, cookie, {
    csrf_token: csrfOf(await consentPage.text()),
    request,
    decision: options.decision ?? "approve",
  })
  const code = new URL(consent.headers.get("location") ?? "").searchParams.get("code")
  if (code === null) throw new Error(`no code after consent (${consent.status})`)
  const token = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(options.clientSecret === undefined
        ? {}
        : { authorization: ClientAuth.encodeClientSecretBasic(options.clientId, options.clientSecret) }),
    },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: REDIRECT_URI,
      ...(options.clientSecret === undefined ? { client_id: options.clientId } : {}),
      code_verifier: pkce.verifier,
      resource: RESOURCE,
    }).toString(),
  })
  if (token.status !== 200) throw new Error(`token endpoint answered ${token.status}: ${await token.text()}`)
  return { code, ...((await token.json()) as Omit<Tokens, "code">) }
}

/** A refresh-token request. */
export const refresh = (issuer: string, clientId: string, refreshToken: string) =>
  fetch(`${issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: refreshToken, client_id: clientId }),
  })

/** Waits until `condition` holds (background jobs run on their own schedule); fails after `limitMs`. */
export const eventually = async (condition: () => boolean | Promise<boolean>, what: string, limitMs = 15_000) => {
  const deadline = Date.now() + limitMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/**
 * The first half of the code flow: the login page and a successful login. Returns the session cookie and the
 * consent page URL the login redirects to.
 */
export const login = async (
  issuer: string,
  clientId: string,
  password = PASSWORD,
): Promise<{ cookie: string; consentUrl: string }> => {
  const pkce = await Pkce.generate()
  const url = new URL(`${issuer}/authorize`)
  for (const [k, v] of Object.entries({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
    scope: "notes:read",
    state: "state-1",
  }))
    url.searchParams.set(k, v)
  const page = await fetch(url, { redirect: "manual" })
  if (page.status !== 200) throw new Error(`authorize answered ${page.status}`)
  const cookie = cookieOf(page, "")
  const response = await post(`${issuer}/authorize/login`, cookie, {
    csrf_token: csrfOf(await page.text()),
    request: url.search.slice(1),
    username: "alice",
    password,
  })
  if (response.status !== 303) throw new Error(`login answered ${response.status}`)
  return {
    cookie: cookieOf(response, cookie),
    consentUrl: new URL(response.headers.get("location") ?? "", issuer).href,
  }
}
