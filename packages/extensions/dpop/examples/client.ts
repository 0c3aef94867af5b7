import { createAuthClient } from "@keyway/client"
import { dpop } from "@keyway/ext-dpop/client"

// Tokens bound to a key this process holds; the private key never leaves Web Crypto.
const auth = createAuthClient({ extensions: [dpop()] })

const response = await auth.fetch("https://mcp.example.com/mcp", {
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
})
console.log(response.status)
await auth.dispose()
