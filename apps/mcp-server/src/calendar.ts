/**
 * A small calendar API, protected by Keyway's resource server: the downstream API the notes server's
 * `summarize_calendar` tool calls on its user's behalf with a token obtained by token exchange (RFC 8693). It is a
 * resource of its own at the authorization server (`calendar:read`), so a token for the notes server is never
 * accepted here: the notes server has to exchange it.
 *
 * @module
 */
import { listen } from "@keyway/http/node"
import { createProtectedResource, jwt } from "@keyway/resource-server"

/** The calendar's scope, with the description an authorization server shows for it. */
export const CALENDAR_SCOPES = { "calendar:read": "Read your calendar" } as const

/** One event of a calendar. */
export interface CalendarEvent {
  /** The day, `YYYY-MM-DD`. */
  readonly day: string
  /** Start and end, `HH:MM`. */
  readonly start: string
  readonly end: string
  readonly title: string
}

/** Configuration of {@link startCalendarService}. */
export interface CalendarServiceConfig {
  /** Issuer URL of the authorization server whose tokens the calendar accepts. */
  readonly authorizationServer: string
  /** Default "127.0.0.1". */
  readonly host?: string
  /** 0 (the default) picks a free port. */
  readonly port?: number
  /**
   * The clients trusted to call the calendar for a user with a token obtained by token exchange (its `act.sub`, RFC
   * 8693 §4.1), directly (a chain of one); none by default, so a delegated token is refused.
   */
  readonly actors?: ReadonlyArray<string>
  /** Every subject's (`sub`) events; a subject not listed has none. */
  readonly events?: Readonly<Record<string, ReadonlyArray<CalendarEvent>>>
  /** Readable one-line events; none by default. */
  readonly log?: (line: string) => void
}

/** A started calendar service. */
export interface RunningCalendarService {
  /** The calendar API (`GET <url>`, `GET <url>?day=YYYY-MM-DD`), which is also its resource identifier. */
  readonly url: string
  readonly close: () => Promise<void>
}

const DAY = /^\d{4}-\d{2}-\d{2}$/u

/**
 * Starts the calendar on loopback. `GET <url>` answers `{ subject, events }` with the caller's (`sub`) events, sorted,
 * those of one day with `?day=YYYY-MM-DD`; every request needs `calendar:read`. The protected resource metadata
 * (RFC 9728) is served at `/.well-known/oauth-protected-resource/calendar`.
 */
export const startCalendarService = async (config: CalendarServiceConfig): Promise<RunningCalendarService> => {
  const log = config.log ?? (() => {})
  const path = "/calendar"
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  let url = ""
  const server = await listen((request) => handler(request), {
    host: config.host ?? "127.0.0.1",
    port: config.port ?? 0,
    publicUrl: () => url,
  })
  url = `${server.url}${path}`
  let guard: ReturnType<typeof createProtectedResource>
  try {
    guard = createProtectedResource({
      resource: url,
      authorizationServers: [config.authorizationServer],
      verifier: jwt(),
      scopesSupported: Object.keys(CALENDAR_SCOPES),
      requiredScopes: ["calendar:read"],
      resourceName: "Keyway calendar",
      ...(config.actors === undefined || config.actors.length === 0
        ? {}
        : { delegation: { actors: config.actors, maxChain: 1 } }),
    })
  } catch (error) {
    await server.close()
    throw error
  }
  const events = config.events ?? {}
  const answer = guard.protect(async (request, auth) => {
    const subject = auth.token.subject ?? ""
    const day = new URL(request.url).searchParams.get("day")
    if (day !== null && !DAY.test(day)) {
      return Response.json(
        { error: "invalid_request", error_description: "day must be a date, YYYY-MM-DD" },
        { status: 400 },
      )
    }
    const chosen = (events[subject] ?? [])
      .filter((event) => day === null || event.day === day)
      .toSorted((a, b) => `${a.day} ${a.start}`.localeCompare(`${b.day} ${b.start}`))
    const actor = auth.token.actors?.[0]?.sub
    log(
      `${chosen.length} event(s) of ${JSON.stringify(subject)} read${actor === undefined ? "" : ` by ${JSON.stringify(actor)}, acting for them`}`,
    )
    return Response.json({ subject, ...(day === null ? {} : { day }), events: chosen })
  })
  const served = new Set([path, ...guard.metadataPaths])
  handler = async (request) => {
    const requestPath = new URL(request.url).pathname
    if (!served.has(requestPath)) return Response.json({ error: "not_found" }, { status: 404 })
    if (requestPath === path && request.method !== "GET" && request.method !== "OPTIONS") {
      return Response.json({ error: "method_not_allowed" }, { status: 405, headers: { allow: "GET, OPTIONS" } })
    }
    const response = await answer(request)
    const challenge = response.headers.get("www-authenticate")
    const error = challenge === null ? "" : (/error="([^"]*)"/u.exec(challenge)?.[1] ?? "no token")
    log(`${request.method} ${requestPath} ${response.status}${error === "" ? "" : ` (${error})`}`)
    return response
  }
  log(`listening on ${url}, authorization server ${config.authorizationServer}`)
  let closing: Promise<void> | undefined
  return {
    url,
    close: () => {
      closing ??= (async () => {
        await server.close()
        await guard.close()
      })()
      return closing
    },
  }
}
