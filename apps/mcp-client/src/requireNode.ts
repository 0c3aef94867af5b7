/**
 * Imported first by `main.ts`: modules run in the order they are imported, so on a Node.js older than the project
 * needs, this prints what to run instead and exits with code 1 before any module that needs a newer Node runs.
 *
 * @module
 */
import { requireSupportedNode } from "@keyway/node-version"

requireSupportedNode("keyway-mcp", "apps/mcp-client/dist/main.js")
