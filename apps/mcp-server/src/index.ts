/**
 * The Keyway notes MCP server, as a library: `startMcpServer` runs it, `NOTE_SCOPES` names its scopes;
 * `startCalendarService` runs the calendar API its `summarize_calendar` tool calls on the user's behalf.
 *
 * @module
 */
export {
  CALENDAR_SCOPES,
  type CalendarEvent,
  type CalendarServiceConfig,
  type RunningCalendarService,
  startCalendarService,
} from "./calendar.js"
export type { ConnectionsConfig } from "./connected.js"
export { NOTES_LIMITS, type Note, NoteRefused, Notes, type NotesLimits } from "./notes.js"
export { type McpServerConfig, NOTE_SCOPES, type RunningMcpServer, startMcpServer, TOOL_SCOPES } from "./server.js"
