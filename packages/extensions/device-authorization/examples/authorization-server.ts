import { createAuthorizationServer } from "@keyway/authorization-server"
import { deviceAuthorization } from "@keyway/ext-device-authorization/authorization-server"

const server = createAuthorizationServer({
  issuer: "https://auth.example.com",
  resources: [{ uri: "https://mcp.example.com/mcp", scopes: { "notes:read": "Read notes" } }],
  users: [{ username: "alice", passwordHash: process.env.ALICE_PASSWORD_HASH ?? "" }],
  clients: [
    {
      clientId: "terminal-agent",
      clientName: "Terminal agent",
      redirectUris: [],
      grantTypes: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
    },
  ],
  extensions: [deviceAuthorization({ lifetime: 600, interval: 5 })],
})

const running = await server.listen({ port: 9000 })
console.log(`verification page at ${server.issuer}/device`, running)
