/**
 * Readable logs: one line per request (method, path, status, duration; never the query string, which carries codes
 * and states) and one line per security event the server reports (client registered, login, consent, code, token
 * issued or refused, authorization refused, ...). Every event line is built from the event, that is from what the
 * endpoint itself parsed: the app never reads a request body of its own. Passwords, codes, tokens and client secrets
 * never reach a log line: only names, IDs, scopes and error codes do.
 *
 * @module
 */
import type { Operations } from "@keyway/authorization-server"

/** Where log lines go. */
export type Log = (line: string) => void

/** The default log: stderr, each line prefixed with the time. */
export const defaultLog: Log = (line) => {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`)
}

// Values that come from requests are quoted, so a crafted username cannot forge a log line.
const quote = (value: string): string => JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value)

/** A value the request may not have carried. */
const sent = (value: string | undefined): string => (value === undefined ? "(none sent)" : quote(value))

// Error descriptions are the server's own, but may name what a request or a document held: no control characters.
const printable = (text: string): string =>
  Array.from(text, (c) => (c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f ? "?" : c)).join("")

const about = (event: { readonly client_id: string; readonly scope: string; readonly resource: string }): string =>
  `client ${quote(event.client_id)}, scope ${quote(event.scope)}, resource ${event.resource}`

/** The log line of a security event the server reports. */
export const describeEvent = (event: Operations.SecurityEvent): string => {
  switch (event.event) {
    case "key_rotated": {
      const from = new Date(event.activates_at * 1000).toISOString()
      return `signing key created: ${event.kid}, signs from ${from}${event.reason === undefined ? "" : ` (${event.reason})`}`
    }
    case "client_registered":
      return (
        `client registered: ${quote(event.client_id)}${event.client_name === undefined ? "" : ` (${quote(event.client_name)})`}, ` +
        `auth ${event.token_endpoint_auth_method}, redirect URIs ${event.redirect_uris.join(" ")}`
      )
    case "registration_refused":
      return `client registration refused: ${event.error} (${printable(event.description)})`
    case "login_succeeded":
      return event.client_id === undefined
        ? `login ok: ${quote(event.username)} (account page)`
        : `login ok: ${quote(event.username)} (${about({ client_id: event.client_id, scope: event.scope ?? "", resource: event.resource ?? "" })})`
    case "login_failed": {
      // Without a client, the sign-in was the account page's.
      const page = event.client_id === undefined ? "account page; " : ""
      if (event.reason === "csrf") return "login refused: the form's CSRF check failed"
      if (event.reason === "rate_limited") {
        return `login refused: ${quote(event.username ?? "")} (${page}too many failed attempts; retry after ${event.retry_after} s)`
      }
      return `login failed: ${quote(event.username ?? "")} (${page}wrong username or password)`
    }
    case "consent_given":
      return `consent granted: user ${quote(event.subject ?? "")}, ${about(event)}`
    case "consent_denied":
      return `consent denied: ${event.subject === undefined ? "" : `user ${quote(event.subject)}, `}${about(event)}`
    case "consent_refused":
      return "consent refused: the form's CSRF check failed"
    case "consent_revoked":
      return (
        `consent revoked by the user on the account page: user ${quote(event.subject)}, client ${quote(event.client_id)}, ` +
        `${event.revoked_grants.length} grant(s) revoked`
      )
    case "code_issued":
      return (
        `authorization code issued${event.consent === "remembered" ? " (consent remembered)" : ""}: ` +
        `user ${quote(event.subject)}, ${about(event)}`
      )
    case "authorization_rejected":
      return (
        `authorization refused${event.answered === "page" ? " on the error page" : ""}: ${event.error} ` +
        `(${printable(event.description)}), client ${sent(event.client_id)}, redirect URI ${sent(event.redirect_uri)}`
      )
    case "token_issued":
      return (
        `${event.grant_type === "refresh_token" ? "token refreshed" : "token issued"}: grant ${event.grant_type}, ` +
        `subject ${quote(event.subject)}, ${about(event)}, expires in ${event.expires_in} s` +
        (event.refresh_token_issued ? ", with a refresh token" : "") +
        (event.source_resource === undefined ? "" : `, exchanged from resource ${event.source_resource}`) +
        (event.actors === undefined ? "" : `, actors ${event.actors.map(quote).join(" < ")}`)
      )
    case "token_refused":
      return (
        `token request refused: ${event.error} (${printable(event.description)})` +
        `${event.grant_type === undefined ? "" : `, grant ${quote(event.grant_type)}`}` +
        `${event.client_id === undefined ? "" : `, client ${quote(event.client_id)}`}`
      )
    case "refresh_token_reuse_detected":
      return (
        `refresh token reuse detected: subject ${quote(event.subject)}, client ${quote(event.client_id)}; ` +
        "the token's whole family is revoked"
      )
    case "token_revoked":
      return `revocation requested by client ${quote(event.client_id)}`
  }
}

/** Who is told about each security event besides the log. */
export interface EventObservers {
  readonly log: Log
  /** The metrics of the events (tokens issued, failed sign-ins, ...). */
  readonly metrics?: (event: Operations.SecurityEvent) => void
  /** The audit log. */
  readonly audit?: (event: AuditEvent) => void
}

/**
 * The receiver of the server's security events (its `onSecurityEvent`): each event's log line, metrics and audit
 * line. A failure to record one (a full disk) is logged; the request goes on.
 */
export const securityEventReceiver =
  ({ log, metrics, audit }: EventObservers) =>
  (event: Operations.SecurityEvent): void => {
    try {
      log(describeEvent(event))
      metrics?.(event)
      audit?.(event)
    } catch (e) {
      log(`error: could not record the security event ${event.event}: ${(e as Error).message}`)
    }
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
 * secret, a code or a token). The server's events (`Operations.SecurityEvent`) are written as they are reported; the
 * admin commands write their own.
 */
export interface AuditEvent {
  readonly event: string
  readonly [field: string]: string | number | boolean | ReadonlyArray<string> | undefined
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
}

/**
 * Wraps a Web handler so that every request is logged with its outcome and counted; an answer 5xx is logged as an
 * error. What a request did (a login, a token issued) is logged from the server's security events instead (see
 * {@link securityEventReceiver}).
 */
export const withObservation = (
  handler: (request: Request) => Promise<Response>,
  issuer: string,
  observers: Observers,
): ((request: Request) => Promise<Response>) => {
  const { log, request: counted } = observers
  const endpoints = endpointsOf(issuer)
  return async (request) => {
    const started = performance.now()
    const path = new URL(request.url).pathname
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
    if (response.status >= 500) log(`error: ${request.method} ${path} answered ${response.status}`)
    return response
  }
}

/** Wraps a Web handler so that every request is logged with its outcome (see {@link withObservation}). */
export const withRequestLog = (
  handler: (request: Request) => Promise<Response>,
  issuer: string,
  log: Log,
): ((request: Request) => Promise<Response>) => withObservation(handler, issuer, { log })
