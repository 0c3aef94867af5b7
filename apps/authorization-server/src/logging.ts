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
  readonly introspect: string
  readonly jwks: string
  readonly account: string
  readonly accountLogin: string
  readonly accountRevoke: string
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
    introspect: `${path}/introspect`,
    jwks: `${path}/jwks`,
    account: `${path}/account`,
    accountLogin: `${path}/account/login`,
    accountRevoke: `${path}/account/revoke`,
  }
}

/**
 * A security event for the audit log: its name and what identifies it (names, IDs, scopes, error codes; never a
 * secret, a code or a token).
 */
export interface AuditEvent {
  readonly event: string
  readonly [field: string]: string | number | boolean | ReadonlyArray<string> | undefined
}

/** One thing a request did: its log line, and the audit event when it is a security event. */
export interface Observed {
  readonly line?: string
  readonly audit?: AuditEvent
}

const REUSE = "the refresh token was already used; its whole family is now revoked"

const params = (params: URLSearchParams) => ({
  client_id: params.get("client_id") ?? undefined,
  scope: params.get("scope") ?? undefined,
  resource: params.get("resource") ?? undefined,
})

/** What a request did, as log lines and audit events. */
export const observe = async (
  endpoints: Endpoints,
  request: Request,
  response: Response,
  form: URLSearchParams | undefined,
): Promise<ReadonlyArray<Observed>> => {
  const path = new URL(request.url).pathname
  const method = request.method
  const status = response.status
  if (method === "POST" && path === endpoints.register) {
    const body = await jsonOf(response)
    if (status === 201) {
      const name = str(body?.client_name)
      const uris = Array.isArray(body?.redirect_uris) ? (body.redirect_uris as Array<unknown>).map(String) : []
      return [
        {
          line:
            `client registered: ${quote(str(body?.client_id) ?? "?")}${name === undefined ? "" : ` (${quote(name)})`}, ` +
            `auth ${str(body?.token_endpoint_auth_method) ?? "?"}, redirect URIs ${uris.join(" ")}`,
          audit: {
            event: "client_registered",
            client_id: str(body?.client_id),
            client_name: name,
            token_endpoint_auth_method: str(body?.token_endpoint_auth_method),
            redirect_uris: uris,
          },
        },
      ]
    }
    return [{ line: `client registration refused: ${errorOf(body)}` }]
  }
  if (method === "POST" && path === endpoints.login) {
    const name = form?.get("username") ?? ""
    const username = quote(name)
    const about = describeAuthorization(authorizationRequest(form))
    const client_id = authorizationRequest(form).get("client_id") ?? undefined
    if (status === 303 && response.headers.get("set-cookie") !== null) {
      return [
        { line: `login ok: ${username} (${about})`, audit: { event: "login_succeeded", username: name, client_id } },
      ]
    }
    if (status === 401) {
      return [
        {
          line: `login failed: ${username} (wrong username or password)`,
          audit: { event: "login_failed", username: name, reason: "wrong_credentials", client_id },
        },
      ]
    }
    if (status === 429) {
      return [
        {
          line: `login refused: ${username} (too many failed attempts; retry after ${response.headers.get("retry-after")} s)`,
          audit: { event: "login_failed", username: name, reason: "rate_limited", client_id },
        },
      ]
    }
    if (status === 403) {
      return [{ line: "login refused: the form's CSRF check failed", audit: { event: "login_failed", reason: "csrf" } }]
    }
    return []
  }
  if (method === "POST" && path === endpoints.accountLogin) {
    const name = form?.get("username") ?? ""
    if (status === 303) {
      return [{ line: `login ok: ${quote(name)} (account page)`, audit: { event: "login_succeeded", username: name } }]
    }
    if (status === 401 || status === 429) {
      const reason = status === 401 ? "wrong_credentials" : "rate_limited"
      return [
        {
          line: `login failed: ${quote(name)} (account page; ${status === 401 ? "wrong username or password" : "too many failed attempts"})`,
          audit: { event: "login_failed", username: name, reason },
        },
      ]
    }
    if (status === 403) {
      return [{ line: "login refused: the form's CSRF check failed", audit: { event: "login_failed", reason: "csrf" } }]
    }
    return []
  }
  if (method === "POST" && path === endpoints.accountRevoke && status === 303) {
    const clientId = form?.get("client_id") ?? undefined
    return [
      // The audit event comes from the server itself, which knows the user.
      { line: `consent revoked by the user on the account page: client ${quote(clientId ?? "?")}` },
    ]
  }
  if (method === "POST" && path === endpoints.consent) {
    const about = describeAuthorization(authorizationRequest(form))
    const outcome = redirectOutcome(response)
    const request = params(authorizationRequest(form))
    if (outcome === "code") {
      return [
        { line: `consent granted: ${about}`, audit: { event: "consent_given", ...request } },
        { line: `authorization code issued: ${about}` },
      ]
    }
    if (outcome !== undefined && outcome.error === "access_denied") {
      return [{ line: `consent denied: ${about}`, audit: { event: "consent_denied", ...request } }]
    }
    if (outcome !== undefined) return [{ line: `authorization refused: ${outcome.error} (${about})` }]
    if (status === 403) return [{ line: "consent refused: the form's CSRF check failed" }]
    return []
  }
  if (method === "GET" && path === endpoints.authorize) {
    const params = new URL(request.url).searchParams
    const outcome = redirectOutcome(response)
    if (outcome === "code") {
      return [{ line: `authorization code issued (consent remembered): ${describeAuthorization(params)}` }]
    }
    if (outcome !== undefined) {
      return [{ line: `authorization refused: ${outcome.error} (${describeAuthorization(params)})` }]
    }
    if (status >= 400) {
      return [{ line: `authorization request rejected on the error page (${describeAuthorization(params)})` }]
    }
    return []
  }
  if (method === "POST" && path === endpoints.token) {
    const grant = form?.get("grant_type") ?? "?"
    const clientId = clientOf(request, form)
    // A grant may come without a client (workload identity federation): then there is none to name.
    const client = clientId === undefined ? "" : `, client ${quote(clientId)}`
    const body = await jsonOf(response)
    if (status === 200) {
      const verb = grant === "refresh_token" ? "token refreshed" : "token issued"
      const scope = str(body?.scope)
      const refresh = typeof body?.refresh_token === "string" ? ", with a refresh token" : ""
      const resource = form?.get("resource")
      return [
        {
          line:
            `${verb}: grant ${grant}${client}${scope === undefined ? "" : `, scope ${quote(scope)}`}` +
            `${resource ? `, resource ${resource}` : ""}, expires in ${String(body?.expires_in ?? "?")} s${refresh}`,
          audit: {
            event: grant === "refresh_token" ? "token_refreshed" : "token_issued",
            grant_type: grant,
            client_id: clientId,
            scope,
            resource: resource ?? undefined,
            refresh_token_issued: refresh !== "",
          },
        },
      ]
    }
    const refused = { line: `token request refused: ${errorOf(body)}, grant ${grant}${client}` }
    if (str(body?.error_description) === REUSE) {
      return [refused, { audit: { event: "refresh_token_reuse_detected", client_id: clientId } }]
    }
    return [refused]
  }
  if (method === "POST" && path === endpoints.revoke && status === 200) {
    const clientId = clientOf(request, form)
    return [
      {
        line: `revocation requested by client ${quote(clientId ?? "?")}`,
        audit: {
          event: "token_revoked",
          client_id: clientId,
          token_type_hint: form?.get("token_type_hint") ?? undefined,
        },
      },
    ]
  }
  if (status >= 500) return [{ line: `error: ${method} ${path} answered ${status}` }]
  return []
}

