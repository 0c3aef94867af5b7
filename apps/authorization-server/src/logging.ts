/**
 * Readable logs: one line per request (method, path, status, duration; never the query string, which carries codes
 * and states) and one line per event worth knowing (client registered, login, consent, token issued or refused).
 * Passwords, codes, tokens and client secrets never reach a log line: only names, IDs, scopes and error codes do.
 *
 * @module
 */

/** Where log lines go. */
export type Log = (line: string) => void

/** The default log: stderr, each line prefixed with the time. */
export const defaultLog: Log = (line) => {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`)
}

// Values that come from requests are quoted, so a crafted username cannot forge a log line.
const quote = (value: string): string => JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value)

const FORM_LIMIT = 64 * 1024

/** The form fields of a request body, read from a clone; undefined when it is not a small urlencoded form. */
const formOf = (request: Request): Promise<URLSearchParams | undefined> | undefined => {
  const type = request.headers.get("content-type")?.split(";")[0]?.trim().toLowerCase()
  const length = Number(request.headers.get("content-length") ?? Number.NaN)
  if (type !== "application/x-www-form-urlencoded" || !(length <= FORM_LIMIT) || request.body === null) return undefined
  return request
    .clone()
    .text()
    .then(
      (text) => new URLSearchParams(text),
      () => undefined,
    )
}

const jsonOf = async (response: Response): Promise<Record<string, unknown> | undefined> => {
  if (!(response.headers.get("content-type") ?? "").includes("json")) return undefined
  try {
    const value: unknown = await response.clone().json()
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** The client ID of a token-endpoint request: the form's `client_id`, else the HTTP Basic user name. */
const clientOf = (request: Request, form: URLSearchParams | undefined): string | undefined => {
  const fromForm = form?.get("client_id")
  if (fromForm) return fromForm
  const header = request.headers.get("authorization")
  if (header === null || !/^basic /i.test(header)) return undefined
  try {
    const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8")
    const colon = decoded.indexOf(":")
    return colon < 0 ? undefined : decodeURIComponent(decoded.slice(0, colon))
  } catch {
    return undefined
  }
}

const errorOf = (body: Record<string, unknown> | undefined): string => {
  const code = str(body?.error) ?? "error"
  const description = str(body?.error_description)
  return description === undefined ? code : `${code} (${description})`
}

/** The authorization request (a query string) carried by the login and consent forms. */
const authorizationRequest = (form: URLSearchParams | undefined) => new URLSearchParams(form?.get("request") ?? "")

const describeAuthorization = (params: URLSearchParams): string => {
  const parts = [`client ${quote(params.get("client_id") ?? "?")}`]
  const scope = params.get("scope")
  if (scope !== null) parts.push(`scope ${quote(scope)}`)
  const resource = params.get("resource")
  if (resource !== null) parts.push(`resource ${resource}`)
  return parts.join(", ")
}

/** What a redirect back to the client says, without its code or state. */
const redirectOutcome = (response: Response): "code" | { readonly error: string } | undefined => {
  const location = response.headers.get("location")
  if (location === null) return undefined
  const url = URL.parse(location)
  if (url === null) return undefined
  if (url.searchParams.has("code")) return "code"
  const error = url.searchParams.get("error")
  return error === null ? undefined : { error }
}

/** The endpoint paths of an issuer. */
export interface Endpoints {
  readonly authorize: string
  readonly login: string
  readonly consent: string
  readonly token: string
  readonly register: string
  readonly revoke: string
}

/** The endpoint paths under an issuer URL. */
export const endpointsOf = (issuer: string): Endpoints => {
  const path = new URL(issuer).pathname.replace(/\/$/, "")
  return {
    authorize: `${path}/authorize`,
    login: `${path}/authorize/login`,
    consent: `${path}/authorize/consent`,
    token: `${path}/token`,
    register: `${path}/register`,
    revoke: `${path}/revoke`,
  }
}

const events = async (
  endpoints: Endpoints,
  request: Request,
  response: Response,
  form: URLSearchParams | undefined,
): Promise<ReadonlyArray<string>> => {
  const path = new URL(request.url).pathname
  const method = request.method
  const status = response.status
  if (method === "POST" && path === endpoints.register) {
    const body = await jsonOf(response)
    if (status === 201) {
      const name = str(body?.client_name)
      const uris = Array.isArray(body?.redirect_uris) ? (body.redirect_uris as Array<unknown>).map(String) : []
      return [
        `client registered: ${quote(str(body?.client_id) ?? "?")}${name === undefined ? "" : ` (${quote(name)})`}, ` +
          `auth ${str(body?.token_endpoint_auth_method) ?? "?"}, redirect URIs ${uris.join(" ")}`,
      ]
    }
    return [`client registration refused: ${errorOf(body)}`]
  }
  if (method === "POST" && path === endpoints.login) {
    const username = quote(form?.get("username") ?? "")
    const about = describeAuthorization(authorizationRequest(form))
    if (status === 303 && response.headers.get("set-cookie") !== null) return [`login ok: ${username} (${about})`]
    if (status === 401) return [`login failed: ${username} (wrong username or password)`]
    if (status === 429) {
      return [
        `login refused: ${username} (too many failed attempts; retry after ${response.headers.get("retry-after")} s)`,
      ]
    }
    if (status === 403) return ["login refused: the form's CSRF check failed"]
    return []
  }
  if (method === "POST" && path === endpoints.consent) {
    const about = describeAuthorization(authorizationRequest(form))
    const outcome = redirectOutcome(response)
    if (outcome === "code") return [`consent granted: ${about}`, `authorization code issued: ${about}`]
    if (outcome !== undefined && outcome.error === "access_denied") return [`consent denied: ${about}`]
    if (outcome !== undefined) return [`authorization refused: ${outcome.error} (${about})`]
    if (status === 403) return ["consent refused: the form's CSRF check failed"]
    return []
  }
  if (method === "GET" && path === endpoints.authorize) {
    const params = new URL(request.url).searchParams
    const outcome = redirectOutcome(response)
    if (outcome === "code") return [`authorization code issued (consent remembered): ${describeAuthorization(params)}`]
    if (outcome !== undefined) return [`authorization refused: ${outcome.error} (${describeAuthorization(params)})`]
    if (status >= 400) return [`authorization request rejected on the error page (${describeAuthorization(params)})`]
    return []
  }
  if (method === "POST" && path === endpoints.token) {
    const grant = form?.get("grant_type") ?? "?"
    const named = clientOf(request, form)
    // A grant may come without a client (workload identity federation): then there is none to name.
    const client = named === undefined ? "" : `, client ${quote(named)}`
    const body = await jsonOf(response)
    if (status === 200) {
      const verb = grant === "refresh_token" ? "token refreshed" : "token issued"
      const scope = str(body?.scope)
      const refresh = typeof body?.refresh_token === "string" ? ", with a refresh token" : ""
      const resource = form?.get("resource")
      return [
        `${verb}: grant ${grant}${client}${scope === undefined ? "" : `, scope ${quote(scope)}`}` +
          `${resource ? `, resource ${resource}` : ""}, expires in ${String(body?.expires_in ?? "?")} s${refresh}`,
      ]
    }
    return [`token request refused: ${errorOf(body)}, grant ${grant}${client}`]
  }
  if (method === "POST" && path === endpoints.revoke && status === 200) {
    return [`revocation requested by client ${quote(clientOf(request, form) ?? "?")}`]
  }
  if (status >= 500) return [`error: ${method} ${path} answered ${status}`]
  return []
}

/**
 * Wraps a Web handler so that every request is logged with its outcome. Form bodies of the login, consent, token and
 * revocation endpoints are read from a clone for the event lines; only non-secret fields are used.
 */
export const withRequestLog = (
  handler: (request: Request) => Promise<Response>,
  issuer: string,
  log: Log,
): ((request: Request) => Promise<Response>) => {
  const endpoints = endpointsOf(issuer)
  const withForm = new Set([endpoints.login, endpoints.consent, endpoints.token, endpoints.revoke])
  return async (request) => {
    const started = performance.now()
    const path = new URL(request.url).pathname
    const form = request.method === "POST" && withForm.has(path) ? formOf(request) : undefined
    let response: Response
    try {
      response = await handler(request)
    } catch (e) {
      log(`error: ${request.method} ${path} failed: ${(e as Error).message}`)
      throw e
    }
    log(`${request.method} ${path} ${response.status} ${Math.round(performance.now() - started)}ms`)
    try {
      for (const line of await events(endpoints, request, response, await form)) log(line)
    } catch (e) {
      log(`error: could not describe ${request.method} ${path}: ${(e as Error).message}`)
    }
    return response
  }
}
