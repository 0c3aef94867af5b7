/**
 * The authorization server stage: for each authorization server the protected resource metadata names (and, for
 * 2025-03-26 clients, the MCP server's origin), the metadata each revision's clients find, in their order, and what
 * that metadata promises: the exact issuer, PKCE S256, secure endpoints, the `iss` parameter, the registration paths
 * clients can use, public-client authentication, scopes, signing keys, CORS and the extensions it advertises.
 *
 * @module
 */
import { ClientAuth, Grant, Jwk, Metadata, Revision, SecureUrl, TokenResponse, WellKnown, Wire } from "@keyway/core"
import * as Result from "effect/Result"
import type { CheckEntry, Exchange, Finding, Status } from "../Finding.js"
import type { Seen } from "../Probe.js"
import type { AuthorizationServerFound, Stage, Walk } from "../Walk.js"
import { BROWSER_ORIGIN } from "./resource.js"

const MCP = "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization"

/** The authorization server checks, by ID. */
export const catalog: Readonly<Record<string, CheckEntry>> = {
  "as.metadata": {
    title: "Authorization server metadata is found where clients of each revision look",
    why: "Clients read the authorization server's endpoints from its metadata: 2025-06-18 clients look only at the RFC 8414 location, 2025-11-25 clients try RFC 8414 and OpenID Connect Discovery in a fixed order, 2025-03-26 clients look at the MCP server's origin and otherwise guess /authorize, /token and /register. A client that finds nothing cannot sign in (MCP: Authorization Server Metadata Discovery).",
    fix: "Serve the metadata at the RFC 8414 well-known URI of the issuer (path inserted after /.well-known/oauth-authorization-server), and at the OpenID Connect location too if it is an OpenID provider.",
    spec: `${MCP}#authorization-server-metadata-discovery`,
  },
  "as.issuer": {
    title: "The metadata's issuer is exactly the issuer the client looked up",
    why: "Clients compare the issuer in the metadata with the one they expected character for character, without normalisation (a trailing slash, a different case or port differ), and refuse metadata that does not match (RFC 8414 §3.3, OpenID Connect Discovery §4.3).",
    fix: "Make the issuer in the metadata identical to the authorization server URL listed in authorization_servers of the protected resource metadata (same scheme, host, port, path and trailing slash).",
    spec: "https://www.rfc-editor.org/rfc/rfc8414.html#section-3.3",
  },
  "as.http-issuer": {
    title: "The issuer is https (or http on a loopback host)",
    why: "An issuer identifier is an https URL (RFC 8414 §2) and every authorization server endpoint must be served over https (MCP: Communication Security); clients refuse an http issuer on a public host, and tokens and codes would travel in clear.",
    fix: "Serve the authorization server over https and publish an https issuer.",
    spec: "https://www.rfc-editor.org/rfc/rfc8414.html#section-2",
  },
  "as.pkce-s256": {
    title: "The metadata lists S256 in code_challenge_methods_supported",
    why: "From 2025-11-25 MCP clients must verify PKCE support in the metadata and refuse to proceed when code_challenge_methods_supported is absent; every revision requires PKCE with S256 (MCP: Authorization Code Protection, OAuth 2.1 §4.1.1).",
    fix: 'Add "code_challenge_methods_supported": ["S256"] to the metadata (and support PKCE S256 at the authorization and token endpoints).',
    spec: `${MCP}#authorization-code-protection`,
  },
  "as.endpoints": {
    title: "The authorization and token endpoints are published, on https (or loopback http)",
    why: "Clients need authorization_endpoint and token_endpoint for the authorization code flow, and refuse or cannot safely use endpoints over plain http on a public host (MCP: Communication Security, OAuth 2.1 §1.5).",
    fix: "Publish authorization_endpoint and token_endpoint, and serve every endpoint in the metadata over https.",
    spec: `${MCP}#communication-security`,
  },
  "as.iss-parameter": {
    title: "The metadata says authorization responses carry iss (RFC 9207)",
    why: "With authorization_response_iss_parameter_supported true, clients check the iss parameter of the authorization response and defeat mix-up attacks between authorization servers; 2026-07-28 clients reject a response without iss when it is advertised (RFC 9207 §2.4, §3).",
    fix: 'Return iss in authorization responses and publish "authorization_response_iss_parameter_supported": true.',
    spec: "https://www.rfc-editor.org/rfc/rfc9207.html#section-3",
  },
  "as.registration": {
    title: "Clients of each revision have a registration path besides pre-registration",
    why: "A client without a client ID can register through client ID metadata documents (client_id_metadata_document_supported, used by 2025-11-25 clients and later) or dynamic client registration (registration_endpoint, every revision); without either, users must register a client by hand and type its ID into the client (MCP: Client Registration Approaches).",
    fix: "Offer client ID metadata documents (2025-11-25 and later clients) and dynamic client registration (2025-06-18 and earlier clients), and advertise them in the metadata.",
    spec: `${MCP}#client-registration-approaches`,
  },
  "as.token-auth-methods": {
    title: 'token_endpoint_auth_methods_supported includes "none" for public clients',
    why: 'Clients that register themselves (dynamic registration, client ID metadata documents) are mostly public clients (desktop apps, CLIs, browser apps) that authenticate with "none"; a server that lists only secret-based methods, or lists none (RFC 8414 §2 then means client_secret_basic), leaves them without a method (RFC 7591 §2).',
    fix: 'Add "none" to token_endpoint_auth_methods_supported and accept public clients with PKCE.',
    spec: "https://www.rfc-editor.org/rfc/rfc7591.html#section-2",
  },
  "as.scopes": {
    title: "The MCP server's scopes are among the authorization server's scopes_supported",
    why: "Clients request the scopes the protected resource metadata lists (MCP: Scope Selection Strategy); an authorization server that does not know them rejects the request with invalid_scope or issues a token without them.",
    fix: "Make the authorization server know every scope the MCP server lists in scopes_supported, and list them in its own scopes_supported.",
    spec: `${MCP}#scope-selection-strategy`,
  },
  "as.jwks": {
    title: "The jwks_uri serves a JWK Set with a public signing key (RSA, EC or OKP)",
    why: "Resource servers verify JWT access tokens with the keys at jwks_uri (RFC 8414 §2); an unreachable JWK Set, symmetric keys only, or private key material there breaks token validation or gives the signing key away (RFC 7517 §4).",
    fix: "Serve a JWK Set of public RSA, EC or OKP keys at jwks_uri, without private members or symmetric (oct) keys.",
    spec: "https://www.rfc-editor.org/rfc/rfc8414.html#section-2",
  },
  "as.cors": {
    title: "The metadata, token and registration endpoints answer browsers from other origins (CORS)",
    why: "Browser-based clients (the MCP Inspector, web apps) read the metadata and call the token and registration endpoints cross-origin; without Access-Control-Allow-Origin and a preflight answer the browser blocks the response and the client cannot sign in (Fetch: CORS protocol).",
    fix: "Answer OPTIONS preflights and send Access-Control-Allow-Origin on the metadata, token and registration endpoints (they use no cookies, so * is fine).",
    spec: "https://fetch.spec.whatwg.org/#http-cors-protocol",
  },
  "as.extensions": {
    title: "The MCP authorization extensions the authorization server advertises",
    why: "Extensions (client credentials, DPoP, enterprise-managed authorization, workload identity) are optional and advertised in the metadata; clients use one only when its metadata is there (MCP: Authorization Extensions).",
    fix: "Advertise each extension you support in the metadata (grant_types_supported, dpop_signing_alg_values_supported).",
    spec: `${MCP}#mcp-authorization-extensions`,
  },
  "as.client-credentials": {
    title: "A client credentials token request with the given client succeeds",
    why: "Machine-to-machine clients of the client credentials extension obtain tokens with their client ID and secret and no user (RFC 6749 §4.4); a refused request means the client, its secret, its allowed resources or the grant are misconfigured.",
    fix: "Register the client for the client_credentials grant with this secret and allow it the MCP server as a resource.",
    spec: "https://www.rfc-editor.org/rfc/rfc6749.html#section-4.4",
  },
}

