/**
 * The adapter for tool handlers of the official MCP SDK server.
 *
 * @module
 */
export {}
