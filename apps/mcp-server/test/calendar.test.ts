import { freePort } from "@keyway/testing"
import { afterEach, describe, expect, it } from "vitest"
import { CALENDAR_SCOPES, type CalendarEvent, NOTE_SCOPES, startCalendarService } from "../src/index.js"
import { OTHER_USER, obtainToken, type Stack, startStack, USER } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const EVENTS: ReadonlyArray<CalendarEvent> = [
  { day: "2026-05-05", start: "14:00", end: "15:00", title: "Design review" },
  { day: "2026-05-04", start: "09:30", end: "09:45", title: "Standup" },
  { day: "2026-05-04", start: "08:00", end: "08:30", title: "-1 on the budget" },
]

/** The authorization server knowing the calendar as a resource, and the calendar on the port it was told. */
const calendarStack = async (): Promise<{ readonly stack: Stack; readonly url: string; readonly log: string[] }> => {
  const port = await freePort()
  const url = `http://127.0.0.1:${port}/calendar`
  const stack = await startStack(({ resource, other }) => ({
    resources: [
      { uri: resource, name: "Keyway notes", scopes: NOTE_SCOPES },
      { uri: other, name: "Another server", scopes: NOTE_SCOPES },
      { uri: url, name: "Keyway calendar", scopes: CALENDAR_SCOPES },
    ],
  }))
  cleanups.push(stack.close)
  const log: string[] = []
  const calendar = await startCalendarService({
    authorizationServer: stack.as.issuer,
    port,
    events: { [USER.username]: EVENTS },
    log: (line) => log.push(line),
  })
  cleanups.push(calendar.close)
  expect(calendar.url).toBe(url)
  return { stack, url, log }
}

const get = (url: string, token?: string) =>
  fetch(url, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })

describe("calendar service", () => {
  it("answers 401 naming calendar:read and serves its protected resource metadata", async () => {
    const { stack, url } = await calendarStack()
    const metadataUrl = `${new URL(url).origin}/.well-known/oauth-protected-resource/calendar`
    const response = await get(url)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${metadataUrl}", scope="calendar:read"`,
    )
    expect(await (await get(metadataUrl)).json()).toEqual({
      resource: url,
      authorization_servers: [stack.as.issuer],
      scopes_supported: ["calendar:read"],
      bearer_methods_supported: ["header"],
      resource_name: "Keyway calendar",
    })
    expect((await get(`${new URL(url).origin}/other`)).status).toBe(404)
  })

  it("answers the caller's events, sorted, all of them or one day's; another user has none", async () => {
    const { stack, url, log } = await calendarStack()
    const token = await obtainToken(stack.as.issuer, url, "calendar:read")
    const all = await get(url, token)
    expect(all.status).toBe(200)
    expect(await all.json()).toEqual({
      subject: "alice",
      events: [
        { day: "2026-05-04", start: "08:00", end: "08:30", title: "-1 on the budget" },
        { day: "2026-05-04", start: "09:30", end: "09:45", title: "Standup" },
        { day: "2026-05-05", start: "14:00", end: "15:00", title: "Design review" },
      ],
    })
    expect(await (await get(`${url}?day=2026-05-05`, token)).json()).toEqual({
      subject: "alice",
      day: "2026-05-05",
      events: [{ day: "2026-05-05", start: "14:00", end: "15:00", title: "Design review" }],
    })
    const bob = await obtainToken(stack.as.issuer, url, "calendar:read", OTHER_USER)
    expect(await (await get(url, bob)).json()).toEqual({ subject: "bob", events: [] })
    expect(log).toContain('3 event(s) of "alice" read')
    expect(log).toContain("GET /calendar 200")
  })

  it("refuses a day that is not YYYY-MM-DD with 400 invalid_request", async () => {
    const { stack, url } = await calendarStack()
    const token = await obtainToken(stack.as.issuer, url, "calendar:read")
    const response = await get(`${url}?day=-2026-05-04`, token)
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "invalid_request",
      error_description: "day must be a date, YYYY-MM-DD",
    })
  })

  it("refuses the notes server's token (another audience) with 401 invalid_token", async () => {
    const { stack, url } = await calendarStack()
    const notesToken = await obtainToken(stack.as.issuer, stack.mcp.url, "notes:read")
    const response = await get(url, notesToken)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${new URL(url).origin}/.well-known/oauth-protected-resource/calendar", ` +
        'scope="calendar:read", error="invalid_token", error_description="The access token was not issued for this resource"',
    )
  })

  it("answers 405 to a method the calendar does not serve", async () => {
    const { url } = await calendarStack()
    const response = await fetch(url, { method: "POST", body: "{}" })
    expect(response.status).toBe(405)
    expect(response.headers.get("allow")).toBe("GET, OPTIONS")
  })
})
