import { createConnections, KeyRing, Vault } from "@keyway/connections"
import { connectionTools } from "@keyway/connections/mcp-sdk"
import { protectMcp } from "@keyway/mcp-sdk-server"
import { createNodeServer, createProtectedResource, jwt } from "@keyway/resource-server/node"
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server"

const origin = "https://notes.example.com"
const secret = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is not set`)
  return value
}

const connections = createConnections({
  baseUrl: origin,
  serverName: "Notes",
  providers: {
    // GitHub publishes no authorization server metadata: its endpoints are given.
    github: {
      name: "GitHub",
      endpoints: {
        authorization: "https://github.com/login/oauth/authorize",
        token: "https://github.com/login/oauth/access_token",
      },
      clientId: secret("GITHUB_CLIENT_ID"),
      clientSecret: secret("GITHUB_CLIENT_SECRET"),
      scopes: ["read:user"],
      apiBase: "https://api.github.com",
    },
  },
  // The keys come from KEYWAY_VAULT_KEYS ("id:key,..." with the current key first).
  vault: Vault.memoryVault(KeyRing.fromEnv(process.env)),
})

const protectedResource = createProtectedResource({
  resource: `${origin}/mcp`,
  authorizationServers: ["https://auth.example.com"],
  scopesSupported: ["notes:read"],
  verifier: jwt(),
})
const mcp = protectMcp(
  protectedResource,
  createMcpHandler(() => {
    const server = new McpServer({ name: "notes", version: "1.0.0" })
    const { withConnection } = connectionTools(connections, { server })
    server.registerTool(
      "github_login",
      { description: "Your GitHub login" },
      withConnection("github", async (fetch) => {
        const user = (await (await fetch("user")).json()) as { login: string }
        return { content: [{ type: "text", text: user.login }] }
      }),
    )
    return server
  }),
)

// The connect pages and the provider's callback beside the MCP endpoint, on the same origin.
const handler = async (request: Request) => (await connections.handle(request)) ?? mcp(request)
createNodeServer(handler, { publicUrl: origin }).listen(3000, "127.0.0.1")
