/**
 * The resource stage: what a client meets first. The unauthenticated request to the MCP server and its 401
 * challenge, the protected resource metadata (at the challenge's URL and at the well-known locations), CORS for
 * browser-based clients, the transport and the server's clock. It fills `walk.unauthenticated`,
 * `walk.resourceMetadata` and the issuers of `walk.authorizationServers`, and stops the walk when the MCP server
 * cannot be reached.
 *
 * @module
 */
import { CanonicalUri, Challenge, Metadata, Revision, SecureUrl, WellKnown, Wire } from "@keyway/core"
import * as Result from "effect/Result"
import type { CheckEntry, Exchange, Finding, Status } from "../Finding.js"
import type { Probe, Seen } from "../Probe.js"
import type { Stage, Walk } from "../Walk.js"

const MCP_SPEC = "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization"

/** The resource stage's checks. */
export const catalog: Readonly<Record<string, CheckEntry>> = {
  "mcp.reachable": {
    title: "The MCP server answers",
    why: "Every client starts with a request to the MCP server URL; when nothing answers (connection refused, DNS failure, timeout) no client gets further, and the doctor cannot check anything else.",
    fix: "Check the URL (scheme, host, port, path) and that the server is running and reachable from where the clients run.",
    spec: `${MCP_SPEC}#authorization-flow-steps`,
  },
  "transport.https": {
    title: "The MCP server URL is https (or http on a loopback host)",
    why: "Bearer tokens travel in every request to the MCP server: over plain http on a public host anyone on the path can read and replay them. MCP requires the communication security of OAuth 2.1 §1.5; clients and authorization servers refuse http resources outside loopback development.",
    fix: "Serve the MCP server over https (TLS at the server or at a reverse proxy) and give clients the https URL.",
    spec: `${MCP_SPEC}#communication-security`,
  },
  "challenge.status": {
    title: "An unauthenticated MCP request is answered 401",
    why: "Clients start authorization only on a 401: a 200 means the server is not protected (or leaks data), a 403, 404 or redirect makes clients report an error instead of signing in.",
    fix: "Answer every MCP request without a token with 401 Unauthorized and a Bearer WWW-Authenticate challenge.",
    spec: `${MCP_SPEC}#error-handling`,
  },
  "challenge.syntax": {
    title: "The 401 carries a well-formed Bearer WWW-Authenticate challenge",
    why: "Clients parse WWW-Authenticate to find the metadata URL and the scope (RFC 6750 §3, RFC 9110 §11.6.1); a missing or malformed header, or one without a Bearer challenge, leaves them nothing to follow and most give up.",
    fix: 'Send `WWW-Authenticate: Bearer resource_metadata="<metadata URL>", scope="<scopes>"` with quoted values, each parameter once.',
    spec: "https://www.rfc-editor.org/rfc/rfc6750.html#section-3",
  },
  "challenge.resource-metadata": {
    title: "The 401 challenge names the protected resource metadata (resource_metadata)",
    why: "2025-06-18 clients find the authorization server only through `resource_metadata` in the 401 (RFC 9728 §5.1) and stop without it; from 2025-11-25 clients fall back to the well-known URIs, but the header is the first thing they look for.",
    fix: "Add `resource_metadata` with the absolute URL of the protected resource metadata to the Bearer challenge of every 401.",
    spec: `${MCP_SPEC}#protected-resource-metadata-discovery-requirements`,
  },
  "challenge.no-error-without-token": {
    title: "The 401 to a request without a token carries no error code",
    why: "RFC 6750 §3.1: a request without credentials SHOULD get no error code. Clients that see `invalid_token` believe a token they never sent was refused and may discard stored tokens or try a refresh instead of signing in.",
    fix: "Leave `error` and `error_description` out of the challenge when the request carried no token; use `invalid_token` only for a presented token.",
    spec: "https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1",
  },
  "challenge.scope": {
    title: "The 401 challenge names the scopes the request needs (scope)",
    why: "From 2025-11-25 clients take the challenge's `scope` first when they choose what to request; without it they request every scope in `scopes_supported` (or none), which over-asks or gets a token the server then refuses with 403.",
    fix: 'Add `scope="<space-separated scopes>"` to the 401 challenge with the scopes the request needs.',
    spec: `${MCP_SPEC}#protected-resource-metadata-discovery-requirements`,
  },
  "prm.reachable": {
    title: "The protected resource metadata is served (200)",
    why: "Clients from 2025-06-18 read the protected resource metadata (RFC 9728) to learn the authorization server; when the URL in the challenge (or, without one, both well-known URIs) does not answer 200, they cannot authorize at all.",
    fix: "Serve the protected resource metadata with 200 at the URL the challenge names and at the well-known URI of the MCP endpoint.",
    spec: "https://www.rfc-editor.org/rfc/rfc9728.html#section-3",
  },
  "prm.no-redirect": {
    title: "The protected resource metadata is served without a redirect",
    why: "A redirect to another origin serves the metadata from a server the resource does not control (RFC 9728 §3.3 binds the document to where it was asked for, §7.3 impersonation) and breaks browser-based clients without CORS on every hop; clients that follow no redirects stop at any redirect.",
    fix: "Serve the metadata document directly at the URL clients request, with no redirect (fix the path in the challenge or in the reverse proxy instead).",
    spec: "https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3",
  },
  "prm.json": {
    title: "The protected resource metadata is a valid JSON document served as application/json",
    why: "RFC 9728 §3.2 serves the metadata as an application/json object with `resource` and URL members; clients refuse a body that is not JSON or not the schema, and strict clients refuse another content type.",
    fix: "Serve the document as `content-type: application/json` with a JSON object that has `resource` and `authorization_servers` (absolute URLs).",
    spec: "https://www.rfc-editor.org/rfc/rfc9728.html#section-3.2",
  },
  "prm.resource": {
    title: "The metadata's resource is the MCP server's canonical URI",
    why: "Clients refuse metadata for another resource (RFC 9728 §3.3) and send `resource` as the token audience (RFC 8707): a different origin, port or path makes them refuse, and a trailing slash or a parent path yields tokens for a URI the server may not accept (MCP: use the canonical URI, without a trailing slash).",
    fix: "Set `resource` to exactly the URL clients connect to (scheme, host, port and path, no trailing slash).",
    spec: "https://www.rfc-editor.org/rfc/rfc9728.html#section-3.3",
  },
  "prm.authorization-servers": {
    title: "The metadata lists at least one authorization server",
    why: "MCP requires `authorization_servers` with at least one issuer: it is the only way clients from 2025-06-18 find where to sign in.",
    fix: "List the issuer URL of the authorization server in `authorization_servers`.",
    spec: `${MCP_SPEC}#authorization-server-location`,
  },
  "prm.path-location": {
    title: "The metadata is served at the path-specific well-known URI",
    why: "For an MCP server under a path (`/mcp`), clients without the challenge's URL try `/.well-known/oauth-protected-resource/mcp` first (RFC 9728 §3.1); servers sharing an origin need it to tell their documents apart.",
    fix: "Serve the metadata at `/.well-known/oauth-protected-resource` followed by the MCP endpoint's path.",
    spec: "https://www.rfc-editor.org/rfc/rfc9728.html#section-3.1",
  },
  "prm.root-location": {
    title: "The metadata is served at the root well-known URI",
    why: "Clients that try only `/.well-known/oauth-protected-resource` at the origin (older SDK versions, and every fallback after the path-specific URI) find nothing elsewhere.",
    fix: "Also serve the metadata at `/.well-known/oauth-protected-resource` at the MCP server's origin.",
    spec: `${MCP_SPEC}#protected-resource-metadata-discovery-requirements`,
  },
  "cors.mcp": {
    title: "Browser-based clients may call the MCP endpoint (CORS) and read its challenge",
    why: "A browser-based client (web inspectors, in-browser agents) sends a CORS preflight for the POST with `authorization`, `content-type` and `mcp-protocol-version`, then needs `Access-Control-Allow-Origin` and `WWW-Authenticate` in `Access-Control-Expose-Headers` to read the 401; without them the browser hides the answer and the client cannot start authorization.",
    fix: "Answer preflights (OPTIONS) with Access-Control-Allow-Origin, -Allow-Methods POST and -Allow-Headers authorization, content-type, mcp-protocol-version, and expose WWW-Authenticate on responses.",
    spec: "https://fetch.spec.whatwg.org/#http-cors-protocol",
  },
  "cors.prm": {
    title: "The protected resource metadata is readable cross-origin (CORS)",
    why: "Browser-based clients fetch the metadata from their own origin; without `Access-Control-Allow-Origin` the browser blocks the document and discovery stops.",
    fix: "Send `Access-Control-Allow-Origin: *` with the metadata document (it is public).",
    spec: "https://fetch.spec.whatwg.org/#http-cors-protocol",
  },
  "clock.skew": {
    title: "The MCP server's clock agrees with the local clock (Date header)",
    why: "Token lifetimes (`exp`, `iat`, `nbf`, RFC 7519 §4.1) are checked against the server's clock: a clock minutes off makes fresh tokens look expired or not yet valid, and clients loop through sign-in.",
    fix: "Synchronise the server's clock with NTP.",
    spec: "https://www.rfc-editor.org/rfc/rfc9110.html#section-6.6.1",
  },
}

