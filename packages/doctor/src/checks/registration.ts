/**
 * The registration stage: whether the clients MCP users run can register with each authorization server (the
 * redirect URIs they send, a client ID metadata document when asked), and whether the authorization and token
 * endpoints accept the `resource` parameter those clients send.
 *
 * @module
 */
import { Pkce, Revision, Wire } from "@keyway/core"
import * as Result from "effect/Result"
import type { CheckEntry, Exchange, Finding, Status } from "../Finding.js"
import type { Seen } from "../Probe.js"
import type { AuthorizationServerFound, Stage, Walk } from "../Walk.js"

/** The checks of this stage. */
export const catalog: Readonly<Record<string, CheckEntry>> = {
  "registration.loopback": {
    title: "Dynamic registration accepts loopback redirect URIs with any port",
    why: "Desktop and command-line clients (Claude Code, VS Code, Cursor, the MCP SDK clients) register http://127.0.0.1:<port>/ or http://localhost:<port>/ with a port picked at run time; refused, they cannot sign in at all. RFC 8252 §7.3 asks the authorization server to allow any port on loopback redirect URIs.",
    fix: "Accept http redirect URIs on 127.0.0.1, [::1] and localhost with any port at the registration endpoint (and match them ignoring the port).",
    spec: "https://www.rfc-editor.org/rfc/rfc8252.html#section-7.3",
  },
  "registration.private-scheme": {
    title: "Dynamic registration accepts private-use URI scheme redirects",
    why: "Native apps receive the authorization response on a private-use scheme in reverse domain name form (RFC 8252 §7.1); refused, mobile and desktop apps that do so cannot register.",
    fix: "Accept redirect URIs with a reverse-domain private-use scheme (com.example.app:/callback) for native clients.",
    spec: "https://www.rfc-editor.org/rfc/rfc8252.html#section-7.1",
  },
  "registration.hosted-callbacks": {
    title: "Dynamic registration accepts the hosted callback URLs of widely used clients",
    why: "Web-hosted clients register the https callback their documentation names; refused, users of that client cannot connect the server (RFC 7591 §2 redirect_uris, MCP dynamic client registration).",
    fix: "Allow the https callback URLs of the clients you support at the registration endpoint (or drop an allow list that omits them).",
    spec: "https://www.rfc-editor.org/rfc/rfc7591.html#section-2",
  },
  "registration.cimd": {
    title: "A client ID metadata document is accepted at the authorization endpoint",
    why: "From 2025-11-25, clients without a prior relationship use an https URL as client_id and the authorization server fetches the document; an authorization server that advertises client_id_metadata_document_supported but refuses such a client breaks them (MCP client ID metadata documents).",
    fix: "Fetch and validate the document at the client_id URL, then show the login page for that client.",
    spec: "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents",
  },
  "authorization.resource": {
    title: "The authorization endpoint accepts the resource parameter",
    why: "From 2025-06-18, MCP clients MUST send resource (RFC 8707) with the canonical server URI in the authorization request; an authorization server that answers invalid_target or an error stops every such client before the login page.",
    fix: "Accept resource at the authorization endpoint for the MCP server's canonical URI (register it as a resource the server issues tokens for).",
    spec: "https://www.rfc-editor.org/rfc/rfc8707.html#section-2.1",
  },
  "token.resource": {
    title: "The token endpoint accepts the resource parameter",
    why: "From 2025-06-18, MCP clients MUST send resource (RFC 8707) in token requests too; an authorization server that refuses it there lets users sign in and then fails the code exchange.",
    fix: "Accept resource at the token endpoint and issue the token with that audience.",
    spec: "https://www.rfc-editor.org/rfc/rfc8707.html#section-2.2",
  },
}

/**
 * The hosted callback URLs widely used clients document, each with where the client documents it. Only URLs a
 * client's own documentation names are listed.
 */
export const hostedCallbacks: ReadonlyArray<{
  readonly client: string
  readonly redirectUri: string
  readonly documentedAt: string
}> = [
  {
    client: "Claude",
    redirectUri: "https://claude.ai/api/mcp/auth_callback",
    documentedAt:
      "https://support.anthropic.com/en/articles/11503834-building-custom-connectors-via-remote-mcp-servers",
  },
  {
    client: "VS Code",
    redirectUri: "https://vscode.dev/redirect",
    // VS Code registers it beside its loopback redirect URIs (microsoft/vscode#278512 lists its registration request).
    documentedAt: "https://github.com/microsoft/vscode/issues/278512",
  },
]

