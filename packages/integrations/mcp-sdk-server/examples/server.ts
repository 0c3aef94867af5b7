import { callerOf, protectMcp } from "@keyway/mcp-sdk-server"
import { createNodeServer, createProtectedResource, jwt } from "@keyway/resource-server/node"
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server"

// Your MCP server's canonical URI and its authorization server.
const resource = process.env.MCP_RESOURCE ?? "https://mcp.example.com/mcp"
const issuer = process.env.ISSUER ?? "https://auth.example.com"

const protectedResource = createProtectedResource({
  resource,
  authorizationServers: [issuer],
  scopesSupported: ["notes:read"],
  verifier: jwt(), // signing keys from the issuer's metadata (jwks_uri)
})
// The SDK's server for each request; its tool handlers see the caller.
const makeServer = () => {
  const server = new McpServer({ name: "whoami", version: "1.0.0" })
  server.registerTool("whoami", { description: "Who is calling" }, async (ctx) => ({
    content: [{ type: "text", text: callerOf(ctx)?.subject ?? "nobody" }],
  }))
  return server
}
const handler = protectMcp(protectedResource, createMcpHandler(makeServer))
// Behind your TLS-terminating proxy: request URLs are built from publicUrl, never from the Host header.
const port = Number(process.env.PORT ?? 3000)
createNodeServer(handler, { publicUrl: new URL(resource).origin }).listen(port, "127.0.0.1", () =>
  console.log(`MCP server ${resource}`),
)