/** The endpoint a path is, as a metric label: a fixed set, so that made-up paths cannot grow the metrics. */
export const endpointLabel = (endpoints: Endpoints, path: string): string => {
  for (const [name, endpoint] of Object.entries(endpoints)) if (path === endpoint) return name
  if (path.startsWith("/.well-known/")) return "metadata"
  return "other"
}

/** Who is told about each request besides the log. */
export interface Observers {
  readonly log: Log
  /** Every request's endpoint, status and duration in seconds. */
  readonly request?: (endpoint: string, status: number, seconds: number) => void
  /** Every security event. */
  readonly audit?: (event: AuditEvent) => void
}

/**
 * Wraps a Web handler so that every request is logged with its outcome, counted, and its security events audited.
 * Form bodies of the login, consent, token and revocation endpoints are read from a clone for the event lines; only
 * non-secret fields are used.
 */
export const withObservation = (
  handler: (request: Request) => Promise<Response>,
  issuer: string,
  observers: Observers,
): ((request: Request) => Promise<Response>) => {
  const { log, request: counted, audit } = observers
  const endpoints = endpointsOf(issuer)
  const withForm = new Set([
    endpoints.login,
    endpoints.consent,
    endpoints.token,
    endpoints.revoke,
    endpoints.accountLogin,
    endpoints.accountRevoke,
  ])
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
    const took = performance.now() - started
    log(`${request.method} ${path} ${response.status} ${Math.round(took)}ms`)
    counted?.(endpointLabel(endpoints, path), response.status, took / 1000)
    try {
      for (const { line, audit: event } of await observe(endpoints, request, response, await form)) {
        if (line !== undefined) log(line)
        if (event !== undefined) audit?.(event)
      }
    } catch (e) {
      log(`error: could not describe ${request.method} ${path}: ${(e as Error).message}`)
    }
    return response
  }
}

/**
 * Wraps a Web handler so that every request is logged with its outcome (see {@link withObservation}, which also
 * counts and audits).
 */
export const withRequestLog = (
  handler: (request: Request) => Promise<Response>,
  issuer: string,
  log: Log,
): ((request: Request) => Promise<Response>) => withObservation(handler, issuer, { log })