type CheckId = keyof typeof catalog & string

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const strings = (u: unknown): ReadonlyArray<string> | undefined =>
  Array.isArray(u) && u.every((s) => typeof s === "string") ? (u as ReadonlyArray<string>) : undefined

const list = (values: ReadonlyArray<string>): string => `[${values.map((v) => JSON.stringify(v)).join(", ")}]`

/** A location tried and what it answered, in the words of a report. */
const answered = (seen: Seen): string =>
  seen.status === undefined
    ? `no answer (${seen.exchange.error ?? "no response"})`
    : seen.status >= 300 && seen.status < 400
      ? `${seen.status} (a redirect to ${seen.headers.get("location") ?? "nowhere"}, not followed)`
      : String(seen.status)

/** An authorization server as clients of some revisions reach it. */
interface Target {
  /** The issuer clients expect; for the 2025-03-26 fallback, the MCP server's origin. */
  readonly server: string
  readonly revisions: ReadonlyArray<Revision.Revision>
  /** The walk's entry for it, to fill in; absent for the 2025-03-26 origin unless it is also a listed issuer. */
  readonly found?: AuthorizationServerFound
}

/** The document one revision's clients found: where, and the metadata it holds (schema-valid). */
interface Found {
  readonly url: string
  readonly seen: Seen
  readonly metadata: Wire.AuthorizationServerMetadata
  readonly json: Readonly<Record<string, unknown>>
}

