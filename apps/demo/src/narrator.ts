/**
 * Turns observed HTTP exchanges and the scripted user's actions into numbered transcript steps: which step of the
 * MCP authorization flow each exchange is, the headers and bodies that matter, and what the user saw.
 *
 * @module
 */
import { createHash } from "node:crypto"
import { Challenge, Grant } from "@keyway/core"
import { Result } from "effect"
import { firstForm } from "./html.js"
import type { Exchange } from "./recorder.js"
import {
  collectHeaders,
  collectJson,
  collectParams,
  type Redactor,
  SECRET_JSON_MEMBERS,
  SECRET_PARAMETERS,
} from "./redact.js"
import type { Transcript } from "./transcript.js"

/** What the person sees on the consent page. */
export interface ConsentView {
  readonly heading: string
  readonly clientName: string
  readonly redirectHost: string
  readonly localhostWarning: string | undefined
  readonly resource: string
  readonly scopes: ReadonlyArray<string>
  readonly signedInAs: string | undefined
}

/** Step titles, kept in one place: the tests look for them. */
export const STEPS = {
  challenge: "401 Unauthorized: the MCP server answers with a Bearer challenge (RFC 6750 §3, RFC 9728 §5.1)",
  resourceMetadata: "Protected resource metadata (RFC 9728)",
  serverMetadata: "Authorization server metadata (RFC 8414)",
  registration: "Client registration: dynamic client registration (RFC 7591)",
  authorizationRequest:
    "Authorization request with PKCE S256, state and resource (OAuth 2.1 §4.1.1, RFC 7636, RFC 8707)",
  login: "Login: the demo user signs in at the authorization server",
  consent: "Consent: what the user sees, and the decision",
  authorizationResponse: "Authorization response at the client's loopback redirect: code, state, iss (RFC 9207)",
  token: "Token request: code + PKCE code_verifier + resource (OAuth 2.1 §4.1.3, RFC 8707)",
  mcp: "MCP request with the access token (Authorization: Bearer)",
  insufficientScope: "403 Forbidden: error=insufficient_scope (RFC 6750 §3.1): the operation needs more scope",
  refresh: "Refresh: a new access token and a rotated refresh token (OAuth 2.1 §4.3, §4.3.1)",
} as const

/** Step titles of exchanges that use the DPoP scheme (RFC 9449) instead of Bearer. */
export const DPOP_STEPS = {
  challenge: "401 Unauthorized: the MCP server answers with a DPoP challenge (RFC 9449 §7.1, RFC 9728 §5.1)",
  mcp: "MCP request with the DPoP-bound access token and a fresh proof (Authorization: DPoP, DPoP header; RFC 9449 §7.1)",
} as const

/** Step titles of the enterprise-managed authorization scenario's token requests. */
export const ENTERPRISE_STEPS = {
  tokenExchange:
    "Token exchange at the identity provider: the ID token for an identity assertion (ID-JAG) for this MCP server (RFC 8693)",
  jwtBearer:
    "Token request: the identity assertion as a JWT bearer grant, with client authentication (RFC 7523 §2.1, SEP-990)",
} as const

/** Step titles of the machine-to-machine scenarios' token requests. */
export const MACHINE_STEPS = {
  clientCredentials:
    "Token request: client_credentials with client authentication, resource and scope (OAuth 2.1 §4.2, RFC 8707)",
  jwtBearer: "Token request: the workload's JWT as a JWT bearer grant, with resource (RFC 7523 §2.1, RFC 8707)",
} as const

/** Step titles of the downstream scenario: the notes MCP server calling the calendar for its user (RFC 8693). */
export const DOWNSTREAM_STEPS = {
  inbound: "The inbound token: what the notes MCP server holds for this request (decoded, signature not shown)",
  exchange: "Token exchange: the notes server trades the user's token for one for the calendar (RFC 8693 §2.1, §2.2.1)",
  call: "The downstream call: the notes server calls the calendar with the exchanged token (Authorization: Bearer)",
  refused:
    "Token exchange for a target the policy does not allow: refused with invalid_target (RFC 8693 §2.2.2, RFC 8707 §2)",
} as const