/** The origin the doctor's CORS checks present, as a browser-based client on another site would. */
export const BROWSER_ORIGIN = "https://client.doctor.example"

const MAX_REDIRECTS = 5
const WARN_SKEW_SECONDS = 60
const FAIL_SKEW_SECONDS = 300

interface Outcome {
  readonly status: Status
  readonly detail: string
  readonly exchanges: ReadonlyArray<Exchange>
}

/** A GET followed through redirects (at most {@link MAX_REDIRECTS}), each hop recorded. */
interface Fetched {
  readonly requested: string
  readonly url: string
  readonly seen: Seen
  readonly hops: ReadonlyArray<{ readonly from: string; readonly to: string; readonly status: number }>
  readonly exchanges: ReadonlyArray<Exchange>
}

const follow = async (probe: Probe, url: string, init: RequestInit): Promise<Fetched> => {
  let current = url
  const hops: Array<{ from: string; to: string; status: number }> = []
  const exchanges: Array<Exchange> = []
  for (;;) {
    const seen = await probe.send(current, init)
    exchanges.push(seen.exchange)
    const location = seen.headers.get("location")
    const next = location === null ? null : URL.parse(location, current)
    if (seen.status !== undefined && seen.status >= 300 && seen.status < 400 && next !== null) {
      if (hops.length < MAX_REDIRECTS) {
        hops.push({ from: current, to: next.href, status: seen.status })
        current = next.href
        continue
      }
    }
    return { requested: url, url: current, seen, hops, exchanges }
  }
}

