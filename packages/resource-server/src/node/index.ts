/**
 * The protected MCP server side of MCP authorization on Node.js: everything the main entry has (which runs on any
 * runtime with Web-standard APIs), plus the node:http server and listener. Only this entry loads `node:*` modules.
 *
 * @packageDocumentation
 */

export * from "../index.js"
/** Web handlers on `node:http`. */
export * as Node from "./Node.js"
export { createNodeServer, toNodeListener } from "./Node.js"
export {
  type NodeAuthenticated,
  type ProtectedNodeHandler,
  type ProtectNodeOptions,
  protectNode,
} from "./Protect.js"
