import { createNodeServer, createProtectedResource, jwt, protectNode } from "@keyway/resource-server/node"

// Your MCP server's canonical URI and its authorization server.
const resource = process.env.MCP_RESOURCE ?? "https://mcp.example.com/mcp"
const issuer = process.env.ISSUER ?? "https://auth.example.com"

const protectedResource = createProtectedResource({
  resource,
  authorizationServers: [issuer],
  scopesSupported: ["notes:read"],
  verifier: jwt(), // signing keys from the issuer's metadata (jwks_uri)
})
// Runs only for authenticated requests; `body` is the request body, read within the limit.
const handler = protectNode(protectedResource, (_req, res, { token }) => {
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ hello: token.subject }))
})
// Behind your TLS-terminating proxy: request URLs are built from publicUrl, never from the Host header.
const port = Number(process.env.PORT ?? 3000)
createNodeServer(handler, { publicUrl: new URL(resource).origin }).listen(port, "127.0.0.1", () =>
  console.log(`MCP server ${resource}`),
)