/** How a fetch got to its answer, when through redirects. */
const via = (f: Fetched): string => (f.hops.length === 0 ? "" : ` after a redirect to ${f.url}`)

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** How an answer reads in a detail: its status, or why none came. */
const answer = (seen: Seen): string =>
  seen.status === undefined ? `no answer (${seen.exchange.error ?? "unknown error"})` : String(seen.status)

const originOf = (url: string): string | undefined => URL.parse(url)?.origin

const mediaType = (contentType: string | null): string =>
  contentType === null ? "" : (contentType.split(";")[0] ?? "").trim().toLowerCase()

const list = (value: string | null): ReadonlyArray<string> =>
  value === null
    ? []
    : value
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s !== "")

/** Findings of one check evaluated per revision: revisions with the same status and detail share a finding. */
const perRevision = (
  check: string,
  server: string,
  revisions: ReadonlyArray<Revision.Revision>,
  evaluate: (revision: Revision.Revision) => Outcome | undefined,
): Array<Finding> => {
  const groups = new Map<
    string,
    { outcome: Outcome; revisions: Array<Revision.Revision>; exchanges: Array<Exchange> }
  >()
  for (const revision of revisions) {
    const outcome = evaluate(revision)
    if (outcome === undefined) continue
    const key = `${outcome.status}\n${outcome.detail}`
    const group = groups.get(key)
    if (group === undefined) {
      groups.set(key, { outcome, revisions: [revision], exchanges: [...outcome.exchanges] })
    } else {
      group.revisions.push(revision)
      for (const exchange of outcome.exchanges) if (!group.exchanges.includes(exchange)) group.exchanges.push(exchange)
    }
  }
  return [...groups.values()].map(({ outcome, revisions, exchanges }) => ({
    check,
    status: outcome.status,
    server,
    revisions,
    detail: outcome.detail,
    exchanges,
  }))
}

