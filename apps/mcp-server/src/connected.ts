/**
 * Connected accounts for the notes server: the user's own account at a code host, connected through URL-mode
 * elicitation (`@keyway/connections`), with the connect pages on the MCP server's own origin and the tokens in an
 * encrypted vault (SQLite file, or memory), and the `list_code_repositories` tool that reads the code host's API for
 * the user.
 *
 * @module
 */
import { Connections, KeyRing, type ProviderConfig, type RunningConnections, Vault } from "@keyway/connections"
import { connectionTools } from "@keyway/connections/mcp-sdk"
import { sqliteVault } from "@keyway/connections/node"
import type { McpServer } from "@modelcontextprotocol/server"
import { Clock, Effect, Fiber } from "effect"

/** The `connections` option of the notes server. */
export interface ConnectionsConfig {
  /** The providers, by ID (a path segment of `/connect/<id>`). */
  readonly providers: Readonly<Record<string, ProviderConfig>>
  /**
   * The provider `list_code_repositories` reads (`GET repos` under its `apiBase`, answering `[{ "name" }]`); without
   * it the tool is not offered.
   */
  readonly codeHost?: string
  /** The vault's SQLite file; in memory when absent (connections are lost on restart). */
  readonly vaultPath?: string
  /**
   * The key ring, as `KEYWAY_VAULT_KEYS` spells it (`id:key,...`, current first); by default that environment
   * variable.
   */
  readonly vaultKeys?: string
  /** Seconds a connect flow stays usable (600). */
  readonly flowTtl?: number
  /** What provider calls go through; the global `fetch` by default. */
  readonly fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>
  /**
   * The Clock the connections read (flow lifetimes, token expiry, the purge); Effect's own by default. The demo gives
   * a `TestClock` to let a provider token's lifetime pass without waiting for it.
   */
  readonly clock?: Clock.Clock
}

/** The connections of a running notes server. */
export interface NotesConnections {
  readonly connections: RunningConnections
  /** Registers the tools that use a connection on one SDK server. */
  readonly register: (server: McpServer) => void
  readonly close: () => Promise<void>
}

const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] })
const failure = (value: string) => ({ content: [{ type: "text" as const, text: value }], isError: true })

/**
 * Opens the vault and the connections; the connect pages are at `<origin>/connect/<provider>`. Throws when the key
 * ring or a provider is unusable.
 */
export const startConnections = async (
  config: ConnectionsConfig,
  origin: string,
  log: (line: string) => void,
): Promise<NotesConnections> => {
  const keyRing = KeyRing.fromEnv(
    config.vaultKeys === undefined ? process.env : { KEYWAY_VAULT_KEYS: config.vaultKeys },
  )
  const vault = config.vaultPath === undefined ? undefined : await sqliteVault({ path: config.vaultPath, keyRing })
  const store = vault ?? Vault.memoryVault(keyRing)
  const { clock } = config
  const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
    Effect.runPromise(clock === undefined ? effect : Effect.provideService(effect, Clock.Clock, clock))
  let service: Connections.Connections["Service"]
  try {
    service = Connections.make(
      {
        baseUrl: origin,
        serverName: "Keyway notes",
        providers: config.providers,
        ...(config.flowTtl === undefined ? {} : { flowTtl: config.flowTtl }),
        ...(config.fetch === undefined ? {} : { fetch: config.fetch }),
      },
      store,
    )
  } catch (e) {
    await vault?.close()
    throw e
  }
  const purgeJob = Connections.purgeJob(store, 300)
  const purge = Effect.runFork(clock === undefined ? purgeJob : Effect.provideService(purgeJob, Clock.Clock, clock))
  const connections: RunningConnections = {
    ...Connections.toClient(service, run),
    close: () => Effect.runPromise(Fiber.interrupt(purge)).then(() => undefined),
  }
  connections.onComplete((_id, user, provider) => log(`connected ${JSON.stringify(user.subject)} at ${provider}`))
  const codeHost = config.codeHost
  const register = (server: McpServer) => {
    if (codeHost === undefined) return
    const { withConnection } = connectionTools(connections, { server })
    const name = config.providers[codeHost]?.name ?? codeHost
    server.registerTool(
      "list_code_repositories",
      {
        description: `List your repositories at ${name} (needs notes:read; connects your ${name} account the first time)`,
        annotations: { readOnlyHint: true, openWorldHint: true },
      },
      withConnection(codeHost, async (fetch) => {
        const response = await fetch("repos")
        if (!response.ok) {
          await response.body?.cancel()
          return failure(`${name} answered ${response.status}.`)
        }
        const repositories = (await response.json()) as ReadonlyArray<{ readonly name: string }>
        return text(
          repositories.length === 0
            ? `No repositories at ${name}.`
            : `${repositories.length} ${repositories.length === 1 ? "repository" : "repositories"} at ${name}:\n${repositories.map((r) => r.name).join("\n")}`,
        )
      }),
    )
  }
  return {
    connections,
    register,
    close: async () => {
      await connections.close()
      await vault?.close()
    },
  }
}