/** One revision's outcome of a check, before revisions with the same outcome are grouped into one finding. */
interface Outcome {
  readonly status: Status
  readonly detail: string
  readonly exchanges: ReadonlyArray<Exchange>
}

const legacyOf = (revision: Revision.Revision) => Revision.features(revision).legacyDefaultEndpoints

/** The metadata locations a client of `revision` tries for `target`, in its order. */
const locationsOf = (walk: Walk, server: string, revision: Revision.Revision): ReadonlyArray<string> => {
  const features = Revision.features(revision)
  if (features.legacyDefaultEndpoints) return [Revision.legacyEndpoints(walk.target).metadata]
  const all = WellKnown.authorizationServerMetadataUrls(server)
  return (features.openIdDiscovery ? all : all.filter((l) => l.kind === "oauth-authorization-server")).map((l) => l.url)
}

/** The targets: each listed issuer for the revisions that use protected resource metadata, and the 2025-03-26 origin. */
const targetsOf = (walk: Walk): ReadonlyArray<Target> => {
  const modern = walk.revisions.filter((r) => !legacyOf(r))
  const legacy = walk.revisions.filter(legacyOf)
  const targets: Array<Target> = []
  if (modern.length > 0) {
    for (const found of walk.authorizationServers.values()) {
      targets.push({ server: found.issuer, revisions: modern, found })
    }
  }
  if (legacy.length > 0) {
    const origin = URL.parse(walk.target)?.origin
    if (origin !== undefined && origin !== "null") {
      const same = targets.findIndex((t) => t.server === origin)
      const merged = same === -1 ? undefined : targets[same]
      if (merged === undefined) targets.push({ server: origin, revisions: legacy })
      else targets[same] = { ...merged, revisions: [...legacy, ...merged.revisions] }
    }
  }
  return targets
}

/** Groups per-revision outcomes of one check into findings: one per distinct status and detail. */
const group = (
  check: CheckId,
  server: string,
  outcomes: ReadonlyArray<readonly [Revision.Revision, Outcome | undefined]>,
): Array<Finding> => {
  const findings: Array<{ -readonly [K in keyof Finding]: Finding[K] }> = []
  for (const [revision, outcome] of outcomes) {
    if (outcome === undefined) continue
    const same = findings.find((f) => f.status === outcome.status && f.detail === outcome.detail)
    if (same !== undefined) same.revisions = [...same.revisions, revision]
    else findings.push({ check, server, revisions: [revision], ...outcome })
  }
  return findings
}

const pass = (detail: string, exchanges: ReadonlyArray<Exchange>): Outcome => ({ status: "pass", detail, exchanges })
const warn = (detail: string, exchanges: ReadonlyArray<Exchange>): Outcome => ({ status: "warn", detail, exchanges })
const fail = (detail: string, exchanges: ReadonlyArray<Exchange>): Outcome => ({ status: "fail", detail, exchanges })