/** Step titles of the connected-account scenario: the user's browser on the connect pages and at the code host. */
export const CONNECTED_STEPS = {
  connectPage:
    "The connect page of the notes server: who connects which account (the link's ref is opaque and single use)",
  start:
    "Start: the connect page's button sends the browser to the code host with PKCE S256 and state (OAuth 2.1 §4.1.1)",
  provider: "At the code host: its own authorization server, login and consent (node-oidc-provider)",
  callback: "Callback at the notes server: state checked, code exchanged at the code host, tokens sealed in the vault",
  disconnect:
    "Disconnect: the completion page's button; the notes server revokes at the code host (RFC 7009) and forgets",
} as const

/** Step titles of the device scenario: the device authorization grant (RFC 8628). */
export const DEVICE_STEPS = {
  deviceAuthorization:
    "Device authorization request: client_id, resource and scope; the answer carries the codes (RFC 8628 §3.1, §3.2)",
  poll: "Token request: the device code, polled every interval until the user decides (RFC 8628 §3.4, §3.5)",
  verification: "The user opens the verification URI on another device (RFC 8628 §3.3)",
  code: "Code entry: the user types the code the agent shows (RFC 8628 §3.3, §6.1)",
  consent: "Consent: the page names the client, the resource and the scopes, and warns (RFC 8628 §5.4)",
} as const

const s256 = (verifier: string): string => createHash("sha256").update(verifier, "ascii").digest("base64url")

const sameEndpoint = (a: URL, b: string | undefined): boolean => {
  if (b === undefined) return false
  const other = URL.parse(b)
  return other !== null && a.origin === other.origin && a.pathname === other.pathname
}

const parseJson = (text: string | undefined): unknown => {
  if (text === undefined) return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

/** The issuer a metadata URL was built from (RFC 8414 §3.1 path insertion, OpenID Discovery path appending). */
export const issuerOfMetadataUrl = (url: URL): string => {
  for (const suffix of ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]) {
    if (url.pathname.startsWith(suffix)) return `${url.origin}${url.pathname.slice(suffix.length)}`
    if (url.pathname.endsWith(suffix)) return `${url.origin}${url.pathname.slice(0, -suffix.length)}`
  }
  return url.origin
}

/** A copy of a JSON value with credential members described instead of shown. */
export const redactJson = (redactor: Redactor, value: unknown): unknown => {
  if (Array.isArray(value)) return value.map((item) => redactJson(redactor, item))
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(
    Object.entries(value).map(([key, member]) => [
      key,
      typeof member === "string" && SECRET_JSON_MEMBERS.has(key) ? redactor.show(member) : redactJson(redactor, member),
    ]),
  )
}

/** The decoded header and claims of a JWT (not verified: the resource server does that). */
export const decodeJwt = (
  token: string,
): { header: Record<string, unknown>; claims: Record<string, unknown> } | undefined => {
  const [header, claims] = token.split(".")
  if (header === undefined || claims === undefined) return undefined
  try {
    return {
      header: JSON.parse(Buffer.from(header, "base64url").toString("utf8")) as Record<string, unknown>,
      claims: JSON.parse(Buffer.from(claims, "base64url").toString("utf8")) as Record<string, unknown>,
    }
  } catch {
    return undefined
  }
}

/** JSON-RPC method (and tool name) of an MCP request body. */
const rpcSummary = (body: string | undefined): string => {
  const parsed = parseJson(body) as { method?: unknown; id?: unknown; params?: { name?: unknown } } | undefined
  if (parsed === undefined || typeof parsed.method !== "string") return ""
  const tool = parsed.method === "tools/call" && typeof parsed.params?.name === "string" ? ` ${parsed.params.name}` : ""
  return `JSON-RPC ${parsed.method}${tool}${parsed.id === undefined ? " (notification)" : ""}`
}

