import { dpopScheme } from "@keyway/ext-dpop/resource-server"
import { createNodeServer, createProtectedResource, jwt } from "@keyway/resource-server/node"

const resource = "https://mcp.example.com/mcp"

const protectedResource = createProtectedResource({
  resource,
  authorizationServers: ["https://auth.example.com"],
  scopesSupported: ["notes:read"],
  verifier: jwt(),
  // Bearer stays accepted for unbound tokens; a DPoP-bound token must come with a fresh proof of its key.
  presentationSchemes: [dpopScheme({ algorithms: ["ES256", "EdDSA"], nonce: {} })],
})
const handler = protectedResource.protect((_request, { token }) => Response.json({ hello: token.subject }))
createNodeServer(handler, { publicUrl: new URL(resource).origin }).listen(3000, "127.0.0.1")
