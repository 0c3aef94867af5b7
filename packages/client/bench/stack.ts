/**
 * The servers of the benchmark: Keyway's runnable authorization server (apps/authorization-server, SQLite in a
 * temporary directory, dynamic registration on) and the protected notes MCP server (apps/mcp-server), both on
 * loopback, loaded from their builds (a package does not depend on an app; a bench script may start one). The
 * abuse limits are off: the bench registers a client and signs in far more often per hour than they allow.
 */
import { randomBytes } from "node:crypto"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { freePort } from "@keyway/testing"

interface Running {
  readonly issuer?: string
  readonly url?: string
  readonly close: () => Promise<void>
}

export interface Stack {
  readonly mcpUrl: string
  readonly user: { readonly username: string; readonly password: string }
  readonly close: () => Promise<void>
}

export const startStack = async (root: string): Promise<Stack> => {
  const load = (path: string) => import(pathToFileURL(join(root, path)).href)
  const { startAuthorizationServer } = (await load("apps/authorization-server/dist/index.js")) as {
    startAuthorizationServer: (config: object, options: object) => Promise<Running & { issuer: string }>
  }
  const { startMcpServer, NOTE_SCOPES } = (await load("apps/mcp-server/dist/index.js")) as {
    startMcpServer: (config: object) => Promise<Running & { url: string }>
    NOTE_SCOPES: Record<string, string>
  }
  const mcpPort = await freePort()
  const dataDir = await mkdtemp(join(tmpdir(), "keyway-client-bench-servers-"))
  const user = { username: "alice", password: randomBytes(12).toString("base64url") }
  const quiet = { log: () => undefined }
  const as = await startAuthorizationServer(
    {
      port: 0,
      dataDir,
      users: [user],
      resources: [{ uri: `http://127.0.0.1:${mcpPort}/mcp`, name: "Keyway notes", scopes: NOTE_SCOPES }],
      registration: true,
      rateLimits: false,
    },
    quiet,
  )
  const mcp = await startMcpServer({ authorizationServer: as.issuer, port: mcpPort, ...quiet })
  return {
    mcpUrl: mcp.url,
    user,
    close: async () => {
      await mcp.close()
      await as.close()
      await rm(dataDir, { recursive: true, force: true })
    },
  }
}
