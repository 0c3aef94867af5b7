import { createAuthClient } from "@keyway/client"
import { dpop } from "@keyway/ext-dpop/client"

// Tokens bound to a key kept in the client's token store, beside the tokens it protects.
const auth = createAuthClient({ extensions: [dpop()] })

const response = await auth.fetch("https://mcp.example.com/mcp", {
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
})
console.log(response.status)
await auth.dispose()
