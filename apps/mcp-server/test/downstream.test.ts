import { Grant } from "@keyway/core"
import { freePort } from "@keyway/testing"
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { afterEach, describe, expect, it } from "vitest"
import { CALENDAR_SCOPES, type CalendarEvent, NOTE_SCOPES, startCalendarService } from "../src/index.js"
import { OTHER_USER, obtainToken, type Stack, startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const CLIENT_ID = "notes-server"
const SECRET = "-notes-server-secret-0123456789abcdefghij"

const EVENTS: ReadonlyArray<CalendarEvent> = [
  { day: "2026-05-05", start: "14:00", end: "15:00", title: "Design review" },
  { day: "2026-05-04", start: "09:30", end: "09:45", title: "Standup" },
]

/**
 * The authorization server with token exchange on (the notes server may exchange notes:read for calendar:read), the
 * calendar trusting `actors`, and the notes server configured to read it (or not, with `calendar: false`).
 */
const downstreamStack = async (
  options: { readonly calendar?: boolean; readonly actors?: ReadonlyArray<string> } = {},
): Promise<{ readonly stack: Stack; readonly calendarLog: ReadonlyArray<string> }> => {
  const port = await freePort()
  const calendarUrl = `http://127.0.0.1:${port}/calendar`
  const stack = await startStack(
    ({ resource, other }) => ({
      resources: [
        { uri: resource, name: "Keyway notes", scopes: NOTE_SCOPES },
        { uri: other, name: "Another server", scopes: NOTE_SCOPES },
        { uri: calendarUrl, name: "Keyway calendar", scopes: CALENDAR_SCOPES },
      ],
      clients: [
        {
          clientId: CLIENT_ID,
          clientSecret: SECRET,
          redirectUris: [],
          grantTypes: [Grant.TOKEN_EXCHANGE],
        },
      ],
      extensions: {
        tokenExchange: {
          clients: {
            [CLIENT_ID]: {
              exchanges: [{ from: resource, to: calendarUrl, scopes: { "calendar:read": "notes:read" } }],
            },
          },
        },
      },
    }),
    options.calendar === false ? {} : { calendar: { url: calendarUrl, clientId: CLIENT_ID, clientSecret: SECRET } },
  )
  cleanups.push(stack.close)
  const calendarLog: Array<string> = []
  const calendar = await startCalendarService({
    authorizationServer: stack.as.issuer,
    port,
    actors: options.actors ?? [CLIENT_ID],
    events: { alice: EVENTS },
    log: (line) => calendarLog.push(line),
  })
  cleanups.push(calendar.close)
  return { stack, calendarLog }
}

const connect = async (url: string, token: string): Promise<Client> => {
  const client = new Client({ name: "test-client", version: "1.0.0" })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  )
  cleanups.push(() => client.close())
  return client
}

const text = (result: unknown): string =>
  (result as { content: ReadonlyArray<{ text?: string }> }).content.map((c) => c.text ?? "").join("\n")

describe("summarize_calendar", () => {
  it("is offered only when the calendar is configured", async () => {
    const without = await downstreamStack({ calendar: false })
    const plain = await connect(
      without.stack.mcp.url,
      await obtainToken(without.stack.as.issuer, without.stack.mcp.url, "notes:read"),
    )
    expect((await plain.listTools()).tools.map((t) => t.name)).toEqual([
      "list_notes",
      "read_note",
      "write_note",
      "delete_note",
    ])
    const { stack } = await downstreamStack()
    const client = await connect(stack.mcp.url, await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read"))
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual([
      "list_notes",
      "read_note",
      "write_note",
      "delete_note",
      "summarize_calendar",
    ])
  })

  it("reads the user's calendar with a token exchanged for it, the notes server acting for the user", async () => {
    const { stack, calendarLog } = await downstreamStack()
    const client = await connect(stack.mcp.url, await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read"))
    const all = await client.callTool({ name: "summarize_calendar", arguments: {} })
    expect(all.isError).toBeFalsy()
    expect(text(all)).toBe("2 events:\n2026-05-04 09:30–09:45 Standup\n2026-05-05 14:00–15:00 Design review")
    const one = await client.callTool({ name: "summarize_calendar", arguments: { day: "2026-05-05" } })
    expect(text(one)).toBe("1 event on 2026-05-05:\n2026-05-05 14:00–15:00 Design review")
    expect(text(await client.callTool({ name: "summarize_calendar", arguments: { day: "2026-05-06" } }))).toBe(
      "No events on 2026-05-06.",
    )
    expect(calendarLog).toContain('2 event(s) of "alice" read by "notes-server", acting for them')
    expect(stack.mcpLog).toContain('calendar read for "alice": 2 event(s)')

    const bob = await connect(
      stack.mcp.url,
      await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read", OTHER_USER),
    )
    expect(text(await bob.callTool({ name: "summarize_calendar", arguments: {} }))).toBe("No events.")
    expect(calendarLog).toContain('0 event(s) of "bob" read by "notes-server", acting for them')
  })

  it("answers a tool error when the calendar does not accept the notes server as an actor", async () => {
    const { stack, calendarLog } = await downstreamStack({ actors: ["-someone-else"] })
    const client = await connect(stack.mcp.url, await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read"))
    const refused = await client.callTool({ name: "summarize_calendar", arguments: {} })
    expect(refused.isError).toBe(true)
    expect(text(refused)).toBe("The calendar answered 401.")
    expect(calendarLog).toContain("GET /calendar 401 (invalid_token)")
  })

  it("refuses a day that is not YYYY-MM-DD before anything is exchanged", async () => {
    const { stack, calendarLog } = await downstreamStack()
    const client = await connect(stack.mcp.url, await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read"))
    const refused = await client.callTool({ name: "summarize_calendar", arguments: { day: "-1" } })
    expect(refused.isError).toBe(true)
    expect(text(refused)).toBe(
      "Input validation error: Invalid arguments for tool summarize_calendar: day: a day is YYYY-MM-DD",
    )
    expect(calendarLog.filter((line) => line.startsWith("GET"))).toEqual([])
  })
})
