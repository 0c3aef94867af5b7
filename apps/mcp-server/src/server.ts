/**
 * The notes MCP server: the official MCP SDK v2 server (`createMcpHandler`), protected by Keyway's resource server
 * with JWT access tokens from the authorization server (JWKS from its metadata, issuer and audience checked).
 *
 * @module
 */
import type { AddressInfo } from "node:net"
import { SecureUrl } from "@keyway/core"
import { createTokenExchange } from "@keyway/ext-token-exchange/resource-server"
import { Metrics } from "@keyway/http"
import { listen, type RunningServer } from "@keyway/http/node"
import { authenticatedOf, callerOf, protectMcp } from "@keyway/mcp-sdk-server"
import { createNodeServer, createProtectedResource, jwt, type Presentation } from "@keyway/resource-server/node"
import { type AuthInfo, createMcpHandler, McpServer } from "@modelcontextprotocol/server"
import { z } from "zod"
import type { CalendarEvent } from "./calendar.js"
import { type ConnectionsConfig, type NotesConnections, startConnections } from "./connected.js"
import { type Note, Notes } from "./notes.js"
import { authenticationOutcome, healthAnswer, ResourceMetrics, readiness } from "./operations.js"

/** The scopes of the notes server, with the descriptions an authorization server shows on its consent page. */
export const NOTE_SCOPES = {
  "notes:read": "Read your notes",
  "notes:write": "Create, change and delete your notes",
} as const

/** The scopes each tool needs on top of `notes:read`, which every request needs. */
export const TOOL_SCOPES: Readonly<Record<string, ReadonlyArray<keyof typeof NOTE_SCOPES>>> = {
  write_note: ["notes:write"],
  delete_note: ["notes:write"],
}

/**
 * The calendar `summarize_calendar` reads for the user, and the notes server's own client at the authorization
 * server, with which it exchanges the user's token for one for the calendar (RFC 8693 §2.1).
 */
export interface CalendarAccess {
  /** The calendar API, which is also its resource identifier (the `resource` of the exchange). */
  readonly url: string
  /** The notes server's client at the authorization server: a confidential client allowed the token exchange grant. */
  readonly clientId: string
  readonly clientSecret: string
  /** What the exchange and the calendar calls go through; the global `fetch` by default. */
  readonly fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>
}

/** Configuration of {@link startMcpServer}. */
export interface McpServerConfig {
  /** Issuer URL of the authorization server; its metadata gives the `jwks_uri`. */
  readonly authorizationServer: string
  /** Default "127.0.0.1". */
  readonly host?: string
  /** Default 9100; 0 picks a free port. */
  readonly port?: number
  /** Default "/mcp". */
  readonly path?: string
  /**
   * The MCP endpoint as clients reach it (the protected resource identifier, e.g. behind a TLS proxy); by default
   * `http://host:port/path`. Request URLs are built from it, never from a caller's Host header.
   */
  readonly publicUrl?: string
  /** Readable one-line events; stderr with the time by default. */
  readonly log?: (line: string) => void
  /** Prometheus metrics on a listener of their own (`GET /metrics`); off by default, never on the MCP port. */
  readonly metrics?: { readonly port: number; readonly host?: string }
  /** Presentation schemes beside Bearer (DPoP); none by default. */
  readonly presentationSchemes?: ReadonlyArray<Presentation.PresentationScheme>
  /** The calendar `summarize_calendar` reads for the user; without it the tool is not offered. */
  readonly calendar?: CalendarAccess
  /**
   * Connected accounts at third-party providers (URL-mode elicitation, `@keyway/connections`): the connect pages at
   * `/connect/<provider>` on this server's origin, and `list_code_repositories` when `codeHost` names a provider.
   */
  readonly connections?: ConnectionsConfig
}

/** A started MCP server. */
export interface RunningMcpServer {
  /** The MCP endpoint, which is also the protected resource identifier (the tokens' audience). */
  readonly url: string
  readonly port: number
  /** The metrics listener's URL (`http://host:port/metrics`), when `metrics` is configured. */
  readonly metricsUrl?: string
  readonly close: () => Promise<void>
}