/** Narrates the flow. */
export class Narrator {
  private endpoints: { authorization?: string; token?: string; registration?: string; device?: string } = {}
  private lastChallenge: string | undefined
  private readonly pendingLogs: Array<string> = []
  /** Every exchange seen, in order (for tests and the summary). */
  readonly exchanges: Array<Exchange> = []

  constructor(
    private readonly t: Transcript,
    private readonly redactor: Redactor,
    private readonly context: { readonly mcpUrl: string; readonly issuer: string },
  ) {}

  /** A line a server logged; shown after the exchange that caused it. */
  serverLog(source: string, line: string): void {
    this.pendingLogs.push(`${source}: ${line}`)
  }

  private flushLogs(): void {
    for (const line of this.pendingLogs.splice(0)) this.t.note(`⋯ ${line}`, 6)
  }

  /** Registers every credential an exchange carries, before anything of it is printed. */
  collect(exchange: Exchange): void {
    collectHeaders(this.redactor, exchange.requestHeaders)
    collectHeaders(this.redactor, exchange.responseHeaders)
    collectParams(this.redactor, exchange.url.searchParams)
    for (const body of [exchange.requestBody, exchange.responseBody]) {
      if (body === undefined) continue
      const json = parseJson(body)
      if (json !== undefined) collectJson(this.redactor, json)
      else if (!body.trimStart().startsWith("<")) collectParams(this.redactor, new URLSearchParams(body))
      else {
        const csrf = firstForm(body)?.inputs.get("csrf_token")
        if (csrf !== undefined) this.redactor.add(csrf)
      }
    }
    const location = exchange.responseHeaders.get("location")
    const target = location === null ? null : URL.parse(location, exchange.url)
    if (target !== null) collectParams(this.redactor, target.searchParams)
  }

  /** An exchange of the MCP client (discovery, registration, token, MCP requests). */
  clientExchange(exchange: Exchange): void {
    this.collect(exchange)
    this.exchanges.push(exchange)
    const { url } = exchange
    const mcp = URL.parse(this.context.mcpUrl)
    if (mcp !== null && url.origin === mcp.origin && url.pathname === mcp.pathname) this.mcpExchange(exchange)
    else if (url.pathname.startsWith("/.well-known/oauth-protected-resource")) {
      this.t.step(STEPS.resourceMetadata)
      this.printExchange(exchange)
    } else if (
      url.pathname.startsWith("/.well-known/oauth-authorization-server") ||
      url.pathname.startsWith("/.well-known/openid-configuration")
    ) {
      this.t.step(STEPS.serverMetadata)
      const metadata = parseJson(exchange.responseBody) as Record<string, unknown> | undefined
      if (exchange.status === 200 && metadata !== undefined) {
        const str = (v: unknown) => (typeof v === "string" ? v : undefined)
        this.endpoints = {
          ...(str(metadata.authorization_endpoint) === undefined
            ? {}
            : { authorization: str(metadata.authorization_endpoint) as string }),
          ...(str(metadata.token_endpoint) === undefined ? {} : { token: str(metadata.token_endpoint) as string }),
          ...(str(metadata.registration_endpoint) === undefined
            ? {}
            : { registration: str(metadata.registration_endpoint) as string }),
          ...(str(metadata.device_authorization_endpoint) === undefined
            ? {}
            : { device: str(metadata.device_authorization_endpoint) as string }),
        }
      }
      this.printExchange(exchange, { maxLines: 60 })
      if (metadata !== undefined) {
        const expected = issuerOfMetadataUrl(url)
        const methods = Array.isArray(metadata.code_challenge_methods_supported)
          ? metadata.code_challenge_methods_supported
          : []
        this.t.note(
          `issuer ${metadata.issuer === expected ? "=" : "≠"} ${expected}, the issuer this metadata URL belongs to (RFC 8414 §3.3); code_challenge_methods_supported ${methods.includes("S256") ? "includes" : "LACKS"} S256`,
        )
      }
    } else if (sameEndpoint(url, this.endpoints.registration)) {
      this.t.step(STEPS.registration)
      this.printExchange(exchange)
    } else if (sameEndpoint(url, this.endpoints.device)) {
      this.t.step(DEVICE_STEPS.deviceAuthorization)
      this.printExchange(exchange)
    } else if (sameEndpoint(url, this.endpoints.token)) {
      this.tokenExchange(exchange)
    } else if (
      exchange.method === "POST" &&
      new URLSearchParams(exchange.requestBody ?? "").get("grant_type") ===
        "urn:ietf:params:oauth:grant-type:token-exchange"
    ) {
      this.identityAssertionExchange(exchange)
    } else {
      this.t.step(`${exchange.method} ${url.origin}${url.pathname}`)
      this.printExchange(exchange)
    }
    this.flushLogs()
  }