// A port in the ephemeral range, as a client's loopback listener would get; any port must do.
const LOOPBACK_PORT = 49327
const CLIENT_NAME = "keyway-doctor"

/** A client the stage registered (or hosted), for the requests that need one. */
interface TestClient {
  readonly clientId: string
  readonly redirectUri: string
}

interface Registered {
  readonly seen: Seen
  /** The client, when the registration succeeded with a valid response. */
  readonly client?: TestClient
  /** Why it was refused, in a few words (`HTTP 400 invalid_redirect_uri: ...`). */
  readonly refusal?: string
}

const describeRefusal = (seen: Seen): string => {
  if (seen.status === undefined) return `no answer (${seen.exchange.error ?? "no response"})`
  const body = seen.json as { error?: unknown; error_description?: unknown } | undefined
  const error = typeof body?.error === "string" ? ` ${body.error}` : ""
  const description = typeof body?.error_description === "string" ? `: ${body.error_description}` : ""
  return `HTTP ${seen.status}${error}${description}`
}

const register = async (
  walk: Walk,
  endpoint: string,
  redirectUri: string,
  applicationType: "native" | "web",
): Promise<Registered> => {
  const request: Wire.ClientRegistrationRequest = {
    client_name: CLIENT_NAME,
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    application_type: applicationType,
  }
  const seen = await walk.probe.send(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(request),
  })
  if (seen.status !== 201 && seen.status !== 200) return { seen, refusal: describeRefusal(seen) }
  const parsed = Wire.validate(Wire.ClientRegistrationResponse, seen.json, "client registration response")
  if (Result.isFailure(parsed)) {
    return { seen, refusal: `HTTP ${seen.status} with an invalid registration response: ${parsed.failure.message}` }
  }
  return { seen, client: { clientId: parsed.success.client_id, redirectUri } }
}

const finding = (
  walk: Walk,
  check: string,
  status: Status,
  server: string,
  detail: string,
  exchanges: ReadonlyArray<Exchange>,
  revisions: ReadonlyArray<Revision.Revision> = walk.revisions,
): Finding => ({ check, status, server, revisions, detail, exchanges })

/** The resource clients send: the one the protected resource metadata publishes, else the server URL. */
const resourceOf = (walk: Walk): string => {
  const published = walk.resourceMetadata?.document.resource
  return typeof published === "string" ? published : walk.target
}

const registrationChecks = async (
  walk: Walk,
  server: AuthorizationServerFound,
  endpoint: string,
  findings: Array<Finding>,
): Promise<TestClient | undefined> => {
  const issuer = server.issuer
  const loopback = await register(walk, endpoint, `http://127.0.0.1:${LOOPBACK_PORT}/callback`, "native")
  const localhost = await register(walk, endpoint, `http://localhost:${LOOPBACK_PORT}/callback`, "native")
  const refused = [
    ...(loopback.refusal === undefined ? [] : [`http://127.0.0.1:${LOOPBACK_PORT}/callback (${loopback.refusal})`]),
    ...(localhost.refusal === undefined ? [] : [`http://localhost:${LOOPBACK_PORT}/callback (${localhost.refusal})`]),
  ]
  findings.push(
    finding(
      walk,
      "registration.loopback",
      refused.length === 0 ? "pass" : "fail",
      issuer,
      refused.length === 0
        ? `${endpoint} registered http://127.0.0.1:${LOOPBACK_PORT}/callback and http://localhost:${LOOPBACK_PORT}/callback`
        : `${endpoint} refused ${refused.join(" and ")}`,
      [loopback.seen.exchange, localhost.seen.exchange],
    ),
  )
  const privateUri = "com.example.app:/callback"
  const privateScheme = await register(walk, endpoint, privateUri, "native")
  findings.push(
    finding(
      walk,
      "registration.private-scheme",
      privateScheme.refusal === undefined ? "pass" : "warn",
      issuer,
      privateScheme.refusal === undefined
        ? `${endpoint} registered ${privateUri}`
        : `${endpoint} refused ${privateUri} (${privateScheme.refusal})`,
      [privateScheme.seen.exchange],
    ),
  )
  for (const hosted of hostedCallbacks) {
    const result = await register(walk, endpoint, hosted.redirectUri, "web")
    findings.push(
      finding(
        walk,
        "registration.hosted-callbacks",
        result.refusal === undefined ? "pass" : "warn",
        issuer,
        result.refusal === undefined
          ? `${endpoint} registered ${hosted.client}'s callback ${hosted.redirectUri} (documented at ${hosted.documentedAt})`
          : `${endpoint} refused ${hosted.client}'s callback ${hosted.redirectUri} (${result.refusal}); ${hosted.client} documents it at ${hosted.documentedAt}`,
        [result.seen.exchange],
      ),
    )
  }
  return loopback.client ?? localhost.client ?? privateScheme.client
}