const defaultLog = (line: string) => {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`)
}

const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] })
const failure = (value: string) => ({ content: [{ type: "text" as const, text: value }], isError: true })
const show = (note: Note) => `#${note.id} ${note.title}\n${note.text}`

/** The calendar's events as a short text, one line each. */
const summarize = (events: ReadonlyArray<CalendarEvent>, day: string | undefined): string => {
  const on = day === undefined ? "" : ` on ${day}`
  if (events.length === 0) return `No events${on}.`
  const lines = events.map((e) => `${e.day} ${e.start}–${e.end} ${e.title}`)
  return `${events.length} ${events.length === 1 ? "event" : "events"}${on}:\n${lines.join("\n")}`
}

/** How a tool reads the calendar for the caller of the request it answers. */
type CalendarReader = (
  ctx: { readonly http?: { readonly authInfo?: AuthInfo } },
  day: string | undefined,
) => Promise<ReturnType<typeof text>>

/**
 * The calendar reader of the `calendar` configuration: the caller's token is exchanged for one for the calendar (the
 * notes server never passes it on), with which the calendar is called.
 */
const calendarReader = (calendar: CalendarAccess, log: (line: string) => void): CalendarReader => {
  const exchange = createTokenExchange({
    clientId: calendar.clientId,
    clientSecret: calendar.clientSecret,
    ...(calendar.fetch === undefined ? {} : { fetch: calendar.fetch }),
  })
  return async (ctx, day) => {
    const auth = authenticatedOf(ctx)
    if (auth === undefined) return failure("The calendar is read for a signed-in user only.")
    const url = new URL(calendar.url)
    if (day !== undefined) url.searchParams.set("day", day)
    try {
      const calendarFetch = exchange.onBehalfOf(auth, { resource: calendar.url, scope: "calendar:read" })
      const response = await calendarFetch(url)
      if (!response.ok) {
        await response.body?.cancel()
        return failure(`The calendar answered ${response.status}.`)
      }
      const { events } = (await response.json()) as { events: ReadonlyArray<CalendarEvent> }
      log(`calendar read for ${JSON.stringify(auth.token.subject ?? "")}: ${events.length} event(s)`)
      return text(summarize(events, day))
    } catch (error) {
      return failure(`The calendar could not be read: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
}

/** The MCP server instance of one request: four tools over the caller's notebook, and the calendar when configured. */
const notesServer = (
  notes: Notes,
  log: (line: string) => void,
  readCalendar: CalendarReader | undefined,
  connected: NotesConnections | undefined,
) => {
  const server = new McpServer({ name: "keyway-notes", version: "1.0.0" })
  const subjectOf = (ctx: Parameters<typeof callerOf>[0]): string => callerOf(ctx)?.subject ?? "anonymous"
  server.registerTool(
    "list_notes",
    { description: "List your notes (needs notes:read)", annotations: { readOnlyHint: true } },
    async (ctx) => {
      const list = notes.list(subjectOf(ctx))
      return text(list.length === 0 ? "No notes yet." : list.map((n) => `#${n.id} ${n.title}`).join("\n"))
    },
  )
  server.registerTool(
    "read_note",
    {
      description: "Read one of your notes (needs notes:read)",
      inputSchema: z.object({ id: z.string().describe("The note's ID, as list_notes shows it") }),
      annotations: { readOnlyHint: true },
    },
    async ({ id }, ctx) => {
      const note = notes.read(subjectOf(ctx), id)
      return note === undefined ? failure(`No note #${id}.`) : text(show(note))
    },
  )
  server.registerTool(
    "write_note",
    {
      description: "Create a note, or replace one by its ID (needs notes:write)",
      inputSchema: z.object({
        title: z.string().min(1).describe("The note's title"),
        text: z.string().describe("The note's text"),
        id: z.string().optional().describe("The ID of a note to replace"),
      }),
    },
    async ({ title, text: body, id }, ctx) => {
      const subject = subjectOf(ctx)
      const note = notes.write(subject, { title, text: body, ...(id === undefined ? {} : { id }) })
      log(`note #${note.id} written by ${JSON.stringify(subject)}`)
      return text(`Saved note #${note.id}.`)
    },
  )
  server.registerTool(
    "delete_note",
    {
      description: "Delete one of your notes (needs notes:write)",
      inputSchema: z.object({ id: z.string().describe("The note's ID") }),
      annotations: { destructiveHint: true },
    },
    async ({ id }, ctx) => {
      const subject = subjectOf(ctx)
      if (!notes.delete(subject, id)) return failure(`No note #${id}.`)
      log(`note #${id} deleted by ${JSON.stringify(subject)}`)
      return text(`Deleted note #${id}.`)
    },
  )
  if (readCalendar !== undefined) {
    server.registerTool(
      "summarize_calendar",
      {
        description: "Summarize your calendar, or one day of it (needs notes:read; the notes server reads it for you)",
        inputSchema: z.object({
          day: z
            .string()
            .regex(/^\d{4}-\d{2}-\d{2}$/u, "a day is YYYY-MM-DD")
            .optional()
            .describe("One day, YYYY-MM-DD; every event when absent"),
        }),
        annotations: { readOnlyHint: true, openWorldHint: true },
      },
      async ({ day }, ctx) => readCalendar(ctx, day),
    )
  }
  connected?.register(server)
  return server
}

const urlHost = (host: string): string => (host.includes(":") && !host.startsWith("[") ? `[${host}]` : host)

/**
 * The warning for a public URL on a loopback host (this machine) that names another port than the one the server
 * listens on: a client that uses it reaches another server or none, and the `resource` of the metadata is not the URL
 * the client used, a common cause of a client failing. Undefined when there is nothing to warn about.
 */
const publicUrlWarning = (publicUrl: string, port: number): string | undefined => {
  const url = URL.parse(publicUrl)
  if (url === null || !SecureUrl.isLoopbackHost(url.hostname)) return undefined
  const named = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
  if (named === port) return undefined
  return (
    `warning: the public URL ${publicUrl} names port ${named} of this machine, but the server listens on port ${port}: ` +
    `clients that use it reach another server or none (unless a proxy on port ${named} forwards to this one), and ` +
    "the resource in the protected resource metadata is not the URL they used"
  )
}

/**
 * Starts the notes server. Every request needs `notes:read`; `write_note` and `delete_note` need `notes:write` too,
 * so a client holding a read-only token gets `403 insufficient_scope` naming `notes:read notes:write` (step-up).
 * The protected resource metadata (RFC 9728) is served at `/.well-known/oauth-protected-resource<path>`.
 */
export const startMcpServer = async (config: McpServerConfig): Promise<RunningMcpServer> => {
  const log = config.log ?? defaultLog
  const host = config.host ?? "127.0.0.1"
  const path = config.path ?? "/mcp"
  if (!path.startsWith("/")) throw new Error(`path must start with "/", got ${JSON.stringify(path)}`)
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  let url = config.publicUrl ?? `http://${urlHost(host)}${path}`
  let metadataPaths: ReadonlySet<string> = new Set()
  const http = createNodeServer((request) => handler(request), {
    publicUrl: () => url,
    // For TRACE and the like: what the MCP endpoint (Streamable HTTP) and the metadata serve.
    allow: (pathname) =>
      pathname === path
        ? "GET, POST, DELETE, OPTIONS"
        : metadataPaths.has(pathname)
          ? "GET, HEAD, OPTIONS"
          : pathname === "/health/live" || pathname === "/health/ready"
            ? "GET, HEAD"
            : config.connections !== undefined && pathname.startsWith("/connect/")
              ? "GET, POST"
              : undefined,
  })
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject)
    http.listen(config.port ?? 9100, host, () => {
      http.off("error", reject)
      resolve()
    })
  })
  const port = (http.address() as AddressInfo).port
  url = config.publicUrl ?? `http://${urlHost(host)}:${port}${path}`
  const closeHttp = () =>
    new Promise<void>((resolve) => {
      http.close(() => resolve())
      http.closeAllConnections()
    })
  let guard: ReturnType<typeof createProtectedResource>
  try {
    guard = createProtectedResource({
      resource: url,
      authorizationServers: [config.authorizationServer],
      // No jwksUri: the verifier reads jwks_uri from the authorization server's metadata (and checks its issuer).
      verifier: jwt(),
      scopesSupported: Object.keys(NOTE_SCOPES),
      requiredScopes: ["notes:read"],
      toolScopes: TOOL_SCOPES,
      resourceName: "Keyway notes",
      ...(config.presentationSchemes === undefined ? {} : { presentationSchemes: config.presentationSchemes }),
    })
  } catch (e) {
    await closeHttp()
    throw e
  }
  const notes = new Notes()
  const readCalendar = config.calendar === undefined ? undefined : calendarReader(config.calendar, log)
  let connected: NotesConnections | undefined
  if (config.connections !== undefined) {
    try {
      connected = await startConnections(config.connections, new URL(url).origin, log)
    } catch (e) {
      await closeHttp()
      await guard.close()
      throw e
    }
  }
  const mcp = createMcpHandler(() => notesServer(notes, log, readCalendar, connected))
  const protectedHandler = protectMcp(guard, mcp)
  metadataPaths = new Set(guard.metadataPaths)
  const served = new Set([path, ...guard.metadataPaths])
  const metrics = config.metrics === undefined ? undefined : new ResourceMetrics()
  let metricsListener: RunningServer | undefined
  if (config.metrics !== undefined && metrics !== undefined) {
    try {
      metricsListener = await listen(Metrics.handler(metrics.text), {
        host: config.metrics.host ?? "127.0.0.1",
        port: config.metrics.port,
        allow: Metrics.allow,
      })
    } catch (e) {
      await closeHttp()
      await mcp.close()
      await guard.close()
      await connected?.close()
      throw e
    }
  }
  const ready = readiness(config.authorizationServer)
  handler = async (request) => {
    const started = performance.now()
    const reqPath = new URL(request.url).pathname
    // Health checks are answered before the log, which they would flood.
    const health = healthAnswer(request, reqPath, ready)
    if (health !== undefined) return await health
    // Only the MCP endpoint and the metadata exist; anything else is not a protected resource of this server.
    const response = served.has(reqPath)
      ? await protectedHandler(request)
      : ((await connected?.connections.handle(request)) ?? Response.json({ error: "not_found" }, { status: 404 }))
    const challenge = response.headers.get("www-authenticate")
    const error = challenge === null ? "" : (/error="([^"]*)"/.exec(challenge)?.[1] ?? "no token")
    log(`${request.method} ${reqPath} ${response.status}${error === "" ? "" : ` (${error})`}`)
    metrics?.request(
      reqPath === path ? "mcp" : metadataPaths.has(reqPath) ? "metadata" : "other",
      response.status,
      (performance.now() - started) / 1000,
      reqPath === path && request.method !== "OPTIONS" ? authenticationOutcome(response.status, challenge) : undefined,
    )
    return response
  }
  log(
    `listening on http://${urlHost(host)}:${port}, public URL ${url}, authorization server ${config.authorizationServer}`,
  )
  const warning = publicUrlWarning(url, port)
  if (warning !== undefined) log(warning)
  if (metricsListener !== undefined) log(`metrics on ${metricsListener.url}/metrics`)
  let closing: Promise<void> | undefined
  return {
    url,
    port,
    ...(metricsListener === undefined ? {} : { metricsUrl: `${metricsListener.url}/metrics` }),
    close: () => {
      closing ??= (async () => {
        await closeHttp()
        await metricsListener?.close()
        await mcp.close()
        await guard.close()
        await connected?.close()
        log("stopped")
      })()
      return closing
    },
  }
}