  private mcpExchange(exchange: Exchange): void {
    const bearer = exchange.requestHeaders.get("authorization")
    const summary = rpcSummary(exchange.requestBody)
    const scheme = bearer?.split(" ")[0]?.toLowerCase()
    const dpopChallenge = /(?:^|,)\s*dpop(?:\s|$)/iu.test(exchange.responseHeaders.get("www-authenticate") ?? "")
    if (exchange.status === 401) this.t.step(dpopChallenge ? DPOP_STEPS.challenge : STEPS.challenge)
    else if (exchange.status === 403) this.t.step(STEPS.insufficientScope)
    else if (bearer !== null && summary !== "") this.t.step(scheme === "dpop" ? DPOP_STEPS.mcp : STEPS.mcp, "mcp")
    const target = `${exchange.method} ${exchange.url.href}`
    this.t.line(`→ ${target}${summary === "" ? "" : `  ${summary}`}`)
    this.t.line(bearer === null ? "  (no Authorization header)" : `  Authorization: ${bearer}`)
    const proof = exchange.requestHeaders.get("dpop")
    if (proof !== null) this.t.line(`  DPoP: ${this.redactor.show(proof)}`)
    const type = exchange.responseHeaders.get("content-type")?.split(";")[0]
    this.t.line(
      `← ${exchange.status} ${exchange.statusText}${type === undefined || exchange.status >= 400 ? "" : `  (${type})`}`,
    )
    const challenge = exchange.responseHeaders.get("www-authenticate")
    if (challenge !== null) {
      this.t.line(`  WWW-Authenticate: ${challenge}`)
      const parsed = Challenge.fromHeaders(exchange.responseHeaders)
      if (Result.isSuccess(parsed) && parsed.success !== undefined) {
        this.t.table(Object.entries(parsed.success) as Array<[string, string]>, 8)
      }
    }
  }

  /** The token exchange at an enterprise identity provider, and the identity assertion's claims (SEP-990). */
  private identityAssertionExchange(exchange: Exchange): void {
    this.t.step(ENTERPRISE_STEPS.tokenExchange)
    this.printExchange(exchange)
    const body = parseJson(exchange.responseBody) as { access_token?: unknown } | undefined
    const decoded = typeof body?.access_token === "string" ? decodeJwt(body.access_token) : undefined
    if (decoded === undefined) return
    this.t.note("the identity assertion is a JWT signed by the identity provider; its header and claims, decoded:")
    this.t.json({ header: { typ: decoded.header.typ, alg: decoded.header.alg }, claims: decoded.claims }, 6)
    this.t.note(
      "aud = the MCP server's authorization server, resource = the MCP server, client_id = the client there: the identity provider decided this user may reach it, with this scope",
    )
  }

