/**
 * `--serve`: the demo stack without the client, kept running until the signal aborts; the doctor's verdict on it
 * (stderr), then one JSON line on stdout that says where everything is and how to sign in.
 *
 * @module
 */
import { diagnose, verdictWords } from "@keyway/doctor"
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

/**
 * Runs the doctor on a running stack, the demo user's login included, and returns its verdict, one line per MCP
 * revision (`2025-11-25: works`); a diagnosis that cannot run says why instead.
 */
export const doctorVerdict = async (stack: Stack): Promise<ReadonlyArray<string>> => {
  const [user] = stack.users
  try {
    const diagnosis = await diagnose(stack.mcpUrl, {
      ...(user === undefined
        ? {}
        : { login: { kind: "test-user" as const, username: user.username, password: user.password } }),
    })
    return diagnosis.revisions.map((revision) => `${revision}: ${verdictWords(diagnosis, revision)[1]}`)
  } catch (error) {
    return [`could not run: ${error instanceof Error ? error.message : String(error)}`]
  }
}

/** Options of {@link runServe}. */
export interface ServeOptions {
  /** Gets exactly one line: the JSON announcement. */
  readonly out: Write
  /** The servers' log lines, and the doctor's verdict. */
  readonly err: Write
  /** Run the doctor on the stack before announcing it (true by default). */
  readonly doctor?: boolean
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
    if (!options.signal.aborted && options.doctor !== false) {
      // The doctor checks the stack as MCP clients of every revision would meet it, before anyone is told it is ready.
      for (const line of await doctorVerdict(stack)) options.err(`Doctor: ${line}\n`)
    }
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