/** The JSON-RPC `initialize` request a client of `revision` sends first. */
const initialize = (revision: Revision.Revision): string =>
  JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: revision,
      capabilities: {},
      clientInfo: { name: "keyway-doctor", version: "1" },
    },
  })

/** The headers of an MCP POST; `mcp-protocol-version` exists from 2025-06-18 (2025-03-26 clients never send it). */
const mcpHeaders = (revision: Revision.Revision, extra: Record<string, string> = {}): Record<string, string> => ({
  accept: "application/json, text/event-stream",
  "content-type": "application/json",
  ...(Revision.compare(revision, "2025-06-18") >= 0 ? { "mcp-protocol-version": revision } : {}),
  ...extra,
})

/** What a resource with `resource` differs in from the server URL, for the detail of a mismatch. */
const difference = (resource: string, server: string): string => {
  const a = URL.parse(resource)
  const b = URL.parse(server)
  if (a === null || b === null) return ""
  if (a.protocol !== b.protocol) return " (another scheme)"
  if (a.hostname !== b.hostname) return " (another host)"
  if (a.port !== b.port) return " (another port)"
  if (a.pathname === `${b.pathname}/` || `${a.pathname}/` === b.pathname) return " (a trailing slash differs)"
  if (a.pathname.toLowerCase() === b.pathname.toLowerCase()) return " (the path differs in case)"
  if (b.pathname.startsWith(a.pathname.endsWith("/") ? a.pathname : `${a.pathname}/`))
    return " (a parent path of the server URL: a sub-path mount?)"
  return " (another path)"
}

