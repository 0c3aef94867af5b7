import { createAuthorizationServer, UserAuthenticator } from "@keyway/authorization-server"

const server = createAuthorizationServer({
  issuer: "https://auth.example.com",
  resources: [
    {
      uri: "https://mcp.example.com/mcp",
      name: "Example MCP server",
      scopes: { "tools:read": "See the list of tools", "tools:call": "Call tools on your behalf" },
    },
  ],
  // Older clients omit `resource`; without a default they are refused with invalid_target.
  defaultResource: "https://mcp.example.com/mcp",
  users: [{ username: "alice", passwordHash: await UserAuthenticator.hashPassword("correct horse battery staple") }],
  clients: [{ clientId: "my-cli", clientName: "My CLI", redirectUris: ["http://127.0.0.1/callback"] }],
  registration: true,
  storage: { type: "sqlite", path: "./keyway-as.db" },
})

const running = await server.listen({ port: 8080, host: "0.0.0.0" })
console.log(`listening on ${running.url}, issuer ${server.issuer}`)
