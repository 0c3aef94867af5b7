import { createAuthorizationServer } from "@keyway/authorization-server"
import { clientCredentialsGrant } from "@keyway/ext-client-credentials/authorization-server"

const server = createAuthorizationServer({
  issuer: "https://auth.example.com",
  resources: [{ uri: "https://mcp.example.com/mcp", scopes: { "notes:read": "Read notes" } }],
  clients: [
    {
      clientId: "nightly-report",
      clientSecret: process.env.REPORT_CLIENT_SECRET ?? "",
      redirectUris: [],
      grantTypes: ["client_credentials"],
    },
  ],
  extensions: [clientCredentialsGrant({ clients: { "nightly-report": { scope: "notes:read" } } })],
})

const running = await server.listen({ port: 9000 })
console.log(`listening at ${server.issuer}`, running)