const run = async (walk: Walk): Promise<ReadonlyArray<Finding>> => {
  const findings: Array<Finding> = []
  const server = walk.target
  const all = walk.revisions
  const prmRevisions = all.filter((r) => Revision.features(r).protectedResourceMetadata)
  const fallbackRevisions = prmRevisions.filter((r) => Revision.features(r).wellKnownPrmFallback)
  const scopeRevisions = all.filter((r) => Revision.features(r).scopeChallenges)
  const push = (check: string, revisions: ReadonlyArray<Revision.Revision>, outcome: Outcome) => {
    if (revisions.length === 0) return
    findings.push({ check, server, revisions, ...outcome, exchanges: [...outcome.exchanges] })
  }

  // transport.https: from the URL alone.
  const transport = SecureUrl.transportOf(server)
  const host = URL.parse(server)?.hostname ?? server
  push(
    "transport.https",
    all,
    transport === "https"
      ? { status: "pass", detail: "the MCP server URL is https", exchanges: [] }
      : transport === "http-loopback"
        ? { status: "pass", detail: `http on the loopback host ${host} (local development)`, exchanges: [] }
        : transport === "http"
          ? { status: "fail", detail: `http on the public host ${host}: tokens would travel in clear`, exchanges: [] }
          : { status: "fail", detail: `${JSON.stringify(server)} is not an http or https URL`, exchanges: [] },
  )

  // The unauthenticated request, as each revision's client sends it.
  const unauthenticated = new Map<Revision.Revision, Seen>()
  for (const revision of all) {
    const seen = await walk.probe.send(server, {
      method: "POST",
      headers: mcpHeaders(revision),
      body: initialize(revision),
    })
    if (seen.status === undefined) {
      push("mcp.reachable", all, {
        status: "fail",
        detail: `POST ${server} got no answer: ${seen.exchange.error ?? "unknown error"}`,
        exchanges: [seen.exchange],
      })
      walk.stopped = `the MCP server ${server} cannot be reached: ${seen.exchange.error ?? "unknown error"}`
      return findings
    }
    unauthenticated.set(revision, seen)
  }
  const newest = [...all].sort(Revision.compare).at(-1)
  const first = newest === undefined ? undefined : unauthenticated.get(newest)
  if (first === undefined) return findings
  walk.unauthenticated = { status: first.status, wwwAuthenticate: first.headers.get("www-authenticate") }
  push("mcp.reachable", all, {
    status: "pass",
    detail: `POST ${server} answered ${answer(first)}`,
    exchanges: [first.exchange],
  })

  // The challenge, per revision.
  const seenOf = (revision: Revision.Revision): Seen => unauthenticated.get(revision) as Seen
  findings.push(
    ...perRevision("challenge.status", server, all, (revision) => {
      const seen = seenOf(revision)
      if (seen.status === 401) return { status: "pass", detail: "answered 401", exchanges: [seen.exchange] }
      const location = seen.headers.get("location")
      return {
        status: "fail",
        detail: `answered ${seen.status} instead of 401${location === null ? "" : ` (location: ${location})`}`,
        exchanges: [seen.exchange],
      }
    }),
  )
  const bearerOf = (revision: Revision.Revision): Challenge.BearerParams | undefined => {
    const seen = seenOf(revision)
    if (seen.status !== 401) return undefined
    const parsed = Challenge.parse(seen.headers.get("www-authenticate"))
    return Result.isSuccess(parsed) ? Challenge.bearer(parsed.success) : undefined
  }
  findings.push(
    ...perRevision("challenge.syntax", server, all, (revision) => {
      const seen = seenOf(revision)
      if (seen.status !== 401) return undefined
      const header = seen.headers.get("www-authenticate")
      const exchanges = [seen.exchange]
      if (header === null) return { status: "fail", detail: "the 401 has no WWW-Authenticate header", exchanges }
      const parsed = Challenge.parse(header)
      if (Result.isFailure(parsed)) return { status: "fail", detail: parsed.failure.message, exchanges }
      if (Challenge.bearer(parsed.success) === undefined) {
        const schemes = parsed.success.map((c) => c.scheme).join(", ")
        return {
          status: "fail",
          detail: `no Bearer challenge in WWW-Authenticate (schemes: ${schemes === "" ? "none" : schemes})`,
          exchanges,
        }
      }
      return { status: "pass", detail: `WWW-Authenticate: ${header}`, exchanges }
    }),
  )
  findings.push(
    ...perRevision("challenge.resource-metadata", server, prmRevisions, (revision) => {
      const bearer = bearerOf(revision)
      if (bearer === undefined) return undefined
      const exchanges = [seenOf(revision).exchange]
      const url = bearer.resource_metadata
      if (url === undefined) {
        return Revision.features(revision).wellKnownPrmFallback
          ? {
              status: "warn",
              detail: "the Bearer challenge has no resource_metadata; clients fall back to the well-known URIs",
              exchanges,
            }
          : {
              status: "fail",
              detail:
                "the Bearer challenge has no resource_metadata; clients of this revision cannot find the metadata",
              exchanges,
            }
      }
      if (SecureUrl.transportOf(url) === "other") {
        return {
          status: "fail",
          detail: `resource_metadata ${JSON.stringify(url)} is not an absolute http(s) URL`,
          exchanges,
        }
      }
      return { status: "pass", detail: `resource_metadata="${url}"`, exchanges }
    }),
  )
  findings.push(
    ...perRevision("challenge.no-error-without-token", server, all, (revision) => {
      const bearer = bearerOf(revision)
      if (bearer === undefined) return undefined
      const exchanges = [seenOf(revision).exchange]
      if (bearer.error === undefined) return { status: "pass", detail: "no error code", exchanges }
      return {
        status: "warn",
        detail: `error="${bearer.error}" on a request that carried no token${
          bearer.error_description === undefined ? "" : ` (error_description="${bearer.error_description}")`
        }`,
        exchanges,
      }
    }),
  )
  findings.push(
    ...perRevision("challenge.scope", server, scopeRevisions, (revision) => {
      const bearer = bearerOf(revision)
      if (bearer === undefined) return undefined
      const exchanges = [seenOf(revision).exchange]
      return bearer.scope === undefined
        ? { status: "warn", detail: "the Bearer challenge has no scope", exchanges }
        : { status: "pass", detail: `scope="${bearer.scope}"`, exchanges }
    }),
  )

  // The protected resource metadata, as clients from 2025-06-18 look for it.
  const discoveryBearer = newest === undefined ? undefined : bearerOf(newest)
  if (prmRevisions.length > 0 && first.status === 401) {
    const fetched = new Map<string, Fetched>()
    const get = async (url: string): Promise<Fetched> => {
      const known = fetched.get(url)
      if (known !== undefined) return known
      const result = await follow(walk.probe, url, { headers: { accept: "application/json" } })
      fetched.set(url, result)
      return result
    }
    const answers = (f: Fetched): boolean => f.seen.status === 200 && isObject(f.seen.json)
    const wellKnown = CanonicalUri.isValid(server) ? WellKnown.protectedResourceMetadataUrls(server) : []
    const pathUrl = wellKnown.length === 2 ? wellKnown[0] : undefined
    const rootUrl = wellKnown.at(-1)
    const headerUrl = discoveryBearer?.resource_metadata
    const usableHeaderUrl =
      headerUrl !== undefined && SecureUrl.transportOf(headerUrl) !== "other" ? headerUrl : undefined

    let found: Fetched | undefined
    if (usableHeaderUrl !== undefined) {
      const f = await get(usableHeaderUrl)
      if (f.seen.status === 200) {
        found = f
        push("prm.reachable", prmRevisions, { status: "pass", detail: `${f.url} answered 200`, exchanges: f.exchanges })
      } else {
        // Clients use the challenge's URL when there is one; a document elsewhere only tells where it went wrong.
        let elsewhere: Fetched | undefined
        for (const url of wellKnown) {
          if (url === usableHeaderUrl) continue
          const other = await get(url)
          if (answers(other)) {
            elsewhere = other
            break
          }
        }
        push("prm.reachable", prmRevisions, {
          status: "fail",
          detail: `the challenge's resource_metadata ${f.url} answered ${answer(f.seen)}${
            elsewhere === undefined ? "" : `; the document is at ${elsewhere.requested}, which clients do not try`
          }`,
          exchanges: [...f.exchanges, ...(elsewhere?.exchanges ?? [])],
        })
      }
    } else if (headerUrl === undefined) {
      const tried: Array<Fetched> = []
      for (const url of wellKnown) {
        const f = await get(url)
        tried.push(f)
        if (f.seen.status === 200) {
          found = f
          break
        }
      }
      const exchanges = tried.flatMap((f) => f.exchanges)
      push(
        "prm.reachable",
        fallbackRevisions,
        found !== undefined
          ? {
              status: "pass",
              detail: `found at the ${found.requested === pathUrl ? "path-specific" : "root"} well-known URI ${found.url} (the challenge names none)`,
              exchanges,
            }
          : {
              status: "fail",
              detail: `the challenge names no resource_metadata and no well-known URI answers 200: ${tried
                .map((f) => `${f.requested} answered ${answer(f.seen)}`)
                .join(", ")}`,
              exchanges,
            },
      )
    }

    if (found !== undefined) {
      const doc = found
      const cross = doc.hops.some((h) => originOf(h.to) !== originOf(h.from))
      const hops = doc.hops.map((h) => `${h.from} answered ${h.status} to ${h.to}`).join(", ")
      push(
        "prm.no-redirect",
        prmRevisions,
        doc.hops.length === 0
          ? { status: "pass", detail: `served at ${doc.url} without a redirect`, exchanges: doc.exchanges }
          : cross
            ? { status: "fail", detail: `redirected to another origin: ${hops}`, exchanges: doc.exchanges }
            : { status: "warn", detail: `redirected on the same origin: ${hops}`, exchanges: doc.exchanges },
      )

      const json = doc.seen.json
      const contentType = doc.seen.headers.get("content-type")
      const exchanges = doc.exchanges.slice(-1)
      let document: Wire.ProtectedResourceMetadata | undefined
      if (!isObject(json)) {
        push("prm.json", prmRevisions, {
          status: "fail",
          detail: `the body is not a JSON object (content-type: ${contentType ?? "none"})`,
          exchanges,
        })
      } else {
        walk.resourceMetadata = { url: doc.url, document: json }
        const validated = Wire.validate(Wire.ProtectedResourceMetadata, json, Wire.Documents.protectedResourceMetadata)
        if (Result.isFailure(validated)) {
          push("prm.json", prmRevisions, { status: "fail", detail: validated.failure.message, exchanges })
        } else {
          document = validated.success
          push(
            "prm.json",
            prmRevisions,
            mediaType(contentType) === "application/json"
              ? { status: "pass", detail: "a valid JSON document, content-type application/json", exchanges }
              : {
                  status: "warn",
                  detail: `a valid JSON document served as ${contentType ?? "no content-type"}, not application/json`,
                  exchanges,
                },
          )
        }
      }

      if (document !== undefined) {
        const resource = document.resource
        push(
          "prm.resource",
          prmRevisions,
          CanonicalUri.equals(resource, server)
            ? { status: "pass", detail: `resource is "${resource}"`, exchanges }
            : Metadata.resourceMatches(resource, server)
              ? {
                  status: "warn",
                  detail: `resource is "${resource}" but the server URL is "${server}"${difference(resource, server)}`,
                  exchanges,
                }
              : {
                  status: "fail",
                  detail: `resource is "${resource}" but the server URL is "${server}"${difference(resource, server)}: clients refuse the metadata`,
                  exchanges,
                },
        )
        const issuers = document.authorization_servers ?? []
        push(
          "prm.authorization-servers",
          prmRevisions,
          issuers.length === 0
            ? {
                status: "fail",
                detail:
                  document.authorization_servers === undefined
                    ? "no authorization_servers member"
                    : "authorization_servers is empty",
                exchanges,
              }
            : { status: "pass", detail: `authorization_servers: ${issuers.join(", ")}`, exchanges },
        )
        for (const issuer of issuers) {
          if (!walk.authorizationServers.has(issuer)) walk.authorizationServers.set(issuer, { issuer })
        }
      }

      // The well-known locations, whatever the challenge names.
      if (pathUrl !== undefined) {
        const f = await get(pathUrl)
        const root = rootUrl === undefined ? undefined : await get(rootUrl)
        push(
          "prm.path-location",
          fallbackRevisions.length > 0 ? fallbackRevisions : prmRevisions,
          answers(f)
            ? { status: "pass", detail: `${pathUrl} answered 200${via(f)}`, exchanges: f.exchanges }
            : {
                status: "warn",
                detail: `${pathUrl} answered ${answer(f.seen)}${
                  root !== undefined && answers(root) ? "; only the root well-known URI answers" : ""
                }`,
                exchanges: f.exchanges,
              },
        )
      }
      if (rootUrl !== undefined) {
        const f = await get(rootUrl)
        push(
          "prm.root-location",
          fallbackRevisions.length > 0 ? fallbackRevisions : prmRevisions,
          answers(f)
            ? { status: "pass", detail: `${rootUrl} answered 200${via(f)}`, exchanges: f.exchanges }
            : { status: "warn", detail: `${rootUrl} answered ${answer(f.seen)}`, exchanges: f.exchanges },
        )
      }

      // cors.prm: the document as a browser on another origin fetches it.
      const cors = await walk.probe.send(doc.url, { headers: { accept: "application/json", origin: BROWSER_ORIGIN } })
      const allowOrigin = cors.headers.get("access-control-allow-origin")
      push(
        "cors.prm",
        prmRevisions,
        allowOrigin === "*" || allowOrigin === BROWSER_ORIGIN
          ? { status: "pass", detail: `access-control-allow-origin: ${allowOrigin}`, exchanges: [cors.exchange] }
          : {
              status: "warn",
              detail:
                allowOrigin === null
                  ? `GET ${doc.url} from origin ${BROWSER_ORIGIN} answered ${answer(cors)} without access-control-allow-origin`
                  : `access-control-allow-origin is "${allowOrigin}", not "*" or ${BROWSER_ORIGIN}`,
              exchanges: [cors.exchange],
            },
      )
    }
  }

  // cors.mcp: the preflight of the POST a browser-based client sends, then the 401 as that client reads it.
  const corsRevision = newest ?? Revision.default
  const requested = Object.keys(mcpHeaders(corsRevision))
    .filter((name) => name !== "accept")
    .concat("authorization")
    .sort()
  const preflight = await walk.probe.send(server, {
    method: "OPTIONS",
    headers: {
      origin: BROWSER_ORIGIN,
      "access-control-request-method": "POST",
      "access-control-request-headers": requested.join(","),
    },
  })
  const actual = await walk.probe.send(server, {
    method: "POST",
    headers: mcpHeaders(corsRevision, { origin: BROWSER_ORIGIN }),
    body: initialize(corsRevision),
  })
  const problems: Array<string> = []
  const allowed = (value: string | null) => value === "*" || value === BROWSER_ORIGIN
  if (preflight.status === undefined || preflight.status < 200 || preflight.status > 299) {
    problems.push(`the preflight (OPTIONS) answered ${answer(preflight)}`)
  } else {
    if (!allowed(preflight.headers.get("access-control-allow-origin"))) {
      problems.push("the preflight has no access-control-allow-origin for the origin")
    }
    const methods = list(preflight.headers.get("access-control-allow-methods"))
    if (methods.length > 0 && !methods.includes("post") && !methods.includes("*")) {
      problems.push(`access-control-allow-methods (${methods.join(", ")}) does not allow POST`)
    }
    const headers = list(preflight.headers.get("access-control-allow-headers"))
    // "*" covers every request header except authorization (Fetch: CORS-safelisted and wildcard rules).
    const missing = requested.filter((h) => !headers.includes(h) && !(headers.includes("*") && h !== "authorization"))
    if (missing.length > 0) problems.push(`access-control-allow-headers does not allow ${missing.join(", ")}`)
  }
  if (actual.status !== undefined) {
    if (!allowed(actual.headers.get("access-control-allow-origin"))) {
      problems.push(`the ${actual.status} answer has no access-control-allow-origin for the origin`)
    } else if (actual.status === 401) {
      const exposed = list(actual.headers.get("access-control-expose-headers"))
      if (!exposed.includes("www-authenticate") && !exposed.includes("*")) {
        problems.push("the 401 does not expose WWW-Authenticate (access-control-expose-headers)")
      }
    }
  }
  push(
    "cors.mcp",
    all,
    problems.length === 0
      ? {
          status: "pass",
          detail: `a client at ${BROWSER_ORIGIN} may POST with ${requested.join(", ")} and read the challenge`,
          exchanges: [preflight.exchange, actual.exchange],
        }
      : {
          status: "warn",
          detail: `from origin ${BROWSER_ORIGIN}: ${problems.join("; ")}`,
          exchanges: [preflight.exchange, actual.exchange],
        },
  )

  // clock.skew: the Date of the unauthenticated answer against the local clock.
  const date = first.headers.get("date")
  const dated = date === null ? Number.NaN : Date.parse(date)
  if (!Number.isNaN(dated)) {
    const now = (walk.options.now ?? Date.now)()
    const skew = Math.round((dated - now) / 1000)
    const magnitude = Math.abs(skew)
    const direction = skew > 0 ? "ahead of" : "behind"
    push(
      "clock.skew",
      all,
      magnitude <= WARN_SKEW_SECONDS
        ? {
            status: "pass",
            detail: `Date: ${date} is within ${WARN_SKEW_SECONDS} s of the local clock`,
            exchanges: [first.exchange],
          }
        : {
            status: magnitude > FAIL_SKEW_SECONDS ? "fail" : "warn",
            detail: `Date: ${date} is ${magnitude} s ${direction} the local clock`,
            exchanges: [first.exchange],
          },
    )
  }
  return findings
}

/** The resource checks. */
export const stage: Stage = { name: "resource", catalog, run }
