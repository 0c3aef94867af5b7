import { createAuthorizationServer } from "@keyway/authorization-server"
import { dpopAuthorizationServer } from "@keyway/ext-dpop/authorization-server"

const server = createAuthorizationServer({
  issuer: "https://auth.example.com",
  resources: [{ uri: "https://mcp.example.com/mcp", scopes: { "notes:read": "Read notes" } }],
  // Shared by every instance behind the issuer: it signs login sessions and keys the DPoP nonces.
  sessionSecret: process.env.SESSION_SECRET ?? "",
  extensions: [dpopAuthorizationServer({ algorithms: ["ES256", "EdDSA"], nonce: true })],
})

const running = await server.listen({ port: 9000 })
console.log(`listening at ${server.issuer}`, running)
