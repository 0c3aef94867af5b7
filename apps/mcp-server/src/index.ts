/**
 * The Keyway notes MCP server, as a library: `startMcpServer` runs it, `NOTE_SCOPES` names its scopes.
 *
 * @module
 */
export { NOTES_LIMITS, type Note, NoteRefused, Notes, type NotesLimits } from "./notes.js"
export { type McpServerConfig, NOTE_SCOPES, type RunningMcpServer, startMcpServer, TOOL_SCOPES } from "./server.js"
