import { createAuthorizationServer } from "@keyway/authorization-server"
import { identityAssertionGrant } from "@keyway/ext-enterprise-managed/authorization-server"

// The MCP server's authorization server: it accepts identity assertions from the enterprise identity provider.
const server = createAuthorizationServer({
  issuer: "https://auth.example.com",
  resources: [
    { uri: "https://mcp.example.com/mcp", scopes: { "notes:read": "Read notes", "notes:write": "Write notes" } },
  ],
  clients: [
    {
      clientId: "chat",
      clientSecret: process.env.CLIENT_SECRET ?? "",
      redirectUris: [],
      grantTypes: ["urn:ietf:params:oauth:grant-type:jwt-bearer"],
    },
  ],
  extensions: [
    identityAssertionGrant({
      identityProviders: [
        {
          issuer: "https://idp.example.com",
          jwksUri: "https://idp.example.com/jwks",
          clients: ["chat"],
          scope: "notes:read",
        },
      ],
    }),
  ],
})

export default server.handler
