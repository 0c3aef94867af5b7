import { createAuthClient, UserAgent } from "@keyway/client/node"
import { enterpriseManaged, signIn } from "@keyway/ext-enterprise-managed/client"

// Single sign-on once, with the enterprise identity provider (OpenID Connect, in the system browser).
const idp = { issuer: "https://idp.example.com", clientId: "chat", clientSecret: process.env.IDP_CLIENT_SECRET ?? "" }
const { idToken } = await signIn({ ...idp, userAgent: UserAgent.browser() })

const auth = createAuthClient({
  extensions: [
    enterpriseManaged({
      identityProvider: idp,
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
