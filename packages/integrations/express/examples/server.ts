import { authOf, metadata, requireAuth } from "@keyway/express"
import { createProtectedResource, jwt } from "@keyway/resource-server"
import express from "express"

// Your MCP server's canonical URI and its authorization server.
const resource = process.env.MCP_RESOURCE ?? "https://mcp.example.com/mcp"
const issuer = process.env.ISSUER ?? "https://auth.example.com"

const protectedResource = createProtectedResource({
  resource,
  authorizationServers: [issuer],
  scopesSupported: ["notes:read"],
  verifier: jwt(), // signing keys from the issuer's metadata (jwks_uri)
})
const app = express().use(metadata(protectedResource))
app.post("/mcp", express.json(), requireAuth(protectedResource), (req, res) => {
  res.json({ hello: authOf(req)?.token.subject })
})
// Behind your TLS-terminating proxy.
app.listen(Number(process.env.PORT ?? 3000), "127.0.0.1", () => console.log(`MCP server ${resource}`))
