/**
 * The protected resource on node:http, through Keyway's one bridge between node:http and Web-standard handlers
 * (`@keyway/http/node`): bad Host headers and request-targets get 400, methods no handler can serve 405 with
 * `Allow`, bodies over the limit 413, a failing handler 500 without detail, and with `publicUrl` set no request URL
 * is built from the Host header.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch: Request}
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-3.2 | RFC 9112 §3.2 (Host)}
 * @module
 */
export {
  type BridgeOptions,
  createNodeServer,
  type Handler,
  type ListenOptions,
  listen,
  type MarkedNodeHandler,
  type NodeHandler,
  nodeHandler,
  type RunningServer,
  type ServerOptions,
  toNodeListener,
  type WebHandler,
  writeResponse,
} from "@keyway/http/node"
