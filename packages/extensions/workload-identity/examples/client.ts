import { createAuthClient } from "@keyway/client"
import { workloadIdentity } from "@keyway/ext-workload-identity/client"
import { assertionFile } from "@keyway/ext-workload-identity/node"

// The MCP server to call, and the token your platform mounts and rotates (here a Kubernetes projected service
// account token whose audience is the authorization server's token endpoint).
const mcpServer = process.env.MCP_SERVER ?? "https://mcp.example.com/mcp"
const tokenFile = process.env.TOKEN_FILE ?? "/var/run/secrets/tokens/mcp-token"

const auth = createAuthClient({ extensions: [workloadIdentity({ assertion: assertionFile(tokenFile) })] })

// The first request is answered 401; the client discovers the authorization server, presents the workload's JWT
// (grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer, resource=the MCP server) and retries with the token.
const response = await auth.fetch(mcpServer, {
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
})
console.log(response.status, await response.text())
await auth.dispose()
