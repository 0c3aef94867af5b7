import { serve } from "@hono/node-server"
import { type KeywayVariables, metadata, requireAuth } from "@keyway/hono"
import { createProtectedResource, jwt } from "@keyway/resource-server"
import { Hono } from "hono"

// Your MCP server's canonical URI and its authorization server.
const resource = process.env.MCP_RESOURCE ?? "https://mcp.example.com/mcp"
const issuer = process.env.ISSUER ?? "https://auth.example.com"

const protectedResource = createProtectedResource({
  resource,
  authorizationServers: [issuer],
  scopesSupported: ["notes:read"],
  verifier: jwt(), // signing keys from the issuer's metadata (jwks_uri)
})
const app = new Hono<{ Variables: KeywayVariables }>()
  .use(metadata(protectedResource))
  .use("/mcp", requireAuth(protectedResource))
app.post("/mcp", (c) => c.json({ hello: c.get("keyway").token.subject }))
// Behind your TLS-terminating proxy.
serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000), hostname: "127.0.0.1" }, () =>
  console.log(`MCP server ${resource}`),
)