/** The stage's requests, each made once however many revisions read its answer. */
const memo = () => {
  const cache = new Map<string, Promise<Seen>>()
  return (key: string, send: () => Promise<Seen>): Promise<Seen> => {
    let seen = cache.get(key)
    if (seen === undefined) {
      seen = send()
      cache.set(key, seen)
    }
    return seen
  }
}

type Send = ReturnType<typeof memo>

const get = (walk: Walk, send: Send, url: string, headers: Record<string, string> = { accept: "application/json" }) =>
  send(`GET ${url} ${JSON.stringify(headers)}`, () => walk.probe.send(url, { headers }))

/** What one revision's discovery found: the document, or the outcome of `as.metadata` that says why not. */
const discover = async (
  walk: Walk,
  send: Send,
  target: Target,
  revision: Revision.Revision,
): Promise<{ readonly outcome: Outcome; readonly found?: Found }> => {
  let urls: ReadonlyArray<string>
  try {
    urls = locationsOf(walk, target.server, revision)
  } catch {
    return { outcome: fail(`the issuer "${target.server}" is not a valid URL, so no metadata location exists`, []) }
  }
  const tried: Array<string> = []
  const exchanges: Array<Exchange> = []
  for (const url of urls) {
    const seen = await get(walk, send, url)
    exchanges.push(seen.exchange)
    tried.push(`${url} → ${answered(seen)}`)
    if (seen.status !== undefined && seen.status >= 300 && seen.status < 500) continue
    if (seen.status === undefined || seen.status >= 500) {
      return { outcome: fail(`tried ${tried.join(", ")}: clients stop at a failing location`, exchanges) }
    }
    const checked = Wire.validate(Wire.AuthorizationServerMetadata, seen.json, "authorization server metadata")
    if (Result.isFailure(checked) || !isRecord(seen.json)) {
      const why = Result.isFailure(checked) ? checked.failure.message : "not a JSON object"
      return { outcome: fail(`tried ${tried.join(", ")}: the document at ${url} is invalid: ${why}`, exchanges) }
    }
    return {
      outcome: pass(`tried ${tried.join(", ")}: found`, exchanges),
      found: { url, seen, metadata: checked.success, json: seen.json },
    }
  }
  if (legacyOf(revision)) {
    const defaults = Revision.legacyEndpoints(walk.target)
    return {
      outcome: warn(
        `tried ${tried.join(", ")}: none found, so 2025-03-26 clients use the default endpoints ${defaults.authorization_endpoint}, ${defaults.token_endpoint} and ${defaults.registration_endpoint}`,
        exchanges,
      ),
    }
  }
  return { outcome: fail(`tried ${tried.join(", ")}: none found`, exchanges) }
}

const issuerOutcome = (target: Target, revision: Revision.Revision, found: Found): Outcome => {
  const legacy = legacyOf(revision)
  const checked = Metadata.processAuthorizationServerMetadata(target.server, found.url, found.json, {
    legacy,
    pkce: false,
    endpoints: [],
  })
  if (Result.isFailure(checked)) return fail(checked.failure.message, [found.seen.exchange])
  return pass(
    legacy && found.metadata.issuer !== target.server
      ? `issuer is "${found.metadata.issuer}", at the MCP server's origin ${target.server} (accepted by 2025-03-26 clients)`
      : `issuer is "${found.metadata.issuer}", identical to the issuer looked up`,
    [found.seen.exchange],
  )
}

const pkceOutcome = (revision: Revision.Revision, found: Found): Outcome => {
  const exchanges = [found.seen.exchange]
  // Core's PKCE rule, with the issuer judged by as.issuer: the document's own issuer is the one expected here.
  const checked = Metadata.processAuthorizationServerMetadata(found.metadata.issuer, found.url, found.json, {
    endpoints: [],
  })
  if (Result.isSuccess(checked)) {
    return pass(
      `code_challenge_methods_supported is ${list(found.metadata.code_challenge_methods_supported ?? [])}`,
      exchanges,
    )
  }
  const absent = found.metadata.code_challenge_methods_supported === undefined
  if (absent && !Revision.features(revision).pkceMetadataCheck) {
    return warn(
      `${checked.failure.message}; clients of this revision do not all check it, later ones refuse`,
      exchanges,
    )
  }
  return fail(checked.failure.message, exchanges)
}

