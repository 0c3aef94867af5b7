import { createTokenExchange } from "@keyway/ext-token-exchange/resource-server"
import { createNodeServer, createProtectedResource, jwt } from "@keyway/resource-server/node"

const resource = "https://mcp.example.com/mcp"
const exchange = createTokenExchange({ clientId: "notes-mcp", clientSecret: process.env.NOTES_MCP_SECRET ?? "" })

const protectedResource = createProtectedResource({
  resource,
  authorizationServers: ["https://auth.example.com"],
  scopesSupported: ["notes:read"],
  verifier: jwt(),
})
const handler = protectedResource.protect(async (_request, auth) => {
  // A token for the files API that names the same user and this server as the actor; the user's token stays here.
  const files = exchange.onBehalfOf(auth, { resource: "https://api.example.com", scope: "files:read" })
  const response = await files("https://api.example.com/files")
  return Response.json(await response.json())
})
createNodeServer(handler, { publicUrl: new URL(resource).origin }).listen(3000, "127.0.0.1")