/** The revisions whose clients send `resource` (2025-06-18 on). */
const resourceRevisions = (walk: Walk): ReadonlyArray<Revision.Revision> =>
  walk.revisions.filter((revision) => Revision.features(revision).resourceParameter)

/** The OAuth error of a redirect to the client's redirect URI, when the answer is one. */
const redirectedError = (seen: Seen, redirectUri: string): string | undefined => {
  const location = seen.headers.get("location")
  if (seen.status === undefined || seen.status < 300 || seen.status > 399 || location === null) return undefined
  const to = URL.parse(location, seen.exchange.url)
  const back = URL.parse(redirectUri)
  if (to === null || back === null) return undefined
  if (`${to.protocol}//${to.host}${to.pathname}` !== `${back.protocol}//${back.host}${back.pathname}`) return undefined
  const error = to.searchParams.get("error")
  if (error === null) return undefined
  const description = to.searchParams.get("error_description")
  return description === null ? error : `${error}: ${description}`
}

/**
 * Sends one authorization request (PKCE S256, `state`, and `resource` when given) for `client` and says what went
 * wrong, undefined when the server answered as it should: its login page rather than an error.
 */
const tryAuthorization = async (
  walk: Walk,
  endpoint: string,
  client: TestClient,
  resource: string | undefined,
): Promise<{ readonly seen: Seen; readonly problem: string | undefined }> => {
  const pkce = await Pkce.generate()
  const url = new URL(endpoint)
  url.searchParams.set("response_type", "code")
  url.searchParams.set("client_id", client.clientId)
  url.searchParams.set("redirect_uri", client.redirectUri)
  url.searchParams.set("code_challenge", pkce.challenge)
  url.searchParams.set("code_challenge_method", Pkce.METHOD)
  url.searchParams.set("state", "keyway-doctor")
  if (resource !== undefined) url.searchParams.set("resource", resource)
  const seen = await walk.probe.send(url, { headers: { accept: "text/html" } })
  const error = redirectedError(seen, client.redirectUri)
  const problem =
    error !== undefined
      ? `redirected back with error ${error}`
      : seen.status === undefined
        ? `gave no answer (${seen.exchange.error ?? "no response"})`
        : seen.status >= 400
          ? `answered ${describeRefusal(seen)}`
          : undefined
  return { seen, problem }
}

const authorizationResource = async (
  walk: Walk,
  server: AuthorizationServerFound,
  client: TestClient,
  findings: Array<Finding>,
): Promise<void> => {
  const endpoint = server.metadata?.authorization_endpoint
  const revisions = resourceRevisions(walk)
  if (typeof endpoint !== "string" || revisions.length === 0) return
  const resource = resourceOf(walk)
  const { seen, problem } = await tryAuthorization(walk, endpoint, client, resource)
  findings.push(
    finding(
      walk,
      "authorization.resource",
      problem === undefined ? "pass" : "fail",
      server.issuer,
      problem === undefined
        ? `an authorization request with resource=${resource} answered HTTP ${seen.status} (the login page, not an error)`
        : `an authorization request with resource=${resource} ${problem}`,
      [seen.exchange],
      revisions,
    ),
  )
}