const ENDPOINTS = [
  "authorization_endpoint",
  "token_endpoint",
  "registration_endpoint",
  "jwks_uri",
  "revocation_endpoint",
  "introspection_endpoint",
  "pushed_authorization_request_endpoint",
  "userinfo_endpoint",
] as const

const endpointsOutcome = (found: Found): Outcome => {
  const exchanges = [found.seen.exchange]
  const checked = Metadata.processAuthorizationServerMetadata(found.metadata.issuer, found.url, found.json, {
    pkce: false,
  })
  if (Result.isFailure(checked)) return fail(checked.failure.message, exchanges)
  const insecure = ENDPOINTS.flatMap((name) => {
    const url = found.metadata[name]
    return url !== undefined && !SecureUrl.isAllowed(url, { httpLoopback: true }) ? [`${name} ${url}`] : []
  })
  if (insecure.length > 0) {
    return fail(`not https (nor http on a loopback host): ${insecure.join(", ")}`, exchanges)
  }
  return pass(
    `authorization_endpoint ${found.metadata.authorization_endpoint} and token_endpoint ${found.metadata.token_endpoint}; every endpoint is https or loopback http`,
    exchanges,
  )
}

const issParameterOutcome = (found: Found): Outcome =>
  found.metadata.authorization_response_iss_parameter_supported === true
    ? pass("authorization_response_iss_parameter_supported is true", [found.seen.exchange])
    : warn(
        `authorization_response_iss_parameter_supported is ${found.metadata.authorization_response_iss_parameter_supported === false ? "false" : "absent"}: clients cannot detect a mix-up between authorization servers`,
        [found.seen.exchange],
      )

/** The registration paths a client of `revision` can use with this metadata. */
const pathsOf = (revision: Revision.Revision, found: Found) => {
  const cimdAdvertised = found.metadata.client_id_metadata_document_supported === true
  const cimd = cimdAdvertised && Revision.features(revision).clientIdMetadataDocuments
  const dcr = found.metadata.registration_endpoint !== undefined
  return { cimdAdvertised, cimd, dcr }
}

const registrationOutcome = (revision: Revision.Revision, found: Found): Outcome => {
  const { cimdAdvertised, cimd, dcr } = pathsOf(revision, found)
  const paths = [
    "pre-registration",
    ...(cimd ? ["client ID metadata documents (client_id_metadata_document_supported)"] : []),
    ...(dcr ? [`dynamic registration (registration_endpoint ${found.metadata.registration_endpoint})`] : []),
  ]
  const unused =
    cimdAdvertised && !cimd
      ? "; client ID metadata documents are advertised, but clients of this revision predate them"
      : ""
  const detail = `clients can register by: ${paths.join(", ")}${unused}`
  return paths.length > 1
    ? pass(detail, [found.seen.exchange])
    : warn(`${detail} only: users must register a client by hand`, [found.seen.exchange])
}

const tokenAuthOutcome = (revision: Revision.Revision, found: Found): Outcome | undefined => {
  const { cimd, dcr } = pathsOf(revision, found)
  if (!cimd && !dcr) return undefined
  const offered = [...(dcr ? ["dynamic registration"] : []), ...(cimd ? ["client ID metadata documents"] : [])].join(
    " and ",
  )
  const methods = found.metadata.token_endpoint_auth_methods_supported
  if (methods?.includes("none") === true) {
    return pass(`token_endpoint_auth_methods_supported ${list(methods)} includes "none"`, [found.seen.exchange])
  }
  return warn(
    `${methods === undefined ? "token_endpoint_auth_methods_supported is absent (client_secret_basic only)" : `token_endpoint_auth_methods_supported is ${list(methods)}`}, without "none", but ${offered} ${offered.includes(" and ") ? "are" : "is"} offered: public clients have no method`,
    [found.seen.exchange],
  )
}

