import { createAuthClient } from "@keyway/client"
import { enterpriseManaged } from "@keyway/ext-enterprise-managed/client"

// The ID token from the user's single sign-on with the enterprise identity provider (OpenID Connect).
const idToken = process.env.ID_TOKEN ?? ""

const auth = createAuthClient({
  extensions: [
    enterpriseManaged({
      identityProvider: {
        issuer: "https://idp.example.com",
        clientId: "chat",
        clientSecret: process.env.IDP_CLIENT_SECRET ?? "",
      },
      idToken: () => idToken,
      clients: { issuer: "https://auth.example.com", clientId: "chat", clientSecret: process.env.CLIENT_SECRET ?? "" },
    }),
  ],
})

const response = await auth.fetch("https://mcp.example.com/mcp", {
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
})
console.log(response.status)
await auth.dispose()
