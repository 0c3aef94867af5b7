import { createAuthClient } from "@keyway/client"
import { clientCredentials } from "@keyway/ext-client-credentials/client"

const auth = createAuthClient({
  extensions: [
    clientCredentials({
      issuer: "https://auth.example.com",
      clientId: "nightly-report",
      clientSecret: process.env.REPORT_CLIENT_SECRET ?? "",
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