  private tokenExchange(exchange: Exchange): void {
    const form = new URLSearchParams(exchange.requestBody ?? "")
    const grant = form.get("grant_type")
    const previous = grant === "refresh_token" ? form.get("refresh_token") : null
    const title =
      grant === "refresh_token"
        ? STEPS.refresh
        : grant === "client_credentials"
          ? MACHINE_STEPS.clientCredentials
          : grant === "urn:ietf:params:oauth:grant-type:jwt-bearer"
            ? decodeJwt(form.get("assertion") ?? "")?.header.typ === "oauth-id-jag+jwt"
              ? ENTERPRISE_STEPS.jwtBearer
              : MACHINE_STEPS.jwtBearer
            : grant === Grant.DEVICE_CODE
              ? DEVICE_STEPS.poll
              : STEPS.token
    this.t.step(title, `token ${grant}`)
    this.printExchange(exchange)
    const verifier = form.get("code_verifier")
    if (verifier !== null && this.lastChallenge !== undefined) {
      this.t.note(
        s256(verifier) === this.lastChallenge
          ? "✓ BASE64URL(SHA-256(code_verifier)) equals the code_challenge of the authorization request"
          : "✗ the code_verifier does not match the code_challenge",
      )
    }
    const body = parseJson(exchange.responseBody) as
      | { access_token?: unknown; refresh_token?: unknown; scope?: unknown }
      | undefined
    if (typeof body?.access_token === "string" && decodeJwt(body.access_token) !== undefined) {
      this.t.note("the access token is a JWT (RFC 9068); its header and claims, decoded (signature not shown):")
      const decoded = this.accessTokenClaims(body.access_token)
      if (decoded !== undefined) {
        const { claims } = decoded
        if (claims.aud !== undefined) {
          this.t.note(`aud = ${JSON.stringify(claims.aud)}: the token is bound to this one MCP server (RFC 8707)`)
        }
        const jkt = (claims.cnf as { jkt?: unknown } | undefined)?.jkt
        if (typeof jkt === "string") {
          this.t.note(
            `cnf.jkt = ${jkt}: the token is bound to the client's key; it is presented with the DPoP scheme and a proof signed by that key (RFC 9449 §6)`,
          )
        }
      }
    }
    if (previous !== null && typeof body?.refresh_token === "string") {
      this.t.note(
        body.refresh_token === previous
          ? "the refresh token was not rotated"
          : `refresh token rotated: ${this.redactor.show(previous)} → ${this.redactor.show(body.refresh_token)} (the old one is now spent; reusing it would revoke the family)`,
      )
    }
  }

  /** Prints an access token's header and claims, decoded (not verified), without its signature; returns them. */
  accessTokenClaims(token: string): ReturnType<typeof decodeJwt> {
    const decoded = decodeJwt(token)
    if (decoded === undefined) return undefined
    const pick = (names: ReadonlyArray<string>, from: Record<string, unknown>) =>
      Object.fromEntries(names.filter((n) => from[n] !== undefined).map((n) => [n, from[n]]))
    this.t.json(
      {
        header: pick(["typ", "alg", "kid"], decoded.header),
        claims: pick(["iss", "sub", "aud", "client_id", "scope", "act", "iat", "exp", "cnf"], decoded.claims),
      },
      6,
    )
    return decoded
  }