const scopesOutcome = (walk: Walk, found: Found): Outcome | undefined => {
  const resourceScopes = strings(walk.resourceMetadata?.document.scopes_supported)
  const asScopes = found.metadata.scopes_supported
  if (resourceScopes === undefined || asScopes === undefined) return undefined
  const missing = resourceScopes.filter((s) => !asScopes.includes(s))
  if (missing.length > 0) {
    return warn(
      `the MCP server's scopes_supported ${list(resourceScopes)} has ${list(missing)}, which the authorization server's scopes_supported ${list(asScopes)} lacks`,
      [found.seen.exchange],
    )
  }
  return pass(`the MCP server's scopes_supported ${list(resourceScopes)} are all in the authorization server's`, [
    found.seen.exchange,
  ])
}

const USABLE_KEY_TYPES = ["RSA", "EC", "OKP"]

const jwksOutcome = async (walk: Walk, send: Send, found: Found): Promise<Outcome | undefined> => {
  const uri = found.metadata.jwks_uri
  if (uri === undefined) return undefined
  const seen = await get(walk, send, uri)
  const exchanges = [seen.exchange]
  if (seen.status !== 200) return fail(`jwks_uri ${uri} answered ${answered(seen)}`, exchanges)
  if (!isRecord(seen.json) || !Array.isArray(seen.json.keys)) {
    return fail(`jwks_uri ${uri} is not a JWK Set (a JSON object with a "keys" array)`, exchanges)
  }
  const leaked = Jwk.findPrivateKeyMaterial(seen.json)
  if (leaked !== undefined && leaked.kind === "private") {
    return fail(`the JWK Set at ${uri} has private key material: ${leaked.path} ${leaked.problem}`, exchanges)
  }
  const keys = seen.json.keys.filter(isRecord)
  const signing = keys.filter(
    (k) => typeof k.kty === "string" && USABLE_KEY_TYPES.includes(k.kty) && (k.use === undefined || k.use === "sig"),
  )
  const types = keys.map((k) => String(k.kty))
  if (signing.length === 0) {
    return fail(
      `the JWK Set at ${uri} has no public signing key of type RSA, EC or OKP (key types: ${list(types)})`,
      exchanges,
    )
  }
  if (leaked !== undefined) {
    return fail(`the JWK Set at ${uri} publishes a symmetric key: ${leaked.path} ${leaked.problem}`, exchanges)
  }
  return pass(
    `the JWK Set at ${uri} has ${signing.length} public signing key(s) (key types: ${list(types)})`,
    exchanges,
  )
}

/** Whether a CORS answer lets the browser origin read the response. */
const allowsOrigin = (seen: Seen): boolean => {
  const allowed = seen.headers.get("access-control-allow-origin")
  return allowed === "*" || allowed === BROWSER_ORIGIN
}

const preflight = async (walk: Walk, send: Send, url: string, headers: string): Promise<[string, Exchange]> => {
  const seen = await send(`OPTIONS ${url}`, () =>
    walk.probe.send(url, {
      method: "OPTIONS",
      headers: {
        origin: BROWSER_ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": headers,
      },
    }),
  )
  if (seen.status === undefined || seen.status < 200 || seen.status > 299) {
    return [`the preflight of ${url} answered ${answered(seen)}`, seen.exchange]
  }
  if (!allowsOrigin(seen)) return [`the preflight of ${url} has no Access-Control-Allow-Origin`, seen.exchange]
  const methods = (seen.headers.get("access-control-allow-methods") ?? "").toLowerCase()
  if (methods !== "*" && !methods.split(",").some((m) => m.trim() === "post")) {
    return [`the preflight of ${url} does not allow POST`, seen.exchange]
  }
  const allowedHeaders = (seen.headers.get("access-control-allow-headers") ?? "").toLowerCase()
  const missing = headers
    .split(",")
    .filter((h) => allowedHeaders !== "*" && !allowedHeaders.split(",").some((a) => a.trim() === h))
  if (missing.length > 0)
    return [`the preflight of ${url} does not allow the header(s) ${missing.join(", ")}`, seen.exchange]
  return ["", seen.exchange]
}

