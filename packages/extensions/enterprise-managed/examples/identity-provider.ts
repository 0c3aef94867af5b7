import { createAuthorizationServer } from "@keyway/authorization-server"
import { identityAssertionIssuer } from "@keyway/ext-enterprise-managed/authorization-server"

// The enterprise identity provider: it signs employees in (OpenID Connect ID tokens) and issues identity assertions
// for the MCP authorization servers it knows, by its rules.
const idp = createAuthorizationServer({
  issuer: "https://idp.example.com",
  openid: true,
  resources: [{ uri: "https://idp.example.com/userinfo", scopes: { profile: "Your profile" } }],
  defaultResource: "https://idp.example.com/userinfo",
  users: [{ username: "alice", passwordHash: process.env.ALICE_PASSWORD_HASH ?? "" }],
  clients: [
    {
      clientId: "chat",
      clientSecret: process.env.IDP_CLIENT_SECRET ?? "",
      redirectUris: ["http://127.0.0.1/callback"],
      grantTypes: ["authorization_code", "urn:ietf:params:oauth:grant-type:token-exchange"],
    },
  ],
  extensions: [
    identityAssertionIssuer({
      authorizationServers: [
        { issuer: "https://auth.example.com", resources: ["https://mcp.example.com/mcp"], clients: { chat: "chat" } },
      ],
      rules: [{ users: ["alice"], resource: "https://mcp.example.com/mcp", scope: "notes:read" }],
    }),
  ],
})

export default idp.handler