  /**
   * An exchange the notes MCP server made while answering a tool call (the token exchange at the authorization server,
   * the call to the calendar), or the demo's own token exchange for a target the policy refuses (`title`).
   */
  downstreamExchange(exchange: Exchange, title?: string): void {
    this.collect(exchange)
    this.exchanges.push(exchange)
    const { url } = exchange
    const grant =
      exchange.method === "POST" ? new URLSearchParams(exchange.requestBody ?? "").get("grant_type") : undefined
    if (url.pathname.startsWith("/.well-known/")) {
      this.t.note(`the notes server reads ${url.origin}${url.pathname} (${exchange.status} ${exchange.statusText})`)
    } else if (grant === Grant.TOKEN_EXCHANGE) {
      this.t.step(title ?? DOWNSTREAM_STEPS.exchange)
      this.printExchange(exchange)
      const body = parseJson(exchange.responseBody) as { access_token?: unknown } | undefined
      if (typeof body?.access_token === "string" && decodeJwt(body.access_token) !== undefined) {
        this.t.note("the new access token, decoded (signature not shown):")
        const claims = this.accessTokenClaims(body.access_token)?.claims
        const actor = (claims?.act as { sub?: unknown } | undefined)?.sub
        this.t.note(
          `aud = ${JSON.stringify(claims?.aud)}: the calendar, not the notes server; sub = ${JSON.stringify(claims?.sub)}: still the user; act.sub = ${JSON.stringify(actor)}: the notes server acts for them (RFC 8693 §4.1)`,
        )
      }
    } else {
      this.t.step(DOWNSTREAM_STEPS.call)
      this.printExchange(exchange)
    }
    this.flushLogs()
  }

  /** The authorization request the client built, as the user agent is about to load it. */
  authorizationRequest(authorizationUrl: string): void {
    const url = new URL(authorizationUrl)
    this.t.step(STEPS.authorizationRequest)
    this.t.line(`→ GET ${url.origin}${url.pathname}`)
    this.t.table(
      [...url.searchParams].map(([name, value]) => [name, this.shown(name, value)]),
      8,
    )
    this.lastChallenge = url.searchParams.get("code_challenge") ?? undefined
    this.t.note(
      "the code_verifier behind code_challenge stays with the client until the token request; resource names the MCP server the token is for",
    )
  }

  /** An exchange of the user's browser (the scripted user), under the given step. */
  browserExchange(exchange: Exchange, step: keyof typeof STEPS): void {
    this.collect(exchange)
    this.exchanges.push(exchange)
    this.t.step(STEPS[step])
    this.printExchange(exchange, { html: true })
    this.flushLogs()
  }

  /** An exchange of the user's browser on the connect pages or at a third-party provider, under `title`. */
  connectExchange(exchange: Exchange, title: string | undefined): void {
    this.collect(exchange)
    this.exchanges.push(exchange)
    if (title !== undefined) this.t.step(title)
    this.printExchange(exchange, { html: true })
    this.flushLogs()
  }

  /** Opens a step of the user's part of the flow. */
  enter(step: keyof typeof STEPS): void {
    this.t.step(STEPS[step])
  }

  /** What a page shows (its title and the start of its text). */
  pageShown(title: string, text: string): void {
    this.t.line(`  the browser shows "${title}": ${text}`)
  }

  /** What the login page shows. */
  loginPage(title: string, text: string): void {
    this.t.line(`  the browser shows "${title}": ${text}`)
  }

  /** What the consent page shows. */
  consentPage(view: ConsentView, decision: "Approve" | "Deny", user: string): void {
    this.t.line("  the browser shows the consent page:")
    this.t.table(
      [
        ["heading", view.heading],
        ["client", view.clientName],
        ["redirect host", view.redirectHost],
        ["warning", view.localhostWarning ?? "(none)"],
        ["resource", view.resource],
        ...view.scopes.map((scope, i) => [i === 0 ? "scopes" : "", scope] as [string, string]),
        ...(view.signedInAs === undefined ? [] : [["signed in as", view.signedInAs] as [string, string]]),
      ],
      8,
    )
    this.t.line(`  ${user} clicks ${decision}`)
  }

  /** The redirect back to the client, as the user agent hands it over. */
  authorizationResponse(callbackUrl: string): void {
    const url = new URL(callbackUrl)
    collectParams(this.redactor, url.searchParams)
    this.t.step(STEPS.authorizationResponse)
    this.t.line(`→ GET ${url.origin}${url.pathname}`)
    this.t.table(
      [...url.searchParams].map(([name, value]) => [name, this.shown(name, value)]),
      8,
    )
    const iss = url.searchParams.get("iss")
    if (iss !== null) {
      this.t.note(
        `the client checks state against its pending request, then iss ${iss === this.context.issuer ? "=" : "≠"} the issuer it discovered (RFC 9207 §2.4)`,
      )
    }
  }

