/**
 * The client on Node.js: `createAuthClient` with the defaults of CLIs and desktop apps (the system browser with a
 * loopback redirect listener, and the owner-only JSON file store as `store: { file }`), with everything of the
 * main entry's `AuthClient` besides.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 * @module
 */
import {
  createAuthClient as createWebAuthClient,
  type PlainAuthClient,
  type CreateOptions as WebCreateOptions,
} from "../AuthClient.js"
import { InvalidClientOptions } from "../ClientConfig.js"
import { problemOf } from "../internal/options.js"
import type { Backend } from "../TokenStore.js"
import { file } from "./TokenStore.js"
import { browser } from "./UserAgent.js"

export * from "../AuthClient.js"

/**
 * Options of {@link createAuthClient} on Node.js: the main entry's, with the file store and the system browser.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export interface CreateOptions extends Omit<WebCreateOptions, "store"> {
  /** "memory" (default), `{ file: path }` for one owner-only JSON file, or a custom {@link Backend}. */
  readonly store?: "memory" | { readonly file: string } | Backend
}

/**
 * Builds a client for any number of MCP servers, with Node.js defaults: the user agent is the system browser with
 * a loopback listener (`UserAgent.browser()`), and `store: { file }` keeps state in one owner-only JSON file. Throws
 * {@link InvalidClientOptions} when an option is one it does not take or of the wrong shape.
 *
 * @example
 * ```ts
 * import { createAuthClient } from "@keyway/client/node"
 *
 * const auth = createAuthClient({ clientName: "my-cli", store: { file: `${homedir()}/.my-cli/auth.json` } })
 * const response = await auth.fetch("https://mcp.example.com/mcp", { method: "POST", body })
 * ```
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization | MCP authorization}
 */
export const createAuthClient = (options: CreateOptions = {}): PlainAuthClient => {
  const problem = problemOf(options, "@keyway/client/node")
  if (problem !== undefined) throw new InvalidClientOptions(problem)
  const { store, userAgent, ...rest } = options
  return createWebAuthClient({
    ...rest,
    store: typeof store === "object" && "file" in store ? file(store.file) : (store ?? "memory"),
    userAgent: userAgent ?? browser(),
  })
}