const corsOutcome = async (walk: Walk, send: Send, found: Found): Promise<Outcome> => {
  const problems: Array<string> = []
  const exchanges: Array<Exchange> = []
  const metadata = await get(walk, send, found.url, { accept: "application/json", origin: BROWSER_ORIGIN })
  exchanges.push(metadata.exchange)
  if (!allowsOrigin(metadata)) problems.push(`the metadata at ${found.url} has no Access-Control-Allow-Origin`)
  const endpoints: Array<readonly [string, string]> = []
  if (found.metadata.token_endpoint !== undefined) endpoints.push([found.metadata.token_endpoint, "content-type"])
  if (found.metadata.registration_endpoint !== undefined) {
    endpoints.push([found.metadata.registration_endpoint, "content-type"])
  }
  for (const [url, headers] of endpoints) {
    const [problem, exchange] = await preflight(walk, send, url, headers)
    exchanges.push(exchange)
    if (problem !== "") problems.push(problem)
  }
  const checked = [`the metadata at ${found.url}`, ...endpoints.map(([url]) => `the preflight of ${url}`)].join(", ")
  return problems.length === 0
    ? pass(`${checked}: each allows the origin ${BROWSER_ORIGIN}`, exchanges)
    : warn(`${problems.join("; ")}: browser-based clients are blocked`, exchanges)
}

const extensionsOutcome = (revision: Revision.Revision, found: Found): Outcome | undefined => {
  if (!Revision.features(revision).extensions) return undefined
  const grants = found.metadata.grant_types_supported ?? []
  const advertised = [
    ...(grants.includes(Grant.CLIENT_CREDENTIALS)
      ? ["client credentials (grant_types_supported client_credentials)"]
      : []),
    ...(found.metadata.dpop_signing_alg_values_supported === undefined
      ? []
      : [`DPoP (dpop_signing_alg_values_supported ${list(found.metadata.dpop_signing_alg_values_supported)})`]),
    ...(grants.includes(Grant.JWT_BEARER)
      ? ["the JWT bearer grant (enterprise-managed authorization with ID-JAG, workload identity federation)"]
      : []),
    ...(grants.includes(Grant.TOKEN_EXCHANGE) ? ["token exchange (RFC 8693)"] : []),
  ]
  if (advertised.length === 0) return undefined
  return pass(`advertises ${advertised.join(", ")}`, [found.seen.exchange])
}

const clientCredentialsOutcome = async (walk: Walk, found: Found): Promise<Outcome | undefined> => {
  const credentials = walk.options.clientCredentials
  const tokenEndpoint = found.metadata.token_endpoint
  if (credentials === undefined || tokenEndpoint === undefined) return undefined
  const method = ClientAuth.chooseMethod(found.metadata.token_endpoint_auth_methods_supported, {
    secret: true,
    privateKey: false,
  })
  if (method === undefined || method === "private_key_jwt") {
    return fail(
      `token_endpoint_auth_methods_supported ${list(found.metadata.token_endpoint_auth_methods_supported ?? [])} has no client secret method`,
      [found.seen.exchange],
    )
  }
  const headers = new Headers({ "content-type": "application/x-www-form-urlencoded", accept: "application/json" })
  const body = new URLSearchParams({ grant_type: Grant.CLIENT_CREDENTIALS, resource: walk.target })
  ClientAuth.addTo(ClientAuth.apply(method, credentials), headers, body)
  const seen = await walk.probe.send(tokenEndpoint, { method: "POST", headers, body })
  const exchanges = [seen.exchange]
  if (seen.status === undefined) return fail(`the token endpoint ${tokenEndpoint} gave no answer`, exchanges)
  const processed = TokenResponse.process(tokenEndpoint, seen.status, seen.json)
  if (Result.isFailure(processed)) return fail(processed.failure.message, exchanges)
  const token = processed.success
  return pass(
    `client ${credentials.clientId} (${method}) got a ${token.token_type} token for ${walk.target}${token.scope === undefined ? "" : ` with scope "${token.scope}"`}${token.expires_in === undefined ? "" : `, expiring in ${token.expires_in} s`}`,
    exchanges,
  )
}

