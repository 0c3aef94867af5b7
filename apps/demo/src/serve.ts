/**
 * `--serve`: the demo stack without the client, kept running until the signal aborts; one JSON line on stdout says
 * where everything is and how to sign in.
 *
 * @module
 */
import { type Stack, startStack } from "./stack.js"
import type { Write } from "./transcript.js"

/** The line `--serve` prints once the servers are ready. */
export interface ServeAnnouncement {
  readonly authorizationServer: string
  readonly mcpServer: string
  readonly users: ReadonlyArray<{ readonly username: string; readonly password: string }>
  readonly clients: ReadonlyArray<{
    readonly client_id: string
    readonly client_secret?: string
    readonly redirect_uris: ReadonlyArray<string>
  }>
}

/** Options of {@link runServe}. */
export interface ServeOptions {
  /** Gets exactly one line: the JSON announcement. */
  readonly out: Write
  /** The servers' log lines. */
  readonly err: Write
  readonly asPort?: number
  readonly mcpPort?: number
  /** Aborting stops the servers. */
  readonly signal: AbortSignal
}

/** The announcement of a running stack. */
export const announcement = (stack: Stack): ServeAnnouncement => ({
  authorizationServer: stack.issuer,
  mcpServer: stack.mcpUrl,
  users: stack.users.map(({ username, password }) => ({ username, password })),
  clients: stack.clients.map(({ client_id, client_secret, redirect_uris }) => ({
    client_id,
    ...(client_secret === undefined ? {} : { client_secret }),
    redirect_uris: [...redirect_uris],
  })),
})

/** Starts the stack, announces it, waits for the abort, stops it. */
export const runServe = async (options: ServeOptions): Promise<void> => {
  const stack = await startStack({
    ...(options.asPort === undefined ? {} : { asPort: options.asPort }),
    ...(options.mcpPort === undefined ? {} : { mcpPort: options.mcpPort }),
    log: (source, line) => options.err(`${new Date().toISOString()} [${source}] ${line}\n`),
  })
  try {
    if (!options.signal.aborted) {
      options.err(
        `Serving. Authorization server ${stack.issuer}, MCP server ${stack.mcpUrl}. Stop with Ctrl-C (SIGINT) or SIGTERM.\n`,
      )
      // Last: whoever reads the line may rely on everything being ready.
      options.out(`${JSON.stringify(announcement(stack))}\n`)
      await new Promise<void>((resolve) => options.signal.addEventListener("abort", () => resolve(), { once: true }))
    }
  } finally {
    await stack.close()
  }
}
