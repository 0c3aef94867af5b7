import { createAuthorizationServer } from "@keyway/authorization-server"
import { Grant } from "@keyway/core"
import { tokenExchange } from "@keyway/ext-token-exchange/authorization-server"

const clientSecret = process.env.NOTES_MCP_SECRET ?? ""

createAuthorizationServer({
  issuer: "https://auth.example.com",
  resources: [
    { uri: "https://mcp.example.com/mcp", name: "Notes", scopes: { "notes:read": "Read your notes" } },
    { uri: "https://api.example.com", name: "Files", scopes: { "files:read": "Read your files" } },
  ],
  // The MCP server is a confidential client that may use the token exchange grant.
  clients: [{ clientId: "notes-mcp", clientSecret, redirectUris: [], grantTypes: [Grant.TOKEN_EXCHANGE] }],
  extensions: [
    tokenExchange({
      clients: {
        "notes-mcp": {
          exchanges: [
            {
              from: "https://mcp.example.com/mcp",
              to: "https://api.example.com",
              scopes: { "files:read": "notes:read" },
            },
          ],
        },
      },
    }),
  ],
})