/** The revisions whose clients take a check of extensions; every revision of the target when none does. */
const extensionRevisions = (target: Target) => {
  const newer = target.revisions.filter((r) => Revision.features(r).extensions)
  return newer.length > 0 ? newer : target.revisions
}

const runTarget = async (walk: Walk, send: Send, target: Target): Promise<Array<Finding>> => {
  // One revision after the other, so the exchanges read in the order clients make them.
  const discovered: Array<readonly [Revision.Revision, Awaited<ReturnType<typeof discover>>]> = []
  for (const revision of target.revisions) discovered.push([revision, await discover(walk, send, target, revision)])
  const findings = group(
    "as.metadata",
    target.server,
    discovered.map(([revision, d]) => [revision, d.outcome]),
  )
  const withDocument = discovered.flatMap(([revision, d]) =>
    d.found === undefined ? [] : [[revision, d.found] as const],
  )
  const each = (check: CheckId, outcome: (revision: Revision.Revision, found: Found) => Outcome | undefined) =>
    findings.push(
      ...group(
        check,
        target.server,
        withDocument.map(([r, f]) => [r, outcome(r, f)]),
      ),
    )
  const eachAsync = async (
    check: CheckId,
    outcome: (revision: Revision.Revision, found: Found) => Promise<Outcome | undefined>,
  ) => {
    const outcomes: Array<readonly [Revision.Revision, Outcome | undefined]> = []
    for (const [r, f] of withDocument) outcomes.push([r, await outcome(r, f)])
    findings.push(...group(check, target.server, outcomes))
  }

  each("as.issuer", (r, f) => issuerOutcome(target, r, f))
  if (target.found !== undefined) {
    const transport = SecureUrl.transportOf(target.server)
    findings.push(
      ...group(
        "as.http-issuer",
        target.server,
        target.revisions
          .filter((r) => !legacyOf(r))
          .map((r) => [
            r,
            transport === "http"
              ? fail(`the issuer ${target.server} is http on a public host`, [])
              : pass(
                  `the issuer ${target.server} is ${transport === "https" ? "https" : "http on a loopback host"}`,
                  [],
                ),
          ]),
      ),
    )
  }
  each("as.pkce-s256", pkceOutcome)
  each("as.endpoints", (_r, f) => endpointsOutcome(f))
  each("as.iss-parameter", (_r, f) => issParameterOutcome(f))
  each("as.registration", registrationOutcome)
  each("as.token-auth-methods", tokenAuthOutcome)
  each("as.scopes", (r, f) => (legacyOf(r) ? undefined : scopesOutcome(walk, f)))
  await eachAsync("as.jwks", (_r, f) => jwksOutcome(walk, send, f))
  await eachAsync("as.cors", (_r, f) => corsOutcome(walk, send, f))
  each("as.extensions", extensionsOutcome)

  // The document later stages use: the newest revision's, when its clients accept the issuer.
  const newest = [...withDocument].reverse().find(([r, f]) => issuerOutcome(target, r, f).status === "pass")
  if (newest !== undefined) {
    const [, found] = newest
    const entry = target.found ?? (walk.authorizationServers.size === 0 ? { issuer: found.metadata.issuer } : undefined)
    if (entry !== undefined) {
      entry.metadata = found.json
      entry.metadataUrl = found.url
      if (!walk.authorizationServers.has(entry.issuer)) walk.authorizationServers.set(entry.issuer, entry)
    }
    if (target.found !== undefined && walk.options.clientCredentials !== undefined) {
      const outcome = await clientCredentialsOutcome(walk, found)
      if (outcome !== undefined) {
        findings.push({
          check: "as.client-credentials",
          server: target.server,
          revisions: extensionRevisions(target),
          ...outcome,
        })
      }
    }
  }
  return findings
}

/** The authorization server checks. */
export const stage: Stage = {
  name: "authorizationServer",
  catalog,
  run: async (walk) => {
    const send = memo()
    const findings: Array<Finding> = []
    for (const target of targetsOf(walk)) findings.push(...(await runTarget(walk, send, target)))
    return findings
  },
}