const tokenResource = async (
  walk: Walk,
  server: AuthorizationServerFound,
  client: TestClient,
  findings: Array<Finding>,
): Promise<void> => {
  const endpoint = server.metadata?.token_endpoint
  const revisions = resourceRevisions(walk)
  if (typeof endpoint !== "string" || revisions.length === 0) return
  const resource = resourceOf(walk)
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code: "keyway-doctor-not-a-code",
    redirect_uri: client.redirectUri,
    code_verifier: Pkce.generateVerifier(),
    client_id: client.clientId,
    resource,
  })
  const seen = await walk.probe.send(endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: body.toString(),
  })
  const answer = seen.json as { error?: unknown; error_description?: unknown } | undefined
  const error = typeof answer?.error === "string" ? answer.error : undefined
  const description = typeof answer?.error_description === "string" ? answer.error_description : ""
  const status: Status =
    error === "invalid_grant"
      ? "pass"
      : error === "invalid_target" || (error === "invalid_request" && /resource/i.test(description))
        ? "fail"
        : "warn"
  findings.push(
    finding(
      walk,
      "token.resource",
      status,
      server.issuer,
      status === "pass"
        ? `a code exchange with a made-up code and resource=${resource} answered invalid_grant (the code, not the resource, was refused)`
        : status === "fail"
          ? `a code exchange with resource=${resource} answered ${describeRefusal(seen)}: the resource was refused`
          : `a code exchange with a made-up code and resource=${resource} answered ${describeRefusal(seen)}, not invalid_grant`,
      [seen.exchange],
      revisions,
    ),
  )
}

/** Hosts a client ID metadata document on 127.0.0.1 for as long as `use` runs, then closes the listener. */
const hostingDocument = async <A>(use: (client: TestClient) => Promise<A>): Promise<A> => {
  const { createServer } = await import("node:http")
  let documentBody = ""
  const server = createServer((request, response) => {
    if (request.method === "GET" && request.url === "/client.json") {
      response.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" }).end(documentBody)
    } else {
      response.writeHead(404, { "content-type": "text/plain" }).end("Not Found")
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const client: TestClient = {
    clientId: `http://127.0.0.1:${port}/client.json`,
    redirectUri: `http://127.0.0.1:${LOOPBACK_PORT}/callback`,
  }
  const document: Wire.ClientIdMetadataDocument = {
    client_id: client.clientId,
    client_name: CLIENT_NAME,
    redirect_uris: [client.redirectUri],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
  }
  documentBody = JSON.stringify(document)
  try {
    return await use(client)
  } finally {
    await new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  }
}

const cimdCheck = async (walk: Walk, server: AuthorizationServerFound, findings: Array<Finding>): Promise<void> => {
  const endpoint = server.metadata?.authorization_endpoint
  const revisions = walk.revisions.filter((revision) => Revision.features(revision).clientIdMetadataDocuments)
  if (typeof endpoint !== "string" || revisions.length === 0) return
  await hostingDocument(async (client) => {
    const resource = resourceRevisions(walk).length > 0 ? resourceOf(walk) : undefined
    const { seen, problem } = await tryAuthorization(walk, endpoint, client, resource)
    findings.push(
      finding(
        walk,
        "registration.cimd",
        problem === undefined ? "pass" : "fail",
        server.issuer,
        problem === undefined
          ? `an authorization request with client_id ${client.clientId} (a document this tool hosted) answered HTTP ${seen.status}`
          : `an authorization request with client_id ${client.clientId} (a document this tool hosted) ${problem}`,
        [seen.exchange],
        revisions,
      ),
    )
  })
}

/** The registration checks, per authorization server whose metadata the walk found. */
export const stage: Stage = {
  name: "registration",
  catalog,
  run: async (walk) => {
    const findings: Array<Finding> = []
    for (const server of walk.authorizationServers.values()) {
      if (server.metadata === undefined) continue
      const endpoint = server.metadata.registration_endpoint
      const client =
        typeof endpoint === "string" ? await registrationChecks(walk, server, endpoint, findings) : undefined
      if (walk.options.clientIdMetadataDocument === true) await cimdCheck(walk, server, findings)
      if (client !== undefined) {
        await authorizationResource(walk, server, client, findings)
        await tokenResource(walk, server, client, findings)
      }
    }
    return findings
  },
}