  /** How a parameter value is shown: credentials described, the rest as is. */
  private shown(name: string, value: string): string {
    if (name === "request" && value.includes("response_type=")) {
      return `(the authorization request's ${[...new URLSearchParams(value)].length} parameters, carried through the form)`
    }
    return SECRET_PARAMETERS.has(name) ? this.redactor.show(value, { lowEntropy: name === "password" }) : value
  }

  private printExchange(
    exchange: Exchange,
    options: { readonly maxLines?: number; readonly html?: boolean } = {},
  ): void {
    const { url } = exchange
    const query = [...url.searchParams]
    this.t.line(
      `→ ${exchange.method} ${url.origin}${url.pathname}${query.length > 0 && options.html === true ? "?…" : ""}`,
    )
    if (query.length > 0 && options.html !== true) {
      this.t.table(
        query.map(([name, value]) => [name, this.shown(name, value)]),
        8,
      )
    }
    const authorization = exchange.requestHeaders.get("authorization")
    if (authorization !== null) {
      const [scheme] = authorization.split(" ")
      this.t.line(
        `  Authorization: ${authorization}${scheme?.toLowerCase() === "basic" ? "  (client_secret_basic)" : ""}`,
      )
    }
    if (exchange.requestHeaders.get("cookie") !== null)
      this.t.line(`  Cookie: ${exchange.requestHeaders.get("cookie")}`)
    this.printBody(exchange.requestBody, exchange.requestHeaders, options)
    this.t.line(`← ${exchange.status} ${exchange.statusText}`)
    for (const name of ["www-authenticate", "location", "cache-control"]) {
      const value = exchange.responseHeaders.get(name)
      if (value === null) continue
      if (name === "cache-control" && !sameEndpoint(url, this.endpoints.token)) continue
      const label = name.replace(/(^|-)([a-z])/gu, (_, dash: string, c: string) => `${dash}${c.toUpperCase()}`)
      if (name === "location") {
        const target = new URL(value, url)
        this.t.line(`  Location: ${target.origin}${target.pathname}${target.search === "" ? "" : "?…"}`)
        if (target.search !== "" && target.origin !== url.origin) {
          this.t.table(
            [...target.searchParams].map(([n, v]) => [n, this.shown(n, v)]),
            8,
          )
        }
      } else this.t.line(`  ${label === "Www-Authenticate" ? "WWW-Authenticate" : label}: ${value}`)
    }
    for (const cookie of exchange.responseHeaders.getSetCookie()) {
      this.t.line(`  Set-Cookie: ${cookie.split(";")[0]}; …`)
    }
    if (options.html !== true || !(exchange.responseHeaders.get("content-type") ?? "").includes("text/html")) {
      this.printBody(exchange.responseBody, exchange.responseHeaders, options)
    }
  }

  private printBody(body: string | undefined, headers: Headers, options: { readonly maxLines?: number }): void {
    if (body === undefined) return
    const type = headers.get("content-type") ?? ""
    const json = parseJson(body)
    if (json !== undefined && (type.includes("json") || type === "")) {
      this.t.json(redactJson(this.redactor, json), 8, options.maxLines ?? 40)
    } else if (type.includes("x-www-form-urlencoded")) {
      const params = new URLSearchParams(body)
      this.t.table(
        [...params].map(([name, value]) => [name, this.shown(name, value)]),
        8,
      )
    } else if (!type.includes("text/html")) {
      const text = body.length > 300 ? `${body.slice(0, 300)}… (${body.length} chars)` : body
      this.t.lines(text.split("\n"), 8)
    }
  }
}
